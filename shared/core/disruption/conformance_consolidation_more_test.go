package disruption

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/disruption/consolidation_test.go's
// Topology Consideration, Parallelization, Reserved Capacity, Preferences,
// MinValuesPolicy and Buffer Pods contexts, ported. Karpenter's
// PreferencePolicy and MinValuesPolicy options are Options.Preferences and
// Options.MinValues; its buffer pod counts are a CapacityBuffer's virtual
// pods placed on the nodes.
func TestConformanceConsolidationMore(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/disruption", File: consolidationFile, Spec: "Consolidation > " + spec}
	}
	od, spot := wellknown.CapacityTypeOnDemand, wellknown.CapacityTypeSpot

	// Topology Consideration: three zones, the node in the second the
	// dearest.
	z := []string{"test-1a", "test-1b", "test-1c"}
	topology := func(t *testing.T, middle string) *fixture {
		f := newFixture(t)
		var cheap, dear []scheduling.Offering
		for _, zone := range z {
			cheap = append(cheap, offer(zone, od, 0.1, true))
			dear = append(dear, offer(zone, od, 0.8, true))
		}
		f.types = []*scheduling.InstanceType{mkOfferings("cheap.large", 2, 8, cheap...), mkOfferings("dear.large", 2, 8, dear...)}
		f.node("a", "cheap.large", z[0], od)
		f.node("b", middle, z[1], od)
		f.node("c", "cheap.large", z[2], od)
		return f
	}
	conformance.Run(t, c("Topology Consideration > can replace node maintaining zonal topology spread"), func(t *testing.T) {
		f := topology(t, "dear.large")
		spread := func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": "test-zonal-spread"}
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: wellknown.ZoneLabel,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: p.Labels}}}
		}
		for i, n := range []string{"a", "b", "c"} {
			f.pod(fmt.Sprintf("p%d", i), n, "1", "1Gi", spread)
		}
		_, rec := f.propose(t)
		cmd, why := f.validateAfterWait(rec)
		if cmd == nil || cmd.Decision() != "replace" || names(cmd.Candidates) != "b" {
			t.Fatalf("validated %v (%s), want b replaced", cmd, why)
		}
		r := cmd.Replacements[0]
		if zones := scheduling.RequirementsFromNodePool(r.Requirements).Get(wellknown.ZoneLabel); !zones.Has(z[1]) || zones.Has(z[0]) || zones.Has(z[2]) {
			t.Fatalf("replacement zones %v, want %s only (the spread stays 1/1/1)", zones, z[1])
		}
		if it, _ := r.CheapestOffering(); it == nil || it.Name != "cheap.large" {
			t.Fatalf("replacement %v, want cheap.large", it)
		}
	})
	conformance.Run(t, c("Topology Consideration > won't delete node if it would violate pod anti-affinity"), func(t *testing.T) {
		f := topology(t, "cheap.large")
		anti := func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": "test"}
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{LabelSelector: &metav1.LabelSelector{MatchLabels: p.Labels}, TopologyKey: wellknown.HostnameLabel},
			}}}
		}
		for i, n := range []string{"a", "b", "c"} {
			f.pod(fmt.Sprintf("p%d", i), n, "1", "1Gi", anti)
		}
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s", p.Command)
		}
	})

	// Parallelization
	conformance.Run(t, c("Parallelization > should not schedule an additional node when receiving pending pods while consolidating"), func(t *testing.T) {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		f.pod("p", "n", "100m", "64Mi")
		_, rec := f.propose(t)
		cmd, why := f.validateAfterWait(rec)
		if cmd == nil || cmd.Decision() != "replace" {
			t.Fatalf("validated %v (%s), want a replacement", cmd, why)
		}
		// Executing: the candidate tainted, its replacement up; a pod
		// arrives before the candidate goes.
		f.nodeObj("n").Spec.Taints = []corev1.Taint{wellknown.DisruptedNoScheduleTaint}
		it, o := cmd.Replacements[0].CheapestOffering()
		f.node("replacement", it.Name, o.Zone, o.CapacityType)
		pending := f.pod("new", "", "100m", "64Mi")
		classes := f.input().Classes
		pods := planning.PodsToProvision(f.snap, f.now)
		res := scheduling.Solve(planning.SimulationInput(f.snap, pods, classes), scheduling.Provisioning())
		if len(res.NewNodeClaims) != 0 || len(res.Unschedulable) != 0 {
			t.Fatalf("provisioning launches %d node(s), leaves %d pod(s)", len(res.NewNodeClaims), len(res.Unschedulable))
		}
		if !slices.Contains(res.Existing["replacement"], pending) {
			t.Fatalf("the pending pod goes to %v, want the replacement", res.Existing)
		}
	})
	conformance.Run(t, c("Parallelization > should not consolidate a node that is launched for pods on a deleting node"), func(t *testing.T) {
		// The first node is deleting; the second was launched for the five
		// pods, of which two now run on it and three are still pending.
		f := newFixture(t)
		old := f.node("old", "m.2xlarge", zones[0], od)
		at := metav1.NewTime(f.now)
		old.DeletionTimestamp = &at
		f.nodeObj("old").DeletionTimestamp = &at
		f.node("new", "m.2xlarge", zones[0], od)
		f.initializedAt("new", f.now.Add(-11*time.Second)) // the nomination expired
		f.pod("p0", "new", "1", "1Gi")
		f.pod("p1", "new", "1", "1Gi")
		for i := 2; i < 5; i++ {
			f.pod(fmt.Sprintf("p%d", i), "", "1", "1Gi")
		}
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s", p.Command)
		}
	})

	// Reserved Capacity
	conformance.Run(t, c("Reserved Capacity > can consolidate from one reserved offering to another"), func(t *testing.T) {
		f := newFixture(t)
		allowReserved(f.pool())
		reserve(f.typeNamed("m.4xlarge"), "r-m.4xlarge", zones[0], 10)
		reserve(f.typeNamed("m.large"), "r-m.large", zones[0], 10)
		f.node("n", "m.4xlarge", zones[0], wellknown.CapacityTypeReserved).Labels[wellknown.CapacityReservationIDLabel] = "r-m.4xlarge"
		f.pod("p", "n", "100m", "64Mi")
		reservedInto(t, f, "m.large", "r-m.large")
	})
	for _, from := range []string{od, spot} {
		conformance.Run(t, c("Reserved Capacity > can consolidate into reserved capacity for the same instance pool > from "+from), func(t *testing.T) {
			f := newFixture(t)
			allowReserved(f.pool())
			f.opts.SpotToSpotConsolidation = true
			reserve(f.typeNamed("m.4xlarge"), "r-m.4xlarge", zones[0], 10)
			f.node("n", "m.4xlarge", zones[0], from)
			f.pod("p", "n", "100m", "64Mi")
			reservedInto(t, f, "m.4xlarge", "r-m.4xlarge")
		})
	}

	// Preferences: Karpenter's PreferencePolicy Ignore.
	conformance.Run(t, c("Preferences > should consolidate a node through deletion when ignoring preferences"), func(t *testing.T) {
		f := newFixture(t)
		f.opts.Preferences = scheduling.PreferencesIgnore
		onlyType(f, "m.xlarge")
		f.node("a", "m.xlarge", zones[0], od)
		f.node("b", "m.xlarge", zones[0], od)
		antiPreferred := func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": "foo"}
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: wellknown.HostnameLabel, LabelSelector: &metav1.LabelSelector{MatchLabels: p.Labels}}},
			}}}
		}
		f.pod("p0", "a", "100m", "64Mi", antiPreferred)
		f.pod("p1", "a", "100m", "64Mi", antiPreferred)
		f.pod("p2", "b", "100m", "64Mi", antiPreferred)
		_, rec := f.propose(t)
		cmd, why := f.validateAfterWait(rec)
		if cmd == nil || cmd.Decision() != "delete" || names(cmd.Candidates) != "b" {
			t.Fatalf("validated %v (%s), want b deleted", cmd, why)
		}
	})
	conformance.Run(t, c("Preferences > should consolidate a node through replacement when ignoring preferences"), func(t *testing.T) {
		f := newFixture(t)
		f.opts.Preferences = scheduling.PreferencesIgnore
		f.node("n", "m.4xlarge", zones[0], od)
		f.pod("p", "n", "100m", "64Mi", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
				{Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m.4xlarge"}},
				}}},
			}}}
		})
		_, rec := f.propose(t)
		cmd, why := f.validateAfterWait(rec)
		if cmd == nil || cmd.Decision() != "replace" {
			t.Fatalf("validated %v (%s), want a replacement", cmd, why)
		}
		if slices.ContainsFunc(cmd.Replacements[0].InstanceTypes, func(it *scheduling.InstanceType) bool { return it.Name == "m.4xlarge" }) {
			t.Fatalf("the replacement may launch m.4xlarge")
		}
	})

	// MinValuesPolicy
	conformance.Run(t, c("MinValuesPolicy > should not consolidate a node by relaxing min values when policy is set to BestEffort"), func(t *testing.T) {
		f := newFixture(t)
		f.opts.MinValues = scheduling.MinValuesBestEffort
		// The pool names every type; two are offered.
		f.types = []*scheduling.InstanceType{mkType("m.large", 2, 8, 0.10), mkType("m.4xlarge", 16, 64, 0.80)}
		f.pool().Spec.Weight = new(int32(100))
		f.pool().Spec.Template.Spec.Requirements = append(f.pool().Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
			Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m.large", "m.xlarge", "m.2xlarge", "m.4xlarge"}, MinValues: new(3)})
		f.node("n", "m.4xlarge", zones[0], od)
		f.pod("p", "n", "100m", "64Mi")
		p := Compute(f.input())
		if p.Command != nil {
			t.Fatalf("command %s", p.Command)
		}
		want := "minValues requirement is not met for label(s) (label(s)=[node.kubernetes.io/instance-type])"
		if msg := noteFor(p.Unconsolidatable, "n", want); msg == "" {
			t.Fatalf("notes %v, want one with %q", p.Unconsolidatable, want)
		} else if n := p.Unconsolidatable[slices.IndexFunc(p.Unconsolidatable, func(n Note) bool { return n.Message == msg })]; n.Node != "n" {
			t.Fatalf("note %+v not on the node too", n)
		}
	})

	// Buffer Pods: a CapacityBuffer's virtual pods on the nodes.
	conformance.Run(t, c("Buffer Pods > should not empty-consolidate a node with only buffer pods"), func(t *testing.T) {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		f.buffer("headroom", 5, "1")
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s", p.Command)
		}
	})
	conformance.Run(t, c("Buffer Pods > should allow consolidation of a node with real pods and buffer pods to a cheaper instance"), func(t *testing.T) {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		f.pod("p", "n", "1", "1Gi")
		f.buffer("headroom", 2, "1")
		cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
		if cmd.Decision() != "replace" || cmd.PriceAfter >= cmd.PriceBefore {
			t.Fatalf("command %s, want a cheaper replacement", cmd)
		}
	})
	conformance.Run(t, c("Buffer Pods > should skip buffer-only nodes in single-node consolidation but protect via emptiness"), func(t *testing.T) {
		// The buffer's room is on a (b is nearly full), whose real pods
		// are none.
		f := newFixture(t)
		f.node("a", "m.4xlarge", zones[0], od)
		f.node("b", "m.4xlarge", zones[0], od)
		f.pod("p", "b", "15", "1Gi")
		f.buffer("headroom", 4, "2")
		p := Compute(f.input())
		if p.Command != nil && slices.Contains(p.Command.CandidateNames(), "a") {
			t.Fatalf("command %s takes the buffer-only node", p.Command)
		}
		if want := `Node "a" has buffer pods`; noteFor(p.Unconsolidatable, "a", want) == "" {
			t.Fatalf("notes %v, want %q", p.Unconsolidatable, want)
		}
	})
	conformance.Run(t, c("Buffer Pods > should consolidate a buffer node once buffer pods are cleared"), func(t *testing.T) {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		f.buffer("headroom", 3, "1")
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s", p.Command)
		}
		f.snap.CapacityBuffers = nil
		cmd := mustCommand(t, Compute(f.input()), Emptiness)
		if names(cmd.Candidates) != "n" {
			t.Fatalf("command %s, want n deleted", cmd)
		}
	})
}

// reservedInto checks the plan replaces n with a node of type it in
// reservation id, pinned to it.
func reservedInto(t *testing.T, f *fixture, it, id string) {
	t.Helper()
	_, rec := f.propose(t)
	cmd, why := f.validateAfterWait(rec)
	if cmd == nil || cmd.Decision() != "replace" || names(cmd.Candidates) != "n" {
		t.Fatalf("validated %v (%s), want n replaced", cmd, why)
	}
	r := cmd.Replacements[0]
	got, o := r.CheapestOffering()
	if got == nil || got.Name != it || o.CapacityType != wellknown.CapacityTypeReserved || o.ReservationID != id {
		t.Fatalf("replacement launches %v %+v, want %s in reservation %s", got, o, it, id)
	}
	if rr := reqGet(r, wellknown.CapacityReservationIDLabel); rr == nil || !rr.Has(id) {
		t.Fatalf("replacement not pinned to %s: %v", id, r.Requirements)
	}
	if !strings.Contains(cmd.Why, it) {
		t.Fatalf("why %q", cmd.Why)
	}
}
