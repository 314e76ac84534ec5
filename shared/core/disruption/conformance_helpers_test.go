package disruption

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Helpers of the ported Karpenter v1.14.1 disruption suites
// (conformance_*_test.go): Karpenter's fixtures in the fixture's terms.

// The Karpenter files the cases come from.
const (
	suiteFile         = "pkg/controllers/disruption/suite_test.go"
	consolidationFile = "pkg/controllers/disruption/consolidation_test.go"
	emptinessFile     = "pkg/controllers/disruption/emptiness_test.go"
	driftFile         = "pkg/controllers/disruption/drift_test.go"
)

// addPool adds a NodePool like the default one, named name.
func (f *fixture) addPool(name string) *karpv1.NodePool {
	np := f.pool().DeepCopy()
	np.Name, np.UID = name, types.UID("uid-"+name)
	f.snap.NodePools = append(f.snap.NodePools, np)
	return np
}

// nodeIn adds a node (as node does) of NodePool pool.
func (f *fixture) nodeIn(pool, name, itype, zone, ct string) *karpv1.NodeClaim {
	nc := f.node(name, itype, zone, ct)
	nc.Labels[wellknown.NodePoolLabel] = pool // the node shares the map
	nc.Spec.Requirements[0].Values = []string{pool}
	return nc
}

// nodes adds n nodes named prefix-0 ... of one type, on-demand in the
// first zone, and returns their names.
func (f *fixture) nodes(prefix string, n int, itype string) []string {
	var out []string
	for i := range n {
		name := prefix + "-" + string(rune('a'+i))
		f.node(name, itype, zones[0], wellknown.CapacityTypeOnDemand)
		out = append(out, name)
	}
	return out
}

// initializedAt sets the claim's Initialized condition's time.
func (f *fixture) initializedAt(name string, at time.Time) {
	nc := f.claim(name)
	meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeInitialized)
	nc.SetCondition(karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "", metav1.NewTime(at))
}

// notInitialized makes the claim launched and registered, not initialized.
func (f *fixture) notInitialized(name string) {
	f.claim(name).SetCondition(karpv1.ConditionTypeInitialized, metav1.ConditionFalse, "NotInitialized", "", metav1.NewTime(f.now))
}

// propose computes a command and records it as the tick proposes one.
func (f *fixture) propose(t *testing.T) (*Command, *Record) {
	t.Helper()
	p := Compute(f.input())
	if p.Command == nil {
		t.Fatalf("no command proposed; unconsolidatable=%v blocked=%v", p.Unconsolidatable, p.Blocked)
	}
	rec := NewRecord(p.Command, f.now)
	f.record(rec)
	return p.Command, rec
}

// validateAfterWait moves the clock past the validation wait and
// validates the proposal, as the tick's next pass does.
func (f *fixture) validateAfterWait(rec *Record) (*Command, string) {
	f.now = f.now.Add(rec.Method.ValidationDelay() + time.Second)
	return Validate(f.input(), rec)
}

// noteFor is the message of the plan's note on claim in notes containing
// want, "" when there is none.
func noteFor(notes []Note, claim, want string) string {
	for _, n := range notes {
		if n.NodeClaim == claim && strings.Contains(n.Message, want) {
			return n.Message
		}
	}
	return ""
}

// mkOfferings is a type with the given offerings (zone, capacity type,
// price, available), cores and GiB.
func mkOfferings(name string, cpu, memGi int64, offers ...scheduling.Offering) *scheduling.InstanceType {
	it := mkType(name, cpu, memGi, 1)
	it.Offerings = offers
	return it
}

func offer(zone, ct string, price float64, available bool) scheduling.Offering {
	return scheduling.Offering{Zone: zone, CapacityType: ct, Price: price, Available: available}
}

// doNotDisrupt annotates a pod karpenter.sh/do-not-disrupt.
func doNotDisrupt(v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[wellknown.DoNotDisruptAnnotation] = v
	}
}

// labelled sets a pod's labels.
func labelled(l map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels = l }
}

// ownedBy sets a pod's controller.
func ownedBy(kind string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: "owner", Controller: new(true)}}
	}
}

// candidateWhy is why claim is not a candidate for method m's class ("" if
// it is one).
func (f *fixture) candidateWhy(name string, eventual bool) string {
	_, why := newCluster(f.input()).candidate(f.claim(name), eventual, nil)
	return why
}

// candidateNames are the claims Compute finds candidates of method m.
func (f *fixture) eligible(m Method) int {
	return Compute(f.input()).Eligible[m]
}
