package scheduling

import (
	"math"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// burstTypes are t4g and c7g types at their us-east-1 on-demand prices
// (spot is 40% of them): t4g.small is the cheapest offering, but a node
// above its 20% baseline (400m of 2 vCPUs) pays $0.04 per vCPU-hour over it.
func burstTypes() []*InstanceType {
	return []*InstanceType{
		mkType("t4g.small", 2, 2, 11, "arm64", 0.0168),
		mkType("t4g.medium", 2, 4, 17, "arm64", 0.0336),
		mkType("c7g.medium", 1, 2, 8, "arm64", 0.0363),
		mkType("c7g.large", 2, 4, 29, "arm64", 0.0725),
	}
}

func burstSnapshot(pools []*karpv1.NodePool, pods ...*corev1.Pod) *Snapshot {
	s := snapshot(pools, pods...)
	s.NodeClasses["default"].InstanceTypes = burstTypes()
	return s
}

func typeNames(types []*InstanceType) []string {
	var out []string
	for _, it := range types {
		out = append(out, it.Name)
	}
	return out
}

func TestCreditHourly(t *testing.T) {
	small := mkType("t4g.small", 2, 2, 11, "arm64", 0.0168)
	for _, tc := range []struct {
		name string
		it   *InstanceType
		cpu  int64
		want float64
	}{
		{"not burstable", mkType("c7g.large", 2, 4, 29, "arm64", 0.0725), 2000, 0},
		{"below baseline", small, 300, 0},
		{"at baseline", small, 400, 0},
		{"above baseline", small, 1500, 1.1 * 0.04},
		{"capped at the vCPUs", small, 5000, 1.6 * 0.04},
		{"t3 rate", mkType("t3.large", 2, 8, 35, "amd64", 0.0832), 1000, 0.4 * 0.05},
	} {
		if got := CreditHourly(tc.it, tc.cpu); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: CreditHourly = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestKeepInEC2Order(t *testing.T) {
	for _, tc := range []struct {
		name    string
		price   []float64
		credits []float64
		want    []bool
	}{
		{"no credits", []float64{1, 2}, []float64{0, 0}, []bool{true, true}},
		{"burstable dearer with credits than a later type goes",
			[]float64{1, 2, 3}, []float64{1.5, 0, 0}, []bool{false, true, true}},
		{"burstable cheaper with credits stays", []float64{1, 2}, []float64{0.5, 0}, []bool{true, true}},
		{"a tie stays", []float64{1, 2}, []float64{1, 0}, []bool{true, true}},
		// The second burstable is dearer than the last type; the first is
		// cheaper than everything kept after it.
		{"each against what is kept after it",
			[]float64{1, 2, 3}, []float64{0.5, 1.5, 0}, []bool{true, false, true}},
		{"the last is always kept", []float64{1, 2}, []float64{0, 5}, []bool{true, true}},
	} {
		keep := make([]bool, len(tc.price))
		if keepInEC2Order(tc.price, tc.credits, keep); !slices.Equal(keep, tc.want) {
			t.Errorf("%s: keep %v, want %v", tc.name, keep, tc.want)
		}
	}
}

// TestBurstableCredits: a NodeClaim whose pods request more than a
// burstable type's baseline gets the type that costs least with credits,
// and the burstable types EC2 would pick instead are not sent; at or
// below the baseline the burstable type is the cheapest and is used.
func TestBurstableCredits(t *testing.T) {
	agent := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"}}
	agent.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "200m", "memory", "64Mi")}}}
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		daemons   []*appsv1.DaemonSet
		wantType  string
		wantTypes []string // the claim's types, in order
	}{
		{
			// 700m: t4g.small spends 300m of surplus, $0.012/h, on a spot
			// price of $0.0067: $0.0187 against c7g.medium's $0.0145.
			name: "above baseline: c7g.medium, no t4g sent", pod: mkPod("p", "700m", "1Gi"),
			wantType: "c7g.medium", wantTypes: []string{"c7g.medium", "c7g.large"},
		},
		{
			name: "far above baseline: c7g.large", pod: mkPod("p", "1500m", "1Gi"),
			wantType: "c7g.large", wantTypes: []string{"c7g.large"},
		},
		{
			name: "below baseline: t4g.small", pod: mkPod("p", "300m", "1Gi"),
			wantType: "t4g.small", wantTypes: []string{"t4g.small", "t4g.medium", "c7g.medium", "c7g.large"},
		},
		{
			name: "at baseline: t4g.small", pod: mkPod("p", "400m", "1Gi"),
			wantType: "t4g.small", wantTypes: []string{"t4g.small", "t4g.medium", "c7g.medium", "c7g.large"},
		},
		{
			// 300m of pod and 200m of DaemonSet are 100m above the
			// baseline: $0.004/h, still cheaper than c7g.medium, and
			// t4g.medium (the same credits on a dearer offering) goes.
			name: "DaemonSets count: just above baseline, still t4g.small", pod: mkPod("p", "300m", "1Gi"), daemons: []*appsv1.DaemonSet{agent},
			wantType: "t4g.small", wantTypes: []string{"t4g.small", "c7g.medium", "c7g.large"},
		},
		{
			// With 200m of DaemonSet the 700m pod makes 1.1 vCPU of which
			// 500m is surplus; c7g.medium holds 1000m: 900m fits.
			name: "DaemonSets count: above baseline", pod: mkPod("p", "700m", "1Gi"), daemons: []*appsv1.DaemonSet{agent},
			wantType: "c7g.medium", wantTypes: []string{"c7g.medium", "c7g.large"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := burstSnapshot([]*karpv1.NodePool{mkPool("default")}, tc.pod)
			s.DaemonSets = tc.daemons
			r := solve(t, s)
			c := claimOf(r, tc.pod)
			if c == nil {
				t.Fatalf("not placed: %v", r.Unschedulable)
			}
			if it, o := c.CheapestOffering(); it.Name != tc.wantType || o.CapacityType != wellknown.CapacityTypeSpot {
				t.Fatalf("launches %s %s, want %s spot", it.Name, o.CapacityType, tc.wantType)
			}
			if got := typeNames(c.InstanceTypes); !slices.Equal(got, tc.wantTypes) {
				t.Fatalf("types %v, want %v", got, tc.wantTypes)
			}
			it, o := c.CheapestOffering()
			if want := o.Price + c.CreditHourly(it); math.Abs(c.HourlyPrice()-want) > 1e-12 {
				t.Fatalf("HourlyPrice %v, want offering plus credits %v", c.HourlyPrice(), want)
			}
		})
	}
}

// TestBurstableCreditsPacking: pods that together go above a burstable
// type's baseline are not packed onto it as if that were free.
func TestBurstableCreditsPacking(t *testing.T) {
	var pods []*corev1.Pod
	for i := 0; i < 12; i++ {
		pods = append(pods, mkPod("p", "300m", "256Mi"))
	}
	r := solve(t, burstSnapshot([]*karpv1.NodePool{mkPool("default")}, pods...))
	if len(r.Unschedulable) > 0 {
		t.Fatalf("unschedulable: %v", r.Unschedulable)
	}
	total := 0.0
	for _, c := range r.NewNodeClaims {
		total += c.HourlyPrice()
	}
	// Blind to credits, the solve packed six pods on each of two
	// t4g.small (1800m, 1.4 vCPU of surplus): 2 x (0.00672 + 0.056) =
	// $0.125/h. One pod at a time, each pod's marginal price gave it a
	// t4g.small at its baseline: 12 x 0.00672 = $0.081. Growing a claim
	// for the queue, six pods on each of two c7g.large: $0.058.
	if total > 2*0.029+1e-9 {
		t.Fatalf("$%.4f/h for %d claims, want two c7g.large at $0.058", total, len(r.NewNodeClaims))
	}
}

// TestBurstableCreditsMinValues: when leaving the burstable types out
// would break a minValues, the NodeClaim keeps them, as Karpenter's would.
func TestBurstableCreditsMinValues(t *testing.T) {
	p := mkPod("p", "1500m", "1Gi")
	pool := mkPool("default", withMinValues(wellknown.InstanceFamilyLabel, 2, opIn, "t4g", "c7g"))
	r := solve(t, burstSnapshot([]*karpv1.NodePool{pool}, p))
	c := claimOf(r, p)
	if c == nil {
		t.Fatalf("not placed: %v", r.Unschedulable)
	}
	if got, want := typeNames(c.InstanceTypes), []string{"t4g.small", "t4g.medium", "c7g.large"}; !slices.Equal(got, want) {
		t.Fatalf("types %v, want %v: without t4g only one family is left", got, want)
	}
	// EC2 takes the cheapest offering: the prediction says so, with its
	// credits.
	it, _ := c.CheapestOffering()
	if it.Name != "t4g.small" || c.HourlyPrice() < 0.04 {
		t.Fatalf("launches %s at $%.4f/h, want t4g.small with its credits", it.Name, c.HourlyPrice())
	}

	// Two families left without the burstable ones: they go.
	pool = mkPool("default", withMinValues(wellknown.InstanceFamilyLabel, 1, opIn, "t4g", "c7g"))
	r = solve(t, burstSnapshot([]*karpv1.NodePool{pool}, p))
	if got, want := typeNames(claimOf(r, p).InstanceTypes), []string{"c7g.large"}; !slices.Equal(got, want) {
		t.Fatalf("types %v, want %v", got, want)
	}
}

// TestLaunchOrderCredits: LaunchOrder leaves out a burstable type that
// costs more with the claim's credits than one EC2 would take after it,
// except under minValues.
func TestLaunchOrderCredits(t *testing.T) {
	all := func(*Offering) bool { return true }
	types := burstTypes()
	order := func(minValues bool, cpu int64) []string {
		_, offs := LaunchOrder(types, all, minValues, cpu)
		var out []string
		for _, o := range offs {
			if o.Offering.Zone == testZones[0] {
				out = append(out, o.Type.Name)
			}
		}
		return out
	}
	// c7g.large's spot offering is dearer than t4g.small's on-demand one:
	// Karpenter's dear-spot rule drops it without minValues.
	if got, want := order(false, 700), []string{"c7g.medium"}; !slices.Equal(got, want) {
		t.Errorf("700m: %v, want %v", got, want)
	}
	if got, want := order(false, 300), []string{"t4g.small", "t4g.medium", "c7g.medium"}; !slices.Equal(got, want) {
		t.Errorf("300m: %v, want %v", got, want)
	}
	if got, want := order(true, 700), []string{"t4g.small", "t4g.medium", "c7g.medium", "c7g.large"}; !slices.Equal(got, want) {
		t.Errorf("700m with minValues: %v, want %v", got, want)
	}
	if got, want := order(false, 0), []string{"t4g.small", "t4g.medium", "c7g.medium"}; !slices.Equal(got, want) {
		t.Errorf("no requests: %v, want %v", got, want)
	}
	_, offs := LaunchOrder(types, all, true, 700)
	if o := offs[0]; o.Type.Name != "t4g.small" || math.Abs(o.Credits-0.3*0.04) > 1e-12 || math.Abs(o.Hourly()-o.Offering.Price-o.Credits) > 1e-12 {
		t.Errorf("first %s with credits %v, want t4g.small with $0.012", o.Type.Name, o.Credits)
	}
}
