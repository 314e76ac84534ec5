package scheduling

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1
// pkg/controllers/provisioning/scheduling/instance_selection_test.go,
// ported whole: a new NodeClaim is launched on the cheapest offering there
// is for its pods, and every instance type it lists (what Karpenter's
// cloud provider is asked to create) meets the NodePool's and the pods'
// requirements.
const selectionFile = "pkg/controllers/provisioning/scheduling/instance_selection_test.go"

// selectionAssorted is fake.InstanceTypesAssorted: a type for each CPU,
// memory, zone, capacity type, operating system and architecture, one
// offering each, priced by its resources; shuffled, as the suite does.
func selectionAssorted() []*InstanceType {
	var out []*InstanceType
	for _, cpu := range []int{1, 2, 4, 8, 16, 32, 64} {
		for _, mem := range []int{1, 2, 4, 8, 16, 32, 64, 128} {
			for _, zone := range []string{fakeZone1, fakeZone2, fakeZone3} {
				for _, ct := range []string{wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand} {
					for _, os := range []string{"linux", "windows"} {
						for _, arch := range []string{"amd64", "arm64"} {
							res := rl("cpu", fmt.Sprint(cpu), "memory", fmt.Sprintf("%dGi", mem))
							it := fakeType(fmt.Sprintf("%d-cpu-%d-mem-%s-%s-%s-%s", cpu, mem, arch, os, zone, ct),
								fakeTypeOpts{arch: arch, resources: res, offerings: []Offering{fakeOffer(ct, zone, fakePrice(res))}})
							it.Labels[wellknown.OSLabel] = os
							out = append(out, it)
						}
					}
				}
			}
		}
	}
	rand.New(rand.NewSource(7)).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// cheapestPrice is the cheapest offering of all.
func cheapestPrice(its []*InstanceType) float64 {
	m := math.MaxFloat64
	for _, it := range its {
		for _, o := range it.Offerings {
			m = math.Min(m, o.Price)
		}
	}
	return m
}

// claimTypes are the instance types a new claim lists.
func claimTypes(its []*InstanceType, c *NewNodeClaim) []*InstanceType {
	allowed := reqOf(c, wellknown.InstanceTypeLabel)
	var out []*InstanceType
	for _, it := range its {
		if allowed.Has(it.Name) {
			out = append(out, it)
		}
	}
	return out
}

func TestConformanceInstanceSelection(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/provisioning/scheduling", File: selectionFile, Spec: "Instance Type Selection > " + spec}
	}
	in := corev1.NodeSelectorOpIn
	arch, os, zone, ct := wellknown.ArchLabel, wellknown.OSLabel, wellknown.ZoneLabel, wellknown.CapacityTypeLabel
	spot, od := wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand
	// pool is the suite's NodePool: spot or on-demand, arm64 or amd64;
	// reqs, when given, replace its requirements.
	pool := func(reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
		np := mkPool("default", withReqs(npReq(ct, in, spot, od), npReq(arch, in, "arm64", "amd64")))
		if len(reqs) > 0 {
			np.Spec.Template.Spec.Requirements = reqs
		}
		return np
	}
	// launch provisions one pod; it returns the claim, the node's labels
	// and the types it lists.
	launch := func(t *testing.T, its []*InstanceType, np *karpv1.NodePool, opts ...podOpt) (*NewNodeClaim, map[string]string, []*InstanceType) {
		t.Helper()
		p := fakePod(opts...)
		s := fakeSnapshot(its, []*karpv1.NodePool{np}, p)
		r := solve(t, s)
		_, labels := expectScheduled(t, s, r, p)
		cl := claimOf(r, p)
		return cl, labels, claimTypes(its, cl)
	}
	// cheapest expects the node's offering to be the cheapest of all.
	cheapest := func(t *testing.T, its []*InstanceType, cl *NewNodeClaim) {
		t.Helper()
		if _, o := cl.CheapestOffering(); o.Price != cheapestPrice(its) {
			t.Fatalf("node at %v, want the cheapest offering, %v", o.Price, cheapestPrice(its))
		}
	}
	// withLabel expects every type to have label key=value (zone and
	// capacity type: an offering of it).
	withLabel := func(key, value string) func(*testing.T, []*InstanceType) {
		return func(t *testing.T, its []*InstanceType) {
			t.Helper()
			for _, it := range its {
				ok := it.Labels[key] == value
				for _, o := range it.Offerings {
					ok = ok || (key == zone && o.Zone == value) || (key == ct && o.CapacityType == value)
				}
				if !ok {
					t.Fatalf("type %s listed without %s=%s", it.Name, key, value)
				}
			}
		}
	}
	// withOffering expects every type to have an offering of ct in zone.
	withOffering := func(capacityType, z string) func(*testing.T, []*InstanceType) {
		return func(t *testing.T, its []*InstanceType) {
			t.Helper()
			for _, it := range its {
				ok := false
				for _, o := range it.Offerings {
					ok = ok || (o.CapacityType == capacityType && o.Zone == z)
				}
				if !ok {
					t.Fatalf("type %s listed without an offering %s in %s", it.Name, capacityType, z)
				}
			}
		}
	}
	podReqs := func(exprs ...corev1.NodeSelectorRequirement) []podOpt { return []podOpt{nodeRequirements(exprs...)} }
	cheapestCases := []struct {
		title  string
		reqs   []karpv1.NodeSelectorRequirementWithMinValues
		pod    []podOpt
		checks []func(*testing.T, []*InstanceType)
	}{
		{title: "should schedule on one of the cheapest instances"},
		{title: "should schedule on one of the cheapest instances (pod arch = amd64)", pod: podReqs(expr(arch, in, "amd64")), checks: []func(*testing.T, []*InstanceType){withLabel(arch, "amd64")}},
		{title: "should schedule on one of the cheapest instances (pod arch = arm64)", pod: podReqs(expr(arch, in, "arm64")), checks: []func(*testing.T, []*InstanceType){withLabel(arch, "arm64")}},
		{title: "should schedule on one of the cheapest instances (prov arch = amd64)", reqs: []karpv1.NodeSelectorRequirementWithMinValues{npReq(arch, in, "amd64")}, checks: []func(*testing.T, []*InstanceType){withLabel(arch, "amd64")}},
		{title: "should schedule on one of the cheapest instances (prov arch = arm64)", reqs: []karpv1.NodeSelectorRequirementWithMinValues{npReq(arch, in, "arm64")}, checks: []func(*testing.T, []*InstanceType){withLabel(arch, "arm64")}},
		{title: "should schedule on one of the cheapest instances (prov os = windows)", reqs: []karpv1.NodeSelectorRequirementWithMinValues{npReq(os, in, "windows")}, checks: []func(*testing.T, []*InstanceType){withLabel(os, "windows")}},
		{title: "should schedule on one of the cheapest instances (pod os = windows)", pod: podReqs(expr(os, in, "windows")), checks: []func(*testing.T, []*InstanceType){withLabel(os, "windows")}},
		// The suite has this It, and the next, twice.
		{title: "should schedule on one of the cheapest instances (prov os = windows)", reqs: []karpv1.NodeSelectorRequirementWithMinValues{npReq(os, in, "windows")}, checks: []func(*testing.T, []*InstanceType){withLabel(os, "windows")}},
		{title: "should schedule on one of the cheapest instances (pod os = linux)", pod: podReqs(expr(os, in, "linux")), checks: []func(*testing.T, []*InstanceType){withLabel(os, "linux")}},
		{title: "should schedule on one of the cheapest instances (pod os = linux)", pod: podReqs(expr(os, in, "linux")), checks: []func(*testing.T, []*InstanceType){withLabel(os, "linux")}},
		{title: "should schedule on one of the cheapest instances (prov zone = test-zone-2)", reqs: []karpv1.NodeSelectorRequirementWithMinValues{npReq(zone, in, fakeZone2)}, checks: []func(*testing.T, []*InstanceType){withLabel(zone, fakeZone2)}},
		{title: "should schedule on one of the cheapest instances (pod zone = test-zone-2)", pod: podReqs(expr(zone, in, fakeZone2)), checks: []func(*testing.T, []*InstanceType){withLabel(zone, fakeZone2)}},
		{title: "should schedule on one of the cheapest instances (prov ct = spot)", reqs: []karpv1.NodeSelectorRequirementWithMinValues{npReq(ct, in, spot)}, checks: []func(*testing.T, []*InstanceType){withLabel(ct, spot)}},
		{title: "should schedule on one of the cheapest instances (pod ct = spot)", pod: podReqs(expr(ct, in, spot)), checks: []func(*testing.T, []*InstanceType){withLabel(ct, spot)}},
		{title: "should schedule on one of the cheapest instances (prov ct = ondemand, prov zone = test-zone-1)",
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{npReq(ct, in, od), npReq(zone, in, fakeZone1)}, checks: []func(*testing.T, []*InstanceType){withOffering(od, fakeZone1)}},
		{title: "should schedule on one of the cheapest instances (pod ct = spot, pod zone = test-zone-1)",
			pod: podReqs(expr(ct, in, spot), expr(zone, in, fakeZone1)), checks: []func(*testing.T, []*InstanceType){withOffering(spot, fakeZone1)}},
		{title: "should schedule on one of the cheapest instances (prov ct = spot, pod zone = test-zone-2)",
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{npReq(ct, in, spot)}, pod: podReqs(expr(zone, in, fakeZone2)), checks: []func(*testing.T, []*InstanceType){withOffering(spot, fakeZone2)}},
		{title: "should schedule on one of the cheapest instances (prov ct = ondemand/test-zone-1/arm64/windows)",
			reqs:   []karpv1.NodeSelectorRequirementWithMinValues{npReq(arch, in, "arm64"), npReq(os, in, "windows"), npReq(ct, in, od), npReq(zone, in, fakeZone1)},
			checks: []func(*testing.T, []*InstanceType){withOffering(od, fakeZone1), withLabel(os, "windows"), withLabel(arch, "arm64")}},
		{title: "should schedule on one of the cheapest instances (prov = spot/test-zone-2, pod = amd64/linux)",
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{npReq(arch, in, "amd64"), npReq(os, in, "linux")}, pod: podReqs(expr(ct, in, spot), expr(zone, in, fakeZone2)),
			checks: []func(*testing.T, []*InstanceType){withOffering(spot, fakeZone2), withLabel(os, "linux"), withLabel(arch, "amd64")}},
		{title: "should schedule on one of the cheapest instances (pod ct = spot/test-zone-2/amd64/linux)",
			pod:    podReqs(expr(arch, in, "amd64"), expr(os, in, "linux"), expr(ct, in, spot), expr(zone, in, fakeZone2)),
			checks: []func(*testing.T, []*InstanceType){withOffering(spot, fakeZone2), withLabel(os, "linux"), withLabel(arch, "amd64")}},
	}
	for _, tc := range cheapestCases {
		conformance.Run(t, c(tc.title), func(t *testing.T) {
			its := selectionAssorted()
			cl, _, listed := launch(t, its, pool(tc.reqs...), tc.pod...)
			cheapest(t, its, cl)
			for _, check := range tc.checks {
				check(t, listed)
			}
		})
	}

	// none expects the pod pending and nothing launched.
	none := func(t *testing.T, its []*InstanceType, np *karpv1.NodePool, opts ...podOpt) {
		t.Helper()
		p := fakePod(opts...)
		s := fakeSnapshot(its, []*karpv1.NodePool{np}, p)
		r := solve(t, s)
		expectNotScheduled(t, r, p)
		if len(r.NewNodeClaims) != 0 {
			t.Fatalf("%d NodeClaims, want none", len(r.NewNodeClaims))
		}
	}
	filter := func(its []*InstanceType, keep func(*InstanceType) bool) []*InstanceType {
		var out []*InstanceType
		for _, it := range its {
			if keep(it) {
				out = append(out, it)
			}
		}
		return out
	}
	// noArmInZone2 removes the arm64 types offered in zone 2.
	noArmInZone2 := func(it *InstanceType) bool {
		for _, o := range it.Offerings {
			if o.Zone == fakeZone2 {
				return it.Labels[arch] == "amd64"
			}
		}
		return true
	}
	conformance.Run(t, c("should not schedule if no instance type matches selector (pod arch = arm)"), func(t *testing.T) {
		its := filter(selectionAssorted(), func(it *InstanceType) bool { return it.Labels[arch] == "amd64" })
		none(t, its, pool(), nodeRequirements(expr(arch, in, "arm64")))
	})
	conformance.Run(t, c("should not schedule if no instance type matches selector (pod arch = arm zone=test-zone-2)"), func(t *testing.T) {
		none(t, filter(selectionAssorted(), noArmInZone2), pool(), nodeRequirements(expr(arch, in, "arm64"), expr(zone, in, fakeZone2)))
	})
	conformance.Run(t, c("should not schedule if no instance type matches selector (prov arch = arm / pod zone=test-zone-2)"), func(t *testing.T) {
		none(t, filter(selectionAssorted(), noArmInZone2), pool(npReq(arch, in, "arm64")), nodeRequirements(expr(zone, in, fakeZone2)))
	})
	conformance.Run(t, c("should schedule on an instance with enough resources"), func(t *testing.T) {
		its := selectionAssorted()
		before := make([][2]corev1.ResourceList, len(its))
		for i, it := range its {
			before[i] = [2]corev1.ResourceList{it.Capacity.DeepCopy(), it.Allocatable.DeepCopy()}
		}
		for _, cpu := range []float64{0.1, 1.0, 2, 2.5, 4, 8, 16} {
			for _, mem := range []float64{0.1, 1.0, 2, 4, 8, 16, 32} {
				opts := requests("cpu", fmt.Sprintf("%0.1f", cpu), "memory", fmt.Sprintf("%0.1fGi", mem))
				pods := []*corev1.Pod{fakePod(opts), fakePod(opts), fakePod(opts)}
				s := fakeSnapshot(its, []*karpv1.NodePool{pool()}, pods...)
				r := solve(t, s)
				where := map[string]bool{}
				for _, p := range pods {
					w, _ := expectScheduled(t, s, r, p)
					where[w] = true
				}
				if len(where) != 1 {
					t.Fatalf("%v CPU %vGi: pods on %d nodes, want one", cpu, mem, len(where))
				}
				total := SumRequests(pods)
				for _, it := range claimTypes(its, claimOf(r, pods[0])) {
					// The pods and the type's overhead (100m, 10Mi) take less
					// than its capacity.
					for name, overhead := range map[corev1.ResourceName]string{corev1.ResourceCPU: "100m", corev1.ResourceMemory: "10Mi"} {
						need := total[name].DeepCopy()
						need.Add(resource.MustParse(overhead))
						if have := it.Capacity[name]; need.Cmp(have) >= 0 {
							t.Fatalf("%v CPU %vGi: type %s listed with %s %s, the pods and overhead need %s", cpu, mem, it.Name, name, have.String(), need.String())
						}
					}
				}
			}
		}
		for i, it := range its {
			if !reflect.DeepEqual(before[i], [2]corev1.ResourceList{it.Capacity, it.Allocatable}) {
				t.Fatalf("type %s's resources changed by scheduling", it.Name)
			}
		}
	})
	conformance.Run(t, c("should schedule on cheaper on-demand instance even when spot price ordering would place other instance types first"), func(t *testing.T) {
		mk := func(name string, odPrice, spotPrice float64) *InstanceType {
			return fakeType(name, fakeTypeOpts{resources: rl("cpu", "1", "memory", "1Gi"), offerings: []Offering{
				fakeOffer(od, "test-zone-1a", odPrice), fakeOffer(spot, "test-zone-1a", spotPrice)}})
		}
		its := []*InstanceType{mk("test-instance1", 1.0, 0.2), mk("test-instance2", 1.3, 0.1)}
		_, labels, _ := launch(t, its, pool(npReq(ct, in, od)))
		expectLabel(t, labels, wellknown.InstanceTypeLabel, "test-instance1")
	})

	selectionMinValues(t, c)
}

// selectionMinValues is the suite's Context "MinValues".
func selectionMinValues(t *testing.T, c func(string) conformance.Case) {
	in := corev1.NodeSelectorOpIn
	const gen = "karpenter/numerical-value"
	// arm is the Context's instance types: arm64, linux, one spot offering
	// in "test-zone-1-spot", with the numerical label when given.
	arm := func(name, cpu, mem string, price float64, numeric string) *InstanceType {
		it := fakeType(name, fakeTypeOpts{arch: "arm64", resources: rl("cpu", cpu, "memory", mem),
			offerings: []Offering{fakeOffer(wellknown.CapacityTypeSpot, "test-zone-1-spot", price)}})
		if numeric != "" {
			it.Labels[gen] = numeric
		}
		return it
	}
	two := func() []*InstanceType {
		return []*InstanceType{arm("instance-type-1", "1", "1Gi", 0.52, ""), arm("instance-type-2", "4", "4Gi", 1.0, "")}
	}
	req := func(key string, op corev1.NodeSelectorOperator, minValues int, vals ...string) karpv1.NodeSelectorRequirementWithMinValues {
		r := npReq(key, op, vals...)
		r.MinValues = &minValues
		return r
	}
	pods := func(opts ...podOpt) []*corev1.Pod {
		o := append([]podOpt{requests("cpu", "0.9", "memory", "0.9Gi")}, opts...)
		return []*corev1.Pod{fakePod(o...), fakePod(o...)}
	}
	solveWith := func(t *testing.T, its []*InstanceType, reqs []karpv1.NodeSelectorRequirementWithMinValues, maxTypes int, ps []*corev1.Pod) (*Snapshot, *Results) {
		t.Helper()
		np := mkPool("default")
		np.Spec.Template.Spec.Requirements = reqs
		s := fakeSnapshot(its, []*karpv1.NodePool{np}, ps...)
		opts := Provisioning()
		opts.MaxInstanceTypes = maxTypes
		r := Solve(s, opts)
		checkInvariants(t, s, r)
		return s, r
	}
	// apart expects the two pods on two new nodes, the first listing two
	// types or more.
	apart := func(t *testing.T, its []*InstanceType, reqs ...karpv1.NodeSelectorRequirementWithMinValues) {
		t.Helper()
		ps := pods()
		s, r := solveWith(t, its, reqs, 60, ps)
		a, _ := expectScheduled(t, s, r, ps[0])
		b, _ := expectScheduled(t, s, r, ps[1])
		if a == b {
			t.Fatalf("both pods on %s, want two nodes", a)
		}
		if n := len(claimTypes(its, r.NewNodeClaims[0])); n < 2 {
			t.Fatalf("first NodeClaim lists %d types, want 2 or more", n)
		}
	}
	pending := func(t *testing.T, its []*InstanceType, maxTypes int, ps []*corev1.Pod, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *Results {
		t.Helper()
		_, r := solveWith(t, its, reqs, maxTypes, ps)
		for _, p := range ps {
			expectNotScheduled(t, r, p)
		}
		return r
	}
	it := wellknown.InstanceTypeLabel
	mv := "MinValues > "
	conformance.Run(t, c(mv+"should schedule respecting the minValues from instance-type requirements"), func(t *testing.T) {
		apart(t, two(), req(it, in, 2, "instance-type-1", "instance-type-2"))
	})
	conformance.Run(t, c(mv+"should schedule respecting the minValues in Gt operator"), func(t *testing.T) {
		its := []*InstanceType{arm("instance-type-1", "1", "1Gi", 0.52, "2"), arm("instance-type-2", "1", "1Gi", 1.0, "3"), arm("instance-type-3", "4", "4Gi", 1.2, "4")}
		apart(t, its, req(gen, corev1.NodeSelectorOpGt, 2, "2"))
	})
	conformance.Run(t, c(mv+"scheduler should fail if the minValues in Gt operator is not satisfied"), func(t *testing.T) {
		its := []*InstanceType{arm("instance-type-1", "1", "1Gi", 0.52, "2"), arm("instance-type-2", "4", "4Gi", 1.0, "3")}
		r := pending(t, its, 60, pods(nodeRequirements(expr(gen, corev1.NodeSelectorOpGt, "2"))), req(gen, corev1.NodeSelectorOpExists, 2))
		for _, e := range r.Unschedulable {
			if want := "minValues requirement is not met for label(s) (label(s)=[karpenter/numerical-value])"; !strings.Contains(e.Reason, want) {
				t.Fatalf("pod %s: %q, want it to say %q", e.Pod.Name, e.Reason, want)
			}
		}
	})
	conformance.Run(t, c(mv+"should schedule respecting the minValues in Lt operator"), func(t *testing.T) {
		its := []*InstanceType{arm("instance-type-1", "1", "1Gi", 0.52, "2"), arm("instance-type-2", "2", "2Gi", 1.0, "3"), arm("instance-type-3", "4", "4Gi", 1.2, "4")}
		apart(t, its, req(gen, corev1.NodeSelectorOpLt, 2, "4"))
	})
	conformance.Run(t, c(mv+"scheduler should fail if the minValues in Lt operator is not satisfied"), func(t *testing.T) {
		its := []*InstanceType{arm("instance-type-1", "2", "2Gi", 0.52, "2"), arm("instance-type-2", "4", "4Gi", 1.2, "4")}
		pending(t, its, 60, pods(), req(gen, corev1.NodeSelectorOpLt, 2, "4"))
	})
	conformance.Run(t, c(mv+"should schedule considering the max of the minValues of In and NotIn operators in the instance-type requirements"), func(t *testing.T) {
		its := []*InstanceType{arm("instance-type-1", "1", "1Gi", 0.52, ""), arm("instance-type-2", "2", "2Gi", 1.0, ""), arm("instance-type-3", "4", "4Gi", 1.2, "")}
		apart(t, its, req(it, in, 1, "instance-type-1", "instance-type-2", "instance-type-3"), req(it, corev1.NodeSelectorOpNotIn, 2, "instance-type-3"))
	})
	conformance.Run(t, c(mv+"should schedule considering the max of the minValues of Gt and Lt operators."), func(t *testing.T) {
		its := []*InstanceType{arm("instance-type-1", "1", "1Gi", 0.52, "2"), arm("instance-type-2", "1", "1Gi", 1.0, "3"),
			arm("instance-type-3", "4", "4Gi", 1.2, "4"), arm("instance-type-4", "4", "4Gi", 1.2, "5")}
		apart(t, its, req(gen, corev1.NodeSelectorOpGt, 1, "2"), req(gen, corev1.NodeSelectorOpLt, 2, "5"))
	})
	conformance.Run(t, c(mv+"schedule should fail if minimum number of InstanceTypes is not met as per the minValues in the requirement"), func(t *testing.T) {
		pending(t, selectionAssorted()[:10], 60, []*corev1.Pod{fakePod()}, req(it, corev1.NodeSelectorOpExists, 11))
	})
	conformance.Run(t, c(mv+"schedule should fail if minimum number of InstanceTypes is not met as per the minValues in the requirement after truncation"), func(t *testing.T) {
		pending(t, two(), 1, pods(), req(it, in, 2, "instance-type-1", "instance-type-2"))
	})
	conformance.Run(t, c(mv+"should schedule and pick the max of minValues of InstanceTypes if multiple operators are used for the same requirement."), func(t *testing.T) {
		apart(t, two(), req(it, corev1.NodeSelectorOpExists, 1), req(it, in, 2, "instance-type-1", "instance-type-2"))
	})
	conformance.Run(t, c(mv+"should schedule and respect multiple requirement keys with minValues"), func(t *testing.T) {
		its := two()
		its[1].Labels[wellknown.ArchLabel] = "amd64"
		apart(t, its, req(wellknown.ArchLabel, corev1.NodeSelectorOpExists, 2), req(it, in, 1, "instance-type-1", "instance-type-2"))
	})
}
