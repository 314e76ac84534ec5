package zonalshift

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1's zonal shift controller suite
// (aws/karpenter-provider-aws pkg/controllers/arczonalshift/suite_test.go),
// ported through Notes: a reconcile is one Notes call from the zones the
// last one saw (none, for a fresh controller) to those ARC lists now.
func azsCase(spec string) conformance.Case {
	return conformance.Case{Suite: "aws/controllers/arczonalshift", File: "pkg/controllers/arczonalshift/suite_test.go", Spec: "ARCZonalShiftController > " + spec}
}

// classWith is the suite's EC2NodeClass: a subnet in each of three zones.
func classWith(name string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: awsv1.EC2NodeClassStatus{Subnets: []awsv1.Subnet{
		{ID: "subnet-test1", Zone: "test-zone-1a", ZoneID: "tstz1-1a"},
		{ID: "subnet-test2", Zone: "test-zone-1b", ZoneID: "tstz1-1b"},
		{ID: "subnet-test3", Zone: "test-zone-1c", ZoneID: "tstz1-1c"},
	}}}
}

func poolOf(name, class string, zones ...string) *karpv1.NodePool {
	p := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: class}
	if len(zones) > 0 {
		p.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones}}
	}
	return p
}

// controller is the suite's controller: it remembers the zones its last
// reconcile saw, as Karpless keeps them between invocations.
type controller struct {
	pools   []*karpv1.NodePool
	classes map[string]*awsv1.EC2NodeClass
	seen    Zones
}

func (c *controller) reconcile(shifted ...string) []Note {
	cur := Parse("")
	for _, id := range shifted {
		if cur == nil {
			cur = Zones{}
		}
		cur[id] = true
	}
	notes := Notes(c.seen, cur, c.pools, c.classes)
	c.seen = cur
	return notes
}

func count(notes []Note, reason string) int {
	n := 0
	for _, note := range notes {
		if note.Reason() == reason {
			n++
		}
	}
	return n
}

func TestConformanceARCZonalShiftController(t *testing.T) {
	classes := map[string]*awsv1.EC2NodeClass{"default": classWith("default")}
	newController := func(pools ...*karpv1.NodePool) *controller {
		return &controller{pools: pools, classes: classes}
	}
	conformance.Run(t, azsCase("should emit a Warning event on an affected NodePool when a zone shifts"), func(t *testing.T) {
		notes := newController(poolOf("default", "default")).reconcile("tstz1-1a")
		if count(notes, ReasonActive) != 1 {
			t.Fatalf("notes %v, want one %s", notes, ReasonActive)
		}
		if want := "Zonal shift detected: offerings in zone test-zone-1a (tstz1-1a) are unavailable for this NodePool"; notes[0].Message() != want {
			t.Errorf("message %q, want %q", notes[0].Message(), want)
		}
		if notes[0].Cleared {
			t.Error("a shift that began is a Normal event; want Warning")
		}
	})
	conformance.Run(t, azsCase("should emit a Normal event on an affected NodePool when a zone shift clears"), func(t *testing.T) {
		c := newController(poolOf("default", "default"))
		if n := count(c.reconcile("tstz1-1a"), ReasonActive); n != 1 {
			t.Fatalf("%d %s, want 1", n, ReasonActive)
		}
		notes := c.reconcile()
		if count(notes, ReasonCleared) != 1 {
			t.Fatalf("notes %v, want one %s", notes, ReasonCleared)
		}
		if want := "Zonal shift cleared: offerings in zone test-zone-1a (tstz1-1a) are restored for this NodePool"; notes[0].Message() != want || !notes[0].Cleared {
			t.Errorf("message %q (cleared %v), want %q", notes[0].Message(), notes[0].Cleared, want)
		}
	})
	conformance.Run(t, azsCase("should not emit an event on a NodePool restricted to different zones"), func(t *testing.T) {
		if n := count(newController(poolOf("default", "default", "test-zone-1b", "test-zone-1c")).reconcile("tstz1-1a"), ReasonActive); n != 0 {
			t.Errorf("%d %s, want 0", n, ReasonActive)
		}
	})
	conformance.Run(t, azsCase("should emit an event on a NodePool with no zone restriction"), func(t *testing.T) {
		if n := count(newController(poolOf("default", "default")).reconcile("tstz1-1a"), ReasonActive); n != 1 {
			t.Errorf("%d %s, want 1", n, ReasonActive)
		}
	})
	conformance.Run(t, azsCase("should not emit an event for a shift in a zone the NodeClass does not resolve to"), func(t *testing.T) {
		if n := count(newController(poolOf("default", "default")).reconcile("tstz1-1z"), ReasonActive); n != 0 {
			t.Errorf("%d %s, want 0", n, ReasonActive)
		}
	})
	conformance.Run(t, azsCase("should not emit events when there is no state change between reconciles"), func(t *testing.T) {
		c := newController(poolOf("default", "default"))
		if n := count(c.reconcile("tstz1-1a"), ReasonActive); n != 1 {
			t.Fatalf("%d %s, want 1", n, ReasonActive)
		}
		if notes := c.reconcile("tstz1-1a"); len(notes) != 0 {
			t.Errorf("notes %v on an unchanged shift, want none", notes)
		}
	})
	conformance.Run(t, azsCase("should only emit on NodePools affected by the shifted zone"), func(t *testing.T) {
		notes := newController(poolOf("default", "default"), poolOf("restricted", "default", "test-zone-1b")).reconcile("tstz1-1a")
		if count(notes, ReasonActive) != 1 || notes[0].Pool.Name != "default" {
			t.Errorf("notes %v, want one %s on default", notes, ReasonActive)
		}
	})
}

func TestNotes(t *testing.T) {
	classes := map[string]*awsv1.EC2NodeClass{"default": classWith("default")}
	byID := poolOf("by-id", "default")
	byID.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: "topology.k8s.aws/zone-id", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"tstz1-1a"}}}
	noRef := poolOf("no-ref", "default")
	noRef.Spec.Template.Spec.NodeClassRef = nil
	for _, tc := range []struct {
		name      string
		prev, cur Zones
		pools     []*karpv1.NodePool
		want      []string // pool/zoneID/reason
	}{
		{name: "a zone ID requirement that excludes the zone", cur: Zones{"tstz1-1a": true}, pools: []*karpv1.NodePool{byID}},
		{name: "a pool of a class Karpless does not know", cur: Zones{"tstz1-1a": true}, pools: []*karpv1.NodePool{poolOf("other", "missing")}},
		{name: "a pool without a class reference", cur: Zones{"tstz1-1a": true}, pools: []*karpv1.NodePool{noRef}},
		{name: "one zone clears while another begins", prev: Zones{"tstz1-1a": true}, cur: Zones{"tstz1-1b": true},
			pools: []*karpv1.NodePool{poolOf("b", "default"), poolOf("a", "default")},
			want:  []string{"a/tstz1-1b/" + ReasonActive, "a/tstz1-1a/" + ReasonCleared, "b/tstz1-1b/" + ReasonActive, "b/tstz1-1a/" + ReasonCleared}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, n := range Notes(tc.prev, tc.cur, tc.pools, classes) {
				got = append(got, n.Pool.Name+"/"+n.ZoneID+"/"+n.Reason())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("notes %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("notes %v, want %v", got, tc.want)
					break
				}
			}
		})
	}
}
