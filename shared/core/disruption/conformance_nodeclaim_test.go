package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/nodeclaim/disruption (drift_test.go,
// consolidation_test.go, suite_test.go): the Drifted and Consolidatable
// conditions, ported through StatusChanges, whose changes the disruption
// tick writes (settle applies them as that write would). Karpenter's fake
// cloud provider drift ("drifted") is an EC2NodeClass drift here: a newer
// AMI for the claim's type.

const (
	nodeClaimDriftFile         = "pkg/controllers/nodeclaim/disruption/drift_test.go"
	nodeClaimConsolidationFile = "pkg/controllers/nodeclaim/disruption/consolidation_test.go"
	nodeClaimDisruptionFile    = "pkg/controllers/nodeclaim/disruption/suite_test.go"
)

// settle writes StatusChanges onto the fixture's claims, as the tick does.
func (f *fixture) settle() {
	for _, ch := range StatusChanges(f.input()) {
		nc := ch.NodeClaim
		for _, t := range ch.Clear {
			meta.RemoveStatusCondition(&nc.Status.Conditions, t)
		}
		for _, c := range ch.Set {
			nc.SetCondition(c.Type, c.Status, c.Reason, c.Message, metav1.NewTime(f.now))
		}
		if !ch.LastPodEventTime.IsZero() {
			nc.Status.LastPodEventTime = metav1.NewTime(ch.LastPodEventTime)
		}
		for k, v := range ch.Annotations {
			nc.Annotations[k] = v
		}
	}
}

// cond is the claim's condition t, nil when it has none.
func (f *fixture) cond(name, t string) *metav1.Condition {
	return meta.FindStatusCondition(f.claim(name).Status.Conditions, t)
}

func (f *fixture) isTrue(name, t string) bool {
	c := f.cond(name, t)
	return c != nil && c.Status == metav1.ConditionTrue
}

// cloudDrift makes the class resolve a newer AMI, so launched claims of
// it drift (AMIDrift): Karpenter's fake cloud provider's Drifted.
func (f *fixture) cloudDrift() {
	f.class().Status.AMIs[0].ID = "ami-newer"
}

// unmanaged points the claim at another provider's NodeClass.
func unmanaged(nc *karpv1.NodeClaim) {
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "UnmanagedNodeClass", Name: "default"}
}

func TestConformanceNodeClaimDrift(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/nodeclaim/disruption", File: nodeClaimDriftFile, Spec: "Drift > " + spec}
	}
	od := wellknown.CapacityTypeOnDemand
	// one is Karpenter's BeforeEach: a launched claim of the pool, not
	// drifted, with its node.
	one := func(t *testing.T) (*fixture, *karpv1.NodeClaim) {
		f := newFixture(t)
		nc := f.node("n", "m.xlarge", zones[0], od)
		meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeDrifted)
		return f, nc
	}
	drifted := func(t *testing.T, f *fixture, want bool, reason string) {
		t.Helper()
		f.settle()
		got := f.isTrue("n", karpv1.ConditionTypeDrifted)
		if got != want {
			t.Fatalf("drifted %v, want %v (conditions %v)", got, want, f.claim("n").Status.Conditions)
		}
		if reason != "" && f.cond("n", karpv1.ConditionTypeDrifted).Reason != reason {
			t.Fatalf("drift reason %s, want %s", f.cond("n", karpv1.ConditionTypeDrifted).Reason, reason)
		}
	}
	notDrifted := func(t *testing.T, f *fixture) {
		t.Helper()
		f.settle()
		if c := f.cond("n", karpv1.ConditionTypeDrifted); c != nil {
			t.Fatalf("Drifted condition %v, want none", c)
		}
	}

	conformance.Run(t, c("Drift > should detect drift"), func(t *testing.T) {
		f, _ := one(t)
		f.cloudDrift()
		drifted(t, f, true, "")
	})
	conformance.Run(t, c("Drift > should ignore drift for NodeClaims not managed by this instance of Karpenter"), func(t *testing.T) {
		f, nc := one(t)
		f.cloudDrift()
		unmanaged(nc)
		notDrifted(t, f)
	})
	conformance.Run(t, c("should detect stale instance type drift if the instance type label doesn't exist"), func(t *testing.T) {
		f, nc := one(t)
		delete(nc.Labels, wellknown.InstanceTypeLabel)
		drifted(t, f, true, InstanceTypeNotFound)
	})
	conformance.Run(t, conformance.Case{Suite: "core/nodeclaim/disruption", File: nodeClaimDriftFile,
		Spec:    "Drift > should detect stale instance type drift if the instance type doesn't exist",
		Differs: "when the EC2NodeClass offers no instance type at all (its status not resolved yet, or the catalog not read), Karpless marks no claim of it drifted: an empty list is taken for not knowing, not for every type being gone, so a transient gap replaces no node; Karpenter marks them InstanceTypeNotFound"},
		func(t *testing.T) {
			f, _ := one(t)
			f.types = nil
			drifted(t, f, true, InstanceTypeNotFound)
		})
	conformance.Run(t, c("should detect stale instance type drift if the instance type offerings doesn't exist"), func(t *testing.T) {
		f, _ := one(t)
		for _, it := range f.types {
			it.Offerings = nil
		}
		drifted(t, f, true, InstanceTypeNotFound)
	})
	conformance.Run(t, c("should detect stale instance type drift if the instance type offerings aren't compatible with the nodeclaim"), func(t *testing.T) {
		f, _ := one(t)
		it := f.typeNamed("m.xlarge")
		for i := range it.Offerings {
			it.Offerings[i].Zone = "test-1z"
		}
		drifted(t, f, true, InstanceTypeNotFound)
	})
	conformance.Run(t, c("should detect static drift before cloud provider drift"), func(t *testing.T) {
		f, nc := one(t)
		f.cloudDrift()
		f.pool().Annotations = map[string]string{wellknown.NodePoolHashAnnotation: "test-123456789", wellknown.NodePoolHashVersionAnnotation: wellknown.NodePoolHashVersion}
		nc.Annotations[wellknown.NodePoolHashAnnotation] = "test-123"
		nc.Annotations[wellknown.NodePoolHashVersionAnnotation] = wellknown.NodePoolHashVersion
		drifted(t, f, true, NodePoolDrifted)
	})
	conformance.Run(t, c("should detect node requirement drift before cloud provider drift"), func(t *testing.T) {
		f, _ := one(t)
		f.cloudDrift()
		f.pool().Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpDoesNotExist}}
		drifted(t, f, true, RequirementsDrifted)
	})
	for _, launched := range []struct {
		name   string
		status metav1.ConditionStatus
	}{{"unknown", metav1.ConditionUnknown}, {"false", metav1.ConditionFalse}} {
		conformance.Run(t, c("should remove the status condition from the nodeClaim when the nodeClaim launch condition is "+launched.name), func(t *testing.T) {
			f, nc := one(t)
			f.cloudDrift()
			nc.SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionTrue, AMIDrift, AMIDrift, metav1.NewTime(f.now))
			nc.SetCondition(karpv1.ConditionTypeLaunched, launched.status, "LaunchFailed", "LaunchFailed", metav1.NewTime(f.now))
			notDrifted(t, f)
		})
	}
	conformance.Run(t, c("should not detect drift if the nodePool does not exist"), func(t *testing.T) {
		f, _ := one(t)
		f.cloudDrift()
		f.snap.NodePools = nil
		notDrifted(t, f)
	})
	conformance.Run(t, c("should remove the status condition from the nodeClaim if the nodeClaim is no longer drifted"), func(t *testing.T) {
		f, nc := one(t)
		nc.SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionTrue, AMIDrift, AMIDrift, metav1.NewTime(f.now))
		notDrifted(t, f)
	})

	// NodeRequirement Drift: the claim carries Karpenter's test labels (the
	// pool, its type, zone and capacity type) and the entry's.
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
	}
	ct := func(v string) karpv1.NodeSelectorRequirementWithMinValues {
		return req(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, v)
	}
	os := func(op corev1.NodeSelectorOperator, v ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return req(wellknown.OSLabel, op, v...)
	}
	in := corev1.NodeSelectorOpIn
	labelled := func(f *fixture, nc *karpv1.NodeClaim, labels map[string]string) {
		keep := map[string]string{}
		for _, k := range []string{wellknown.NodePoolLabel, wellknown.InstanceTypeLabel, wellknown.ZoneLabel, wellknown.CapacityTypeLabel} {
			keep[k] = nc.Labels[k]
		}
		for k, v := range labels {
			keep[k] = v
		}
		nc.Labels = keep
	}
	entries := []struct {
		name     string
		old, new []karpv1.NodeSelectorRequirementWithMinValues
		labels   map[string]string
		drifted  bool
	}{
		{"should return drifted if the nodePool node requirement is updated",
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), req(wellknown.ArchLabel, in, "amd64"), os(in, "linux")},
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(wellknown.CapacityTypeSpot)},
			map[string]string{wellknown.CapacityTypeLabel: od, wellknown.ArchLabel: "amd64", wellknown.OSLabel: "linux"}, true},
		{"should return drifted if a new node requirement is added",
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), os(in, "linux")},
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), os(in, "linux"), req(wellknown.ArchLabel, in, "amd64")},
			map[string]string{wellknown.CapacityTypeLabel: od, wellknown.OSLabel: "linux"}, true},
		{"should return drifted if a node requirement is reduced",
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), os(in, "linux", "windows")},
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), os(in, "windows")},
			map[string]string{wellknown.CapacityTypeLabel: od, wellknown.OSLabel: "linux"}, true},
		{"should not return drifted if a node requirement is expanded",
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), os(in, "linux")},
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), os(in, "linux", "windows")},
			map[string]string{wellknown.CapacityTypeLabel: od, wellknown.OSLabel: "linux"}, false},
		{"should not return drifted if a node requirement set to Exists",
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), os(in, "linux")},
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), os(corev1.NodeSelectorOpExists)},
			map[string]string{wellknown.CapacityTypeLabel: od, wellknown.OSLabel: "linux"}, false},
		{"should return drifted if a node requirement set to DoesNotExists",
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), os(in, "linux")},
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), os(corev1.NodeSelectorOpDoesNotExist)},
			map[string]string{wellknown.CapacityTypeLabel: od, wellknown.OSLabel: "linux"}, true},
		{"should not return drifted if a nodeClaim is greater then node requirement",
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), req("test-label", corev1.NodeSelectorOpGt, "2")},
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), req("test-label", corev1.NodeSelectorOpGt, "10")},
			map[string]string{wellknown.CapacityTypeLabel: od, "test-label": "5"}, true},
		{"should not return drifted if a nodeClaim is less then node requirement",
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), req("test-label", corev1.NodeSelectorOpLt, "5")},
			[]karpv1.NodeSelectorRequirementWithMinValues{ct(od), req("test-label", corev1.NodeSelectorOpLt, "1")},
			map[string]string{wellknown.CapacityTypeLabel: od, "test-label": "2"}, true},
	}
	for _, e := range entries {
		conformance.Run(t, c("NodeRequirement Drift > "+e.name), func(t *testing.T) {
			f, nc := one(t)
			f.pool().Spec.Template.Spec.Requirements = e.old
			labelled(f, nc, e.labels)
			notDrifted(t, f)
			f.pool().Spec.Template.Spec.Requirements = e.new
			if e.drifted {
				drifted(t, f, true, RequirementsDrifted)
			} else {
				notDrifted(t, f)
			}
		})
	}
	conformance.Run(t, c("NodeRequirement Drift > should return drifted only on NodeClaims that are drifted from an updated nodePool"), func(t *testing.T) {
		f, nc := one(t)
		f.pool().Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{ct(od), os(in, "linux", "windows")}
		labelled(f, nc, map[string]string{wellknown.CapacityTypeLabel: od, wellknown.OSLabel: "linux"})
		two := f.node("two", "m.xlarge", zones[0], od)
		labelled(f, two, map[string]string{wellknown.CapacityTypeLabel: od, wellknown.OSLabel: "windows"})
		f.settle()
		if f.cond("n", karpv1.ConditionTypeDrifted) != nil || f.cond("two", karpv1.ConditionTypeDrifted) != nil {
			t.Fatal("drifted before the pool changed")
		}
		f.pool().Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{ct(od), os(in, "linux")}
		f.settle()
		if f.cond("n", karpv1.ConditionTypeDrifted) != nil {
			t.Fatal("the linux claim drifted")
		}
		if !f.isTrue("two", karpv1.ConditionTypeDrifted) {
			t.Fatal("the windows claim did not drift")
		}
	})

	// NodePool Static Drift: a pool with every static field set, its claim
	// stamped with its hash.
	static := func(t *testing.T) (*fixture, *karpv1.NodeClaim) {
		f, nc := one(t)
		tpl := &f.pool().Spec.Template
		tpl.Annotations = map[string]string{"keyAnnotation": "valueAnnotation", "keyAnnotation2": "valueAnnotation2"}
		tpl.Labels = map[string]string{"keyLabel": "valueLabel", "keyLabel2": "valueLabel2"}
		tpl.Spec.Taints = []corev1.Taint{{Key: "keyvalue1", Effect: corev1.TaintEffectNoExecute}}
		tpl.Spec.StartupTaints = []corev1.Taint{{Key: "startupkeyvalue1", Effect: corev1.TaintEffectNoExecute}}
		tpl.Spec.ExpireAfter = karpv1.MustParseNillableDuration("5m")
		tpl.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 5 * time.Minute}
		nc.Annotations[wellknown.NodePoolHashAnnotation] = f.pool().Hash()
		return f, nc
	}
	changes := []struct {
		name   string
		change func(tpl *karpv1.NodeClaimTemplate)
	}{
		{"Annoations", func(tpl *karpv1.NodeClaimTemplate) { tpl.Annotations["keyAnnotationTest"] = "valueAnnotationTest" }},
		{"Labels", func(tpl *karpv1.NodeClaimTemplate) { tpl.Labels["keyLabelTest"] = "valueLabelTest" }},
		{"Taints", func(tpl *karpv1.NodeClaimTemplate) {
			tpl.Spec.Taints = []corev1.Taint{{Key: "keytest2taint", Effect: corev1.TaintEffectNoExecute}}
		}},
		{"StartupTaints", func(tpl *karpv1.NodeClaimTemplate) {
			tpl.Spec.StartupTaints = []corev1.Taint{{Key: "keytest2taint", Effect: corev1.TaintEffectNoExecute}}
		}},
		{"NodeClassRef Name", func(tpl *karpv1.NodeClaimTemplate) {
			ref := *tpl.Spec.NodeClassRef
			ref.Name = "testName"
			tpl.Spec.NodeClassRef = &ref
		}},
		{"ExpireAfter", func(tpl *karpv1.NodeClaimTemplate) { tpl.Spec.ExpireAfter = karpv1.MustParseNillableDuration("100m") }},
		{"TerminationGracePeriod", func(tpl *karpv1.NodeClaimTemplate) {
			tpl.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 100 * time.Minute}
		}},
	}
	for _, ch := range changes {
		conformance.Run(t, c("NodePool Static Drift > should detect drift on changes to the static fields > "+ch.name), func(t *testing.T) {
			f, _ := static(t)
			notDrifted(t, f)
			ch.change(&f.pool().Spec.Template)
			drifted(t, f, true, NodePoolDrifted)
		})
	}
	conformance.Run(t, c("NodePool Static Drift > should not return drifted if karpenter.sh/nodepool-hash annotation is not present on the NodePool"), func(t *testing.T) {
		f, _ := static(t)
		f.pool().Annotations = map[string]string{}
		notDrifted(t, f)
	})
	conformance.Run(t, c("NodePool Static Drift > should not return drifted if karpenter.sh/nodepool-hash annotation is not present on the NodeClaim"), func(t *testing.T) {
		f, nc := static(t)
		f.pool().Spec.Template.Labels["changed"] = "true"
		nc.Annotations = map[string]string{wellknown.NodePoolHashVersionAnnotation: wellknown.NodePoolHashVersion}
		notDrifted(t, f)
	})
	conformance.Run(t, c("NodePool Static Drift > should not return drifted if the NodeClaim's karpenter.sh/nodepool-hash-version annotation does not match the NodePool's"), func(t *testing.T) {
		f, nc := static(t)
		f.pool().Annotations = map[string]string{wellknown.NodePoolHashAnnotation: "test-hash-1", wellknown.NodePoolHashVersionAnnotation: "test-version-1"}
		nc.Annotations = map[string]string{wellknown.NodePoolHashAnnotation: "test-hash-2", wellknown.NodePoolHashVersionAnnotation: "test-version-2"}
		notDrifted(t, f)
	})
	conformance.Run(t, c("NodePool Static Drift > should not return drifted if karpenter.sh/nodepool-hash-version annotation is not present on the NodeClaim"), func(t *testing.T) {
		f, nc := static(t)
		nc.Annotations = map[string]string{wellknown.NodePoolHashAnnotation: "test-hash-111111111"}
		notDrifted(t, f)
	})

	// Reserved Capacity: a reserved claim in the first zone, its type
	// offered in that zone only in the capacity types listed.
	reserved := []struct {
		name    string
		drifted bool
		cts     []string
	}{
		{"shouldn't drift when a matching instance type exists with reserved and on-demand offerings", false, []string{wellknown.CapacityTypeReserved, od}},
		{"shouldn't drift when a matching instance type exists with reserved offerings", false, []string{wellknown.CapacityTypeReserved}},
		{"shouldn't drift when a matching instance type exists with on-demand offerings", false, []string{od}},
		{"should drift when a matching instance type exists but the only offering is spot", true, []string{wellknown.CapacityTypeSpot}},
		{"should drift when a matching instance type exists but there are no compatible offerings", true, nil},
	}
	for _, e := range reserved {
		conformance.Run(t, c("Reserved Capacity > InstanceTypeNotFound > "+e.name), func(t *testing.T) {
			f, nc := one(t)
			allowReserved(f.pool())
			nc.Labels[wellknown.CapacityTypeLabel] = wellknown.CapacityTypeReserved
			nc.Labels[wellknown.CapacityReservationIDLabel] = "cr-1"
			it := f.typeNamed("m.xlarge")
			it.Offerings = nil
			for _, ct := range e.cts {
				o := scheduling.Offering{Zone: zones[0], CapacityType: ct, Price: 0.2, Available: true}
				if ct == wellknown.CapacityTypeReserved {
					o.ReservationID = "cr-1"
				}
				it.Offerings = append(it.Offerings, o)
			}
			drifted(t, f, e.drifted, "")
		})
	}
}

func TestConformanceNodeClaimConsolidatable(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/nodeclaim/disruption", File: nodeClaimConsolidationFile, Spec: "Underutilized > " + spec}
	}
	// one is Karpenter's BeforeEach: consolidateAfter 1m, an initialized
	// claim whose last pod event was 5 minutes ago.
	one := func(t *testing.T) (*fixture, *karpv1.NodeClaim) {
		f := newFixture(t)
		f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("1m")
		nc := f.node("n", "m.xlarge", zones[0], wellknown.CapacityTypeOnDemand)
		meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeConsolidatable)
		nc.Status.LastPodEventTime = metav1.NewTime(f.now.Add(-5 * time.Minute))
		return f, nc
	}
	consolidatable := func(t *testing.T, f *fixture, want bool) {
		t.Helper()
		f.settle()
		if got := f.isTrue("n", karpv1.ConditionTypeConsolidatable); got != want {
			t.Fatalf("consolidatable %v, want %v", got, want)
		}
	}
	gone := func(t *testing.T, f *fixture) {
		t.Helper()
		f.settle()
		if c := f.cond("n", karpv1.ConditionTypeConsolidatable); c != nil {
			t.Fatalf("Consolidatable condition %v, want none", c)
		}
	}
	conformance.Run(t, c("should ignore NodeClaims not managed by this instance of Karpenter"), func(t *testing.T) {
		f, nc := one(t)
		unmanaged(nc)
		nc.Status.LastPodEventTime = metav1.NewTime(f.now)
		gone(t, f)
		f.now = f.now.Add(time.Minute)
		gone(t, f)
	})
	conformance.Run(t, c("should mark NodeClaims as consolidatable"), func(t *testing.T) {
		f, nc := one(t)
		nc.Status.LastPodEventTime = metav1.NewTime(f.now)
		consolidatable(t, f, false)
		f.now = f.now.Add(time.Minute)
		consolidatable(t, f, true)
	})
	conformance.Run(t, c("should mark NodeClaims as consolidatable based on the nodeclaim initialized time"), func(t *testing.T) {
		f, nc := one(t)
		nc.Status.LastPodEventTime = metav1.Time{}
		f.now = f.cond("n", karpv1.ConditionTypeInitialized).LastTransitionTime.Time
		consolidatable(t, f, false)
		f.now = f.now.Add(time.Minute)
		consolidatable(t, f, true)
	})
	conformance.Run(t, c("should remove the status condition from the nodeClaim when lastPodEvent is too recent"), func(t *testing.T) {
		f, nc := one(t)
		nc.Status.LastPodEventTime = metav1.NewTime(f.now)
		nc.SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionTrue, "Consolidatable", "", metav1.NewTime(f.now))
		gone(t, f)
	})
	conformance.Run(t, c("should remove the status condition from the nodeClaim when consolidateAfter is never"), func(t *testing.T) {
		f, nc := one(t)
		f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
		nc.SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionTrue, "Consolidatable", "", metav1.NewTime(f.now))
		gone(t, f)
	})
	for _, init := range []struct {
		name   string
		status metav1.ConditionStatus
	}{{"the nodeClaim initialization condition is unknown", metav1.ConditionUnknown}, {"the nodeClaim is not initialized", metav1.ConditionFalse}} {
		conformance.Run(t, c("should remove the status condition from the nodeClaim when "+init.name), func(t *testing.T) {
			f, nc := one(t)
			nc.SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionTrue, "Consolidatable", "", metav1.NewTime(f.now))
			nc.SetCondition(karpv1.ConditionTypeInitialized, init.status, "NotInitialized", "NotInitialized", metav1.NewTime(f.now))
			gone(t, f)
		})
	}
}

func TestConformanceNodeClaimDisruption(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/nodeclaim/disruption", File: nodeClaimDisruptionFile, Spec: "Disruption > " + spec}
	}
	// one is Karpenter's BeforeEach: an initialized claim whose last pod
	// event was 5 minutes ago.
	one := func(t *testing.T) (*fixture, *karpv1.NodeClaim) {
		f := newFixture(t)
		nc := f.node("n", "m.xlarge", zones[0], wellknown.CapacityTypeOnDemand)
		for _, t := range []string{karpv1.ConditionTypeConsolidatable, karpv1.ConditionTypeDrifted} {
			meta.RemoveStatusCondition(&nc.Status.Conditions, t)
		}
		nc.Status.LastPodEventTime = metav1.NewTime(f.now.Add(-5 * time.Minute))
		return f, nc
	}
	conformance.Run(t, c("should set multiple disruption conditions simultaneously"), func(t *testing.T) {
		f, _ := one(t)
		f.cloudDrift()
		f.pool().Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("30s")
		f.now = f.now.Add(time.Minute)
		f.settle()
		if !f.isTrue("n", karpv1.ConditionTypeDrifted) || !f.isTrue("n", karpv1.ConditionTypeConsolidatable) {
			t.Fatalf("conditions %v, want Drifted and Consolidatable", f.claim("n").Status.Conditions)
		}
	})
	conformance.Run(t, c("should not set consolidatable condition for Static Nodepool"), func(t *testing.T) {
		f, _ := one(t)
		f.pool().Spec.Replicas = new(int64(1))
		f.cloudDrift()
		f.pool().Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("30s")
		f.now = f.now.Add(time.Minute)
		f.settle()
		if !f.isTrue("n", karpv1.ConditionTypeDrifted) {
			t.Fatal("not drifted")
		}
		if f.isTrue("n", karpv1.ConditionTypeConsolidatable) {
			t.Fatal("a static pool's claim is consolidatable")
		}
	})
	conformance.Run(t, c("should remove multiple disruption conditions simultaneously"), func(t *testing.T) {
		f, nc := one(t)
		f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
		nc.SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionTrue, AMIDrift, AMIDrift, metav1.NewTime(f.now))
		nc.SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionTrue, "Consolidatable", "", metav1.NewTime(f.now))
		f.settle()
		if f.cond("n", karpv1.ConditionTypeDrifted) != nil || f.cond("n", karpv1.ConditionTypeConsolidatable) != nil {
			t.Fatalf("conditions %v, want neither Drifted nor Consolidatable", f.claim("n").Status.Conditions)
		}
	})
}
