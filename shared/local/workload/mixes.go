package workload

import (
	"fmt"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// Mix names a pod mix of the benchmark.
type Mix string

const (
	// KarpenterMix is Karpenter's own benchmark mix (Pods).
	KarpenterMix Mix = "karpenter"
	// NoAntiMix is the same with the hostname anti-affinity fifth plain.
	NoAntiMix Mix = "karpenter-no-anti"
	// MicroservicesMix is many small Deployments spread over zones, each
	// with a PodDisruptionBudget.
	MicroservicesMix Mix = "microservices"
	// BatchMix is Jobs of identical pods, some arm64-only, some on GPUs.
	BatchMix Mix = "batch"
)

// Mixes are all mixes in the order the benchmark reports them.
var Mixes = []Mix{KarpenterMix, NoAntiMix, MicroservicesMix, BatchMix}

// Workload is one batch of pending pods and what comes with it.
type Workload struct {
	Pods []*corev1.Pod
	PDBs []*policyv1.PodDisruptionBudget
	// ExtraNodePools says the mix needs the arm64 and GPU NodePools.
	ExtraNodePools bool
}

// Build makes n pending pods of a mix, the same for the same seed. Every
// pod has a controller owner (ReplicaSet or Job), as real pods do.
func Build(mix Mix, n int, seed int64) (Workload, error) {
	switch mix {
	case KarpenterMix, NoAntiMix:
		pods := Pods(Spec{Pods: n, Seed: seed, NoAntiAffinity: mix == NoAntiMix})
		for _, p := range pods {
			p.OwnerReferences = owner("ReplicaSet", "apps/v1", p.Name)
		}
		return Workload{Pods: pods}, nil
	case MicroservicesMix:
		return microservices(n, seed), nil
	case BatchMix:
		return batchJobs(n, seed), nil
	}
	return Workload{}, fmt.Errorf("unknown mix %q", mix)
}

func owner(kind, apiVersion, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(kind + "-" + name), Controller: new(true)}}
}

func pendingPod(name string, seed int64, seq int, labels map[string]string, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%05d", name, seq), Namespace: "default", Labels: labels,
			UID:               types.UID(fmt.Sprintf("%08d-%06d", seed, seq)),
			CreationTimestamp: metav1.Unix(1700000000, 0),
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse(mem),
		}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

func pick(r *rand.Rand, xs []string) string { return xs[r.Intn(len(xs))] }

// microservices are Deployments of 2 to 12 replicas of 50m to 1 cpu and
// 64Mi to 2Gi, each spread over zones (maxSkew 1, DoNotSchedule) and one
// in three preferring distinct hosts, as common charts set; each has a
// PodDisruptionBudget of maxUnavailable 1.
func microservices(n int, seed int64) Workload {
	r := rand.New(rand.NewSource(seed))
	var w Workload
	seq := 0
	for d := 0; len(w.Pods) < n; d++ {
		app := fmt.Sprintf("svc-%04d", d)
		labels := map[string]string{"app": app}
		cpu := pick(r, []string{"50m", "100m", "100m", "250m", "250m", "500m", "1"})
		mem := pick(r, []string{"64Mi", "128Mi", "256Mi", "512Mi", "1Gi", "2Gi"})
		replicas := min(2+r.Intn(11), n-len(w.Pods))
		prefersHosts := d%3 == 0
		for range replicas {
			seq++
			p := pendingPod(app, seed, seq, map[string]string{"app": app}, cpu, mem)
			p.OwnerReferences = owner("ReplicaSet", "apps/v1", app+"-rs")
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: wellknown.ZoneLabel, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
			}}
			if prefersHosts {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: wellknown.HostnameLabel, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}},
				}}}}
			}
			w.Pods = append(w.Pods, p)
		}
		one := intstr.FromInt32(1)
		w.PDBs = append(w.PDBs, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "default", UID: types.UID("pdb-" + app)},
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
		})
	}
	return w
}

// batchJobs are Jobs of 5 to 50 identical pods of 500m to 4 cpu and 1Gi
// to 16Gi; one Job in four requires arm64, one in twenty asks for a GPU
// each (and tolerates the GPU NodePool's taint).
func batchJobs(n int, seed int64) Workload {
	r := rand.New(rand.NewSource(seed))
	w := Workload{ExtraNodePools: true}
	seq := 0
	for j := 0; len(w.Pods) < n; j++ {
		job := fmt.Sprintf("job-%04d", j)
		cpu := pick(r, []string{"500m", "1", "2", "4"})
		mem := pick(r, []string{"1Gi", "2Gi", "4Gi", "8Gi", "16Gi"})
		size := min(5+r.Intn(46), n-len(w.Pods))
		gpu, arm := j%20 == 7, j%4 == 1
		for range size {
			seq++
			p := pendingPod(job, seed, seq, map[string]string{"batch.kubernetes.io/job-name": job}, cpu, mem)
			p.OwnerReferences = owner("Job", "batch/v1", job)
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			switch {
			case gpu:
				p.Spec.Containers[0].Resources.Requests[wellknown.ResourceNVIDIAGPU] = resource.MustParse("1")
				p.Spec.Tolerations = []corev1.Toleration{{Key: string(wellknown.ResourceNVIDIAGPU), Operator: corev1.TolerationOpExists}}
			case arm:
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}}},
				}}}
			}
			w.Pods = append(w.Pods, p)
		}
	}
	return w
}
