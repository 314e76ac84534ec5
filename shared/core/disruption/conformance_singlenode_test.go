package disruption

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/disruption/singlenodeconsolidation_test.go,
// ported. Karpenter remembers the NodePools a timed-out pass left unseen
// and puts them first; Karpless's pass returns the candidate it evaluated
// last (Plan.ResumeSingleNodeAfter) and the next one starts after it, in
// the same interleaved order (singleNodeOrder): the NodePools not reached
// come first, and a pass that ran to the end leaves nothing to resume.
func TestConformanceSingleNodeConsolidation(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/disruption", File: "pkg/controllers/disruption/singlenodeconsolidation_test.go", Spec: "SingleNodeConsolidation > Candidate Shuffling > " + spec}
	}
	pools := []string{"nodepool-1", "nodepool-2", "nodepool-3"}
	// candidates are Karpenter's createCandidates: n nodes of the cheapest
	// type with a pod each, per NodePool.
	candidates := func(t *testing.T, n int) (*fixture, []*Candidate) {
		f := newFixture(t)
		for _, p := range pools {
			f.addPool(p)
		}
		f.snap.NodePools = f.snap.NodePools[1:] // not "default"
		for _, p := range pools {
			for i := range n {
				name := fmt.Sprintf("%s-%d", p, i)
				f.nodeIn(p, name, "m.large", zones[0], wellknown.CapacityTypeOnDemand)
				f.pod(name+"-p", name, "100m", "64Mi")
			}
		}
		cands, _ := newCluster(f.input()).candidates(SingleNodeConsolidation, nil)
		return f, cands
	}
	ratio := func(cn *Candidate) float64 { return cn.Price / cn.RescheduleCost }

	conformance.Run(t, c("should sort candidates by savings ratio descending"), func(t *testing.T) {
		_, cands := candidates(t, 3)
		sorted := singleNodeOrder(cands, "")
		if len(sorted) != 9 {
			t.Fatalf("%d candidates", len(sorted))
		}
		for i := range len(sorted) - 1 {
			if ratio(sorted[i]) < ratio(sorted[i+1]) {
				t.Fatalf("ratio %v before %v", ratio(sorted[i]), ratio(sorted[i+1]))
			}
		}
	})
	conformance.Run(t, c("should prioritize nodepools that timed out in previous runs"), func(t *testing.T) {
		// The previous pass timed out after nodepool-1's first candidate:
		// nodepool-2 was not reached.
		_, cands := candidates(t, 3)
		sorted := singleNodeOrder(cands, singleNodeOrder(cands, "")[0].Name())
		if len(sorted) != 9 || sorted[0].NodePool.Name != "nodepool-2" {
			t.Fatalf("first %s of %d, want nodepool-2's", sorted[0].Name(), len(sorted))
		}
	})
	conformance.Run(t, c("should sort candidates by savings ratio with different disruption costs"), func(t *testing.T) {
		_, cands := candidates(t, 3)
		costs := []float64{20, 5, 1} // per NodePool, by node index
		for _, cn := range cands {
			var i int
			fmt.Sscanf(cn.Name()[len(cn.NodePool.Name)+1:], "%d", &i)
			cn.RescheduleCost = costs[i]
		}
		sorted := singleNodeOrder(cands, "")
		for i, cn := range sorted {
			want := []float64{1, 5, 20}[i/3]
			if cn.RescheduleCost != want {
				t.Fatalf("candidate %d (%s) has cost %v, want %v", i, cn.Name(), cn.RescheduleCost, want)
			}
		}
	})
	conformance.Run(t, c("should reset timed out nodepools when all nodepools are evaluated"), func(t *testing.T) {
		f, cands := candidates(t, 1)
		f.opts.ResumeSingleNodeAfter = singleNodeOrder(cands, "")[0].Name()
		p := Compute(f.input())
		if p.Stopped || p.ResumeSingleNodeAfter != "" {
			t.Fatalf("stopped %v, resume after %q: a pass that saw every NodePool leaves nothing to resume", p.Stopped, p.ResumeSingleNodeAfter)
		}
	})
	conformance.Run(t, c("should mark nodepools as timed out when timeout occurs"), func(t *testing.T) {
		// Out of time before the first candidate: the next pass starts
		// from the beginning, every NodePool unseen.
		f, cands := candidates(t, 10)
		f.opts.Stop = func() bool { return true }
		in := f.input()
		v := newCluster(in)
		plan := &Plan{}
		left := map[string]int{"nodepool-1": 30, "nodepool-2": 30, "nodepool-3": 30}
		if cmd := v.newWorld("").singleNode(cands, left, plan); cmd != nil {
			t.Fatalf("command %s", cmd)
		}
		if !plan.Stopped || plan.ResumeSingleNodeAfter != "" {
			t.Fatalf("stopped %v, resume after %q", plan.Stopped, plan.ResumeSingleNodeAfter)
		}
		if first := singleNodeOrder(cands, plan.ResumeSingleNodeAfter)[0]; first.NodePool.Name != "nodepool-1" {
			t.Fatalf("next pass starts with %s", first.Name())
		}
	})
}

// Karpenter v1.14.1 pkg/controllers/disruption/suite_test.go's Simulate
// Scheduling, and Candidate Filtering's do-not-disrupt DaemonSet pod.
func TestConformanceSimulateScheduling(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/disruption", File: suiteFile, Spec: spec}
	}
	od := wellknown.CapacityTypeOnDemand
	conformance.Run(t, c("Simulate Scheduling > should allow pods on deleting nodes to reschedule to uninitialized nodes"), func(t *testing.T) {
		// Ten nodes with room for one 2-core pod each, all but the
		// candidate being deleted.
		f := newFixture(t)
		f.types = []*scheduling.InstanceType{mkType("three.cpu", 3, 8, 0.3)}
		f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
		at := metav1.NewTime(f.now)
		for i := range 10 {
			nc := f.node(fmt.Sprintf("n%d", i), "three.cpu", zones[0], od)
			if i > 0 {
				nc.DeletionTimestamp = &at
			}
		}
		f.pod("p", "n0", "2", "100Mi")
		v := newCluster(f.input())
		cn, why := v.candidate(f.claim("n0"), false, nil)
		if cn == nil {
			t.Fatalf("not a candidate: %s", why)
		}
		if sim := v.newWorld("").simulate([]*Candidate{cn}, -1, false); sim.failure != "" {
			t.Fatalf("pod error: %s", sim.failure)
		}
	})
	conformance.Run(t, c("Simulate Scheduling > should allow multiple replace operations to happen successively"), func(t *testing.T) {
		// Ten drifted nodes, each pod pinned to its node's partition;
		// budget 3: three replacements one after the other, then none.
		f := newFixture(t)
		f.types = []*scheduling.InstanceType{mkType("three.cpu", 3, 8, 0.3)}
		np := f.pool()
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			karpv1.NodeSelectorRequirementWithMinValues{Key: "test-partition", Operator: corev1.NodeSelectorOpExists})
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "3"}}
		for i := range 10 {
			name := fmt.Sprintf("n%d", i)
			nc := f.node(name, "three.cpu", zones[0], od)
			nc.Labels["test-partition"] = fmt.Sprint(i)
			nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration("5m")
			nc.SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionTrue, "NodePoolDrifted", "", metav1.NewTime(f.now.Add(-time.Minute)))
			f.pod("p"+name, name, "100m", "100Mi", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"test-partition": fmt.Sprint(i)}
			})
		}
		for pass := range 4 {
			p := Compute(f.input())
			if pass == 3 {
				if p.Command != nil {
					t.Fatalf("fourth command %s past the budget of 3", p.Command)
				}
				return
			}
			cmd := mustCommand(t, p, Drift)
			if len(cmd.Candidates) != 1 || len(cmd.Replacements) != 1 {
				t.Fatalf("pass %d: command %s, want one node replaced by one", pass, cmd)
			}
			// Carried out: the candidate in an executing command, its
			// replacement launched and not yet initialized.
			id := fmt.Sprintf("cmd-%d", pass)
			name := cmd.Candidates[0].Name()
			rname := ReplacementName(cmd.Replacements[0].NodePool, id, 0)
			f.record(&Record{ID: id, Method: Drift, Phase: Executing, Candidates: []string{name}, Replacements: []string{rname}})
			it, o := cmd.Replacements[0].CheapestOffering()
			r := f.node(rname, it.Name, o.Zone, o.CapacityType)
			r.Labels["test-partition"] = f.claim(name).Labels["test-partition"]
			r.Annotations[ReplacementAnnotation] = id
			f.notInitialized(rname)
			f.nodeObj(rname).Status.Conditions[0].Status = corev1.ConditionFalse
		}
	})
	conformance.Run(t, c("Simulate Scheduling > can replace node with a local PV (ignoring hostname affinity)"), func(t *testing.T) {
		// A StatefulSet pod's local volume is pinned to the node by
		// hostname: that affinity ends with the node, so it does not keep
		// the pod from a replacement.
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		sc := "local-path"
		noProvisioner := "kubernetes.io/no-provisioner"
		f.snap.StorageClasses = append(f.snap.StorageClasses, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: sc}, Provisioner: noProvisioner})
		f.snap.PVs = append(f.snap.PVs, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv"},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName:       sc,
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/local"}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: wellknown.HostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"n"}}},
				}}}},
			},
		})
		f.snap.PVCs = append(f.snap.PVCs, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc", Namespace: "default", Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
			Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv", StorageClassName: &sc},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
		})
		f.pod("p", "n", "1", "1Gi", ownedBy("StatefulSet"), func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc"}}}}
		})
		_, rec := f.propose(t)
		cmd, why := f.validateAfterWait(rec)
		if cmd == nil || cmd.Decision() != "replace" || names(cmd.Candidates) != "n" {
			t.Fatalf("validated %v (%s), want n replaced", cmd, why)
		}
	})
	conformance.Run(t, c("Simulate Scheduling > should ensure that we do not duplicate capacity for disrupted nodes with provisioning"), func(t *testing.T) {
		// Drift has tainted its candidate and not created the replacement
		// yet: provisioning launches nothing for the candidate's pods.
		f := newFixture(t)
		nc := f.node("n", "m.4xlarge", zones[0], od)
		nc.SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionTrue, "NodePoolDrifted", "", metav1.NewTime(f.now))
		f.pod("p", "n", "1", "1Gi")
		mustCommand(t, Compute(f.input()), Drift)
		f.nodeObj("n").Spec.Taints = []corev1.Taint{wellknown.DisruptedNoScheduleTaint}
		pods := planning.PodsToProvision(f.snap, f.now)
		res := scheduling.Solve(planning.SimulationInput(f.snap, pods, f.input().Classes), scheduling.Provisioning())
		if len(res.NewNodeClaims) != 0 {
			t.Fatalf("provisioning launches %d node(s) for the pods of a node whose replacement is being created", len(res.NewNodeClaims))
		}
	})

	conformance.Run(t, c("Candidate Filtering > should not consider candidates that have do-not-disrupt daemonset pods scheduled"), func(t *testing.T) {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		f.pod("p", "n", "1", "1Gi", doNotDisrupt("true"), ownedBy("DaemonSet"))
		why := `pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/p)`
		if got := f.candidateWhy("n", false); got != why {
			t.Fatalf("why %q, want %q", got, why)
		}
		for _, n := range Compute(f.input()).Blocked {
			if n.NodeClaim == "n" && n.Node == "n" && n.Message == sentence(why) {
				return
			}
		}
		t.Fatalf("no DisruptionBlocked %q", sentence(why))
	})
}
