package disruption

import (
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/workload"
)

var (
	catalogOnce  sync.Once
	catalogTypes []*scheduling.InstanceType
	catalogErr   error
)

func benchTypes(tb testing.TB) []*scheduling.InstanceType {
	catalogOnce.Do(func() { catalogTypes, catalogErr = workload.InstanceTypes() })
	if catalogErr != nil {
		tb.Fatal(catalogErr)
	}
	return catalogTypes
}

// bigClusterOf is nodes nodes of common types with podsPerNode pods each,
// using util (0..1) of each node's cpu on average: a fifth of the pods
// spread over zones, a fifth have a hostname anti-affinity group.
// onlyKinds restricts the NodePool to the five instance types the nodes
// run, so that a packed cluster has nothing cheaper to move to.
func bigClusterOf(tb testing.TB, nodes, podsPerNode int, util float64, seed int64, onlyKinds bool) *Input {
	its := benchTypes(tb)
	byName := map[string]*scheduling.InstanceType{}
	for _, it := range its {
		byName[it.Name] = it
	}
	r := rand.New(rand.NewSource(seed))
	now := t0
	snap := &cluster.Snapshot{}
	np := workload.NodePool()
	np.UID = "np"
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("30s")
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "10%"}}
	np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
		karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceCategoryLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
		karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	)
	kinds := []string{"m5.xlarge", "c5.2xlarge", "r5.xlarge", "m5.2xlarge", "c5.4xlarge"}
	if onlyKinds {
		np.Spec.Template.Spec.Requirements[0].Values = []string{wellknown.CapacityTypeOnDemand}
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: kinds})
	}
	snap.NodePools = []*karpv1.NodePool{np}
	snap.NodeClasses = []*awsv1.EC2NodeClass{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}
	hash := np.Hash()
	for i := range nodes {
		it := byName[kinds[i%len(kinds)]]
		zone := workload.Zones[i%3]
		name := fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/250, i%250)
		pid := wellknown.ProviderID(zone, fmt.Sprintf("i-%017d", i))
		labels := map[string]string{}
		for k, v := range it.Labels {
			labels[k] = v
		}
		labels[wellknown.ZoneLabel] = zone
		labels[wellknown.CapacityTypeLabel] = wellknown.CapacityTypeOnDemand
		labels[wellknown.HostnameLabel] = name
		labels[wellknown.NodePoolLabel] = "default"
		labels[wellknown.EC2NodeClassLabel] = "default"
		created := metav1.NewTime(now.Add(-48 * time.Hour))
		nc := &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("default-%05d", i), UID: types.UID(fmt.Sprint("nc-", i)), Labels: labels, CreationTimestamp: created,
				Annotations: map[string]string{wellknown.NodePoolHashAnnotation: hash, wellknown.NodePoolHashVersionAnnotation: wellknown.NodePoolHashVersion}},
			Spec:   karpv1.NodeClaimSpec{NodeClassRef: np.Spec.Template.Spec.NodeClassRef, ExpireAfter: karpv1.MustParseNillableDuration("720h")},
			Status: karpv1.NodeClaimStatus{ProviderID: pid, NodeName: name, Allocatable: it.Allocatable, Capacity: it.Capacity},
		}
		for _, c := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, karpv1.ConditionTypeConsolidatable} {
			nc.SetCondition(c, metav1.ConditionTrue, c, "", metav1.NewTime(now.Add(-47*time.Hour)))
		}
		snap.NodeClaims = append(snap.NodeClaims, nc)
		snap.Nodes = append(snap.Nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: created},
			Spec:       corev1.NodeSpec{ProviderID: pid},
			Status:     corev1.NodeStatus{Allocatable: it.Allocatable, Capacity: it.Capacity, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		})
		cpu := it.Allocatable[corev1.ResourceCPU]
		mem := it.Allocatable[corev1.ResourceMemory]
		// This node's utilisation varies around util.
		u := min(util*(0.5+r.Float64()), 0.97)
		if util > 0.5 {
			u = min(util+0.1*r.Float64(), 0.97)
		}
		perPodCPU := int64(float64(cpu.MilliValue()) * u / float64(podsPerNode))
		perPodMem := int64(float64(mem.Value()) * u / float64(podsPerNode) * 0.8)
		for j := range podsPerNode {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("app-%d-%d", i, j), Namespace: "default", UID: types.UID(fmt.Sprintf("pod-%d-%d", i, j)),
					Labels:            map[string]string{"app": fmt.Sprint("app-", r.Intn(50))},
					CreationTimestamp: created,
					OwnerReferences:   []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: new(true)}},
				},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewMilliQuantity(max(perPodCPU, 10), resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(max(perPodMem, 1<<20), resource.BinarySI),
				}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
					{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
					{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				}},
			}
			switch j % 5 {
			case 1:
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
					MaxSkew: 5, TopologyKey: wellknown.ZoneLabel, WhenUnsatisfiable: corev1.ScheduleAnyway,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}},
				}}
			case 2:
				p.Labels["anti"] = fmt.Sprint("g-", r.Intn(200))
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: wellknown.HostnameLabel, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"anti": p.Labels["anti"]}}},
				}}}}
			}
			snap.Pods = append(snap.Pods, p)
		}
	}
	classes := map[string]*scheduling.NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: its}}
	return &Input{Cluster: snap, Simulation: planning.SimulationInput(snap, nil, classes), Classes: classes, Now: now}
}

func benchmarkCompute(b *testing.B, util float64, onlyKinds bool) {
	in := bigClusterOf(b, 500, 10, util, 1, onlyKinds)
	b.ReportAllocs()
	b.ResetTimer()
	var plan *Plan
	for range b.N {
		plan = Compute(in)
	}
	b.StopTimer()
	if plan.Command != nil {
		b.Logf("command: %s; simulations %d", plan.Command, plan.Simulations)
	} else {
		b.Logf("no command; simulations %d, unconsolidatable %d", plan.Simulations, len(plan.Unconsolidatable))
	}
}

// BenchmarkConsolidationPass is one decision over 500 nodes and 5,000 pods
// where consolidation finds work (nodes about 30% used).
func BenchmarkConsolidationPass(b *testing.B) { benchmarkCompute(b, 0.3, false) }

// BenchmarkConsolidationPassBusy has nodes 85-95% used.
func BenchmarkConsolidationPassBusy(b *testing.B) { benchmarkCompute(b, 0.85, false) }

// BenchmarkConsolidationPassPacked is the costly case: nodes 97% used and
// only the five types in use allowed, on-demand, so multi-node finds
// nothing and single-node works through the candidates (the pre-filter
// rules most out without a simulation) until one of them can be replaced.
func BenchmarkConsolidationPassPacked(b *testing.B) { benchmarkCompute(b, 0.97, true) }

// TestConsolidationPassFootprint reports time and peak heap of one pass
// over 500 nodes / 5,000 pods, which must fit a 256 MiB Lambda and a 60 s
// tick. Run with KARPLESS_BENCH=1 go test -run Footprint -v.
func TestConsolidationPassFootprint(t *testing.T) {
	if os.Getenv("KARPLESS_BENCH") == "" {
		t.Skip("set KARPLESS_BENCH=1 to measure a 500-node pass")
	}
	for _, c := range []struct {
		util      float64
		onlyKinds bool
	}{{0.3, false}, {0.85, false}, {0.97, true}} {
		util := c.util
		in := bigClusterOf(t, 500, 10, util, 1, c.onlyKinds)
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		var peak atomic.Uint64
		done := make(chan struct{})
		go func() {
			var m runtime.MemStats
			for {
				select {
				case <-done:
					return
				case <-time.After(2 * time.Millisecond):
					runtime.ReadMemStats(&m)
					if m.HeapInuse > peak.Load() {
						peak.Store(m.HeapInuse)
					}
				}
			}
		}()
		start := time.Now()
		plan := Compute(in)
		elapsed := time.Since(start)
		close(done)
		what := "none"
		if plan.Command != nil {
			what = plan.Command.String()
		}
		t.Logf("util %.2f: %s, %d simulations, heap in use before %.1f MiB, peak %.1f MiB; command: %s",
			util, elapsed, plan.Simulations, float64(base.HeapInuse)/(1<<20), float64(peak.Load())/(1<<20), what)
		if peak.Load() > 200<<20 {
			t.Errorf("peak heap %d MiB", peak.Load()>>20)
		}
		if elapsed > 40*time.Second {
			t.Errorf("pass took %s", elapsed)
		}
	}
}
