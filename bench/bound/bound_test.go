package bound

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func pod(name, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		}}}}},
	}
}

func antiPod(name, cpu, mem string) *corev1.Pod {
	p := pod(name, cpu, mem)
	p.Labels = map[string]string{"app": "nginx"}
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
	}}}}
	return p
}

func itype(name, family, size string, cpu, mem string, pods int, price float64) *scheduling.InstanceType {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: *resource.NewQuantity(int64(pods), resource.DecimalSI)}
	return &scheduling.InstanceType{
		Name: name,
		Labels: map[string]string{wellknown.InstanceTypeLabel: name, wellknown.ArchLabel: "amd64", wellknown.OSLabel: "linux",
			wellknown.InstanceFamilyLabel: family, wellknown.InstanceSizeLabel: size},
		Capacity:    alloc.DeepCopy(),
		Allocatable: alloc,
		Offerings:   []scheduling.Offering{{Zone: "z1", CapacityType: wellknown.CapacityTypeOnDemand, Price: price, Available: true}},
	}
}

func pool(name string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.OSLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}}
	return np
}

func daemonSet(cpu string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "kube-system", UID: "ds"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: "d", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
		}}}}
}

func n(count int, mk func(i int) *corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range count {
		out = append(out, mk(i))
	}
	return out
}

// TestHandComputed checks small cases whose LP optimum is known.
func TestHandComputed(t *testing.T) {
	cases := []struct {
		name string
		in   Input
		want float64
	}{{
		name: "4 pods of 1 cpu on a 2-cpu type at $1: 2 nodes",
		in: Input{Pods: n(4, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "1", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1)}},
		want: 2,
	}, {
		name: "the root volume is paid per node",
		in: Input{Pods: n(4, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "1", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1)}, VolumeHourly: 0.5},
		want: 3,
	}, {
		name: "DaemonSets take room: 1.5 cpu left per node",
		in: Input{Pods: n(3, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "1", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1)}, DaemonSets: []*appsv1.DaemonSet{daemonSet("500m")}},
		want: 2,
	}, {
		name: "memory binds: 4 pods of 3Gi on 8Gi nodes",
		in: Input{Pods: n(4, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "100m", "3Gi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1)}},
		want: 1.5,
	}, {
		name: "pod slots bind: 10 pods, 4 slots a node",
		in: Input{Pods: n(10, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "10m", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 4, 1)}},
		want: 2.5,
	}, {
		name: "hostname anti-affinity: 3 small pods need 3 nodes",
		in: Input{Pods: n(3, func(i int) *corev1.Pod { return antiPod(fmt.Sprint("p", i), "100m", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1)}},
		want: 3,
	}, {
		name: "anti-affinity pods share nodes with other pods: 2 anti + 2 plain of 1 cpu on 2-cpu nodes",
		in: Input{Pods: append(n(2, func(i int) *corev1.Pod { return antiPod(fmt.Sprint("a", i), "1", "1Mi") }), n(2, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "1", "1Mi") })...),
			NodePools: []*karpv1.NodePool{pool("a")}, Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1)}},
		want: 2,
	}, {
		name: "the cheaper type per cpu is used: $1 for 2 cpu, $3 for 8 cpu, 8 pods of 1 cpu",
		in: Input{Pods: n(8, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "1", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1), itype("x.2xlarge", "x", "2xlarge", "8", "32Gi", 100, 3)}},
		want: 3,
	}, {
		// t3.large: 2 vCPU, baseline 30% = 600m, $0.05/vCPU-h. 2 pods of
		// 900m: 0.9 node (the LP's fractional node), whose baseline is
		// 540m, so 1260m above it: $0.063 of credits.
		name: "burstable credits above baseline",
		in: Input{Pods: n(2, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "900m", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("t3.large", "t3", "large", "2", "8Gi", 100, 1)}},
		want: 0.9 + 0.05*(1.8-0.6*0.9),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Compute(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got.Hourly-tc.want) > 1e-6 {
				t.Fatalf("bound %.6f, want %.6f (%+v)", got.Hourly, tc.want, got)
			}
		})
	}
}

// random is a small generated input: up to four instance types (some
// burstable, each with one or two offerings), one NodePool and maybe a
// tainted second one, maybe a DaemonSet, and up to 14 pods of which some
// are in one hostname anti-affinity set and some tolerate the taint.
func random(seed int64) Input {
	r := rand.New(rand.NewSource(seed))
	cpus := []string{"1", "2", "4", "8"}
	mems := []string{"2Gi", "4Gi", "8Gi", "16Gi", "32Gi"}
	burst := []struct{ family, size string }{{"t3", "medium"}, {"t3", "large"}, {"t4g", "xlarge"}, {"t3a", "small"}}
	var in Input
	for i := range 1 + r.Intn(4) {
		fam, size := fmt.Sprint("f", i), "large"
		if r.Intn(3) == 0 {
			b := burst[r.Intn(len(burst))]
			fam, size = b.family, b.size
		}
		it := itype(fmt.Sprintf("%s.%s-%d", fam, size, i), fam, size, cpus[r.Intn(len(cpus))], mems[r.Intn(len(mems))], 4+r.Intn(27), 0.02+r.Float64())
		if r.Intn(2) == 0 {
			it.Offerings = append(it.Offerings, scheduling.Offering{Zone: "z2", CapacityType: wellknown.CapacityTypeOnDemand, Price: 0.02 + r.Float64(), Available: r.Intn(3) > 0})
		}
		in.Types = append(in.Types, it)
	}
	in.NodePools = []*karpv1.NodePool{pool("a")}
	taint := corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	if r.Intn(2) == 0 {
		np := pool("tainted")
		np.Spec.Template.Spec.Taints = []corev1.Taint{taint}
		in.NodePools = append(in.NodePools, np)
	}
	if r.Intn(2) == 0 {
		in.DaemonSets = []*appsv1.DaemonSet{daemonSet(fmt.Sprintf("%dm", 50*r.Intn(7)))}
	}
	if r.Intn(2) == 0 {
		in.VolumeHourly = 0.0022
	}
	pcpu := []string{"100m", "250m", "500m", "1", "1500m", "3"}
	pmem := []string{"128Mi", "512Mi", "1Gi", "3Gi", "6Gi"}
	for i := range 1 + r.Intn(14) {
		name := fmt.Sprint("p", i)
		var p *corev1.Pod
		if r.Intn(4) == 0 {
			p = antiPod(name, pcpu[r.Intn(len(pcpu))], pmem[r.Intn(len(pmem))])
		} else {
			p = pod(name, pcpu[r.Intn(len(pcpu))], pmem[r.Intn(len(pmem))])
		}
		if r.Intn(3) == 0 {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		}
		in.Pods = append(in.Pods, p)
	}
	return in
}

// node is one node of a plan the tests build on their own.
type node struct {
	it      *scheduling.InstanceType
	tainted bool
	cpu     int64
	mem     int64
	pods    int64
	anti    bool
}

// planCost prices a node as the bench does (bench/price.go): its cheapest
// available offering, the root volume, and the CPU credits of what its
// pods and DaemonSets request.
func planCost(in Input, it *scheduling.InstanceType, podCPU int64) float64 {
	price := math.Inf(1)
	for _, o := range it.Offerings {
		if o.Available {
			price = min(price, o.Price)
		}
	}
	var daemon int64
	for _, ds := range in.DaemonSets {
		q := ds.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		daemon += q.MilliValue()
	}
	vcpus := it.Capacity[corev1.ResourceCPU]
	return price + in.VolumeHourly + catalog.CreditHourly(it.Labels[wellknown.InstanceFamilyLabel], it.Labels[wellknown.InstanceSizeLabel], vcpus.Value(), daemon+podCPU)
}

// greedy places the pods in the order given, each on the first open node
// it fits (room left, taint tolerated, at most one pod of the
// anti-affinity set), else on a new node of the kind that costs least
// empty among those it fits. It returns the plan's $/h and the pods it
// could place nowhere.
func greedy(in Input, order []int) (float64, int) {
	var daemonCPU, daemonMem int64
	for _, ds := range in.DaemonSets {
		q := ds.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		daemonCPU += q.MilliValue()
	}
	daemonPods := int64(len(in.DaemonSets))
	var nodes []*node
	unplaced := 0
	tolerates := func(p *corev1.Pod) bool { return len(p.Spec.Tolerations) > 0 }
	fits := func(n *node, cpu, mem int64, anti bool) bool {
		a := n.it.Allocatable
		return n.cpu+cpu <= a.Cpu().MilliValue() && n.mem+mem <= a.Memory().Value() && n.pods+1 <= a.Pods().Value() && !(anti && n.anti)
	}
	for _, i := range order {
		p := in.Pods[i]
		cpu, mem := p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(), p.Spec.Containers[0].Resources.Requests.Memory().Value()
		anti := p.Spec.Affinity != nil
		var at *node
		for _, n := range nodes {
			if (!n.tainted || tolerates(p)) && fits(n, cpu, mem, anti) {
				at = n
				break
			}
		}
		if at == nil {
			best := math.Inf(1)
			for pi, np := range in.NodePools {
				tainted := len(np.Spec.Template.Spec.Taints) > 0
				if tainted && !tolerates(p) {
					continue
				}
				for _, it := range in.Types {
					n := &node{it: it, tainted: tainted, cpu: daemonCPU, mem: daemonMem, pods: daemonPods}
					if c := planCost(in, it, 0); fits(n, cpu, mem, anti) && c < best && !math.IsInf(c, 1) {
						best, at = c, n
					}
				}
				_ = pi
			}
			if at == nil {
				unplaced++
				continue
			}
			nodes = append(nodes, at)
		}
		at.cpu, at.mem, at.pods, at.anti = at.cpu+cpu, at.mem+mem, at.pods+1, at.anti || anti
	}
	total := 0.0
	for _, n := range nodes {
		total += planCost(in, n.it, n.cpu-daemonCPU)
	}
	return total, unplaced
}

// karpless prices Karpless's own solve of the input, as the bench does;
// ok is false when it left a pod unplaced.
func karpless(in Input) (float64, bool) {
	snap := &scheduling.Snapshot{Pods: in.Pods, NodePools: in.NodePools, DaemonSets: in.DaemonSets,
		NodeClasses: map[string]*scheduling.NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: in.Types}}}
	res := scheduling.Solve(snap, scheduling.Provisioning())
	if len(res.Unschedulable) > 0 {
		return 0, false
	}
	total := 0.0
	for _, c := range res.NewNodeClaims {
		it, _ := c.CheapestOffering()
		var cpu int64
		for _, p := range c.Pods {
			cpu += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
		}
		// The bench prices the offering the launch picks: at least the
		// cheapest available one, which is what planCost charges.
		total += planCost(in, it, cpu)
	}
	return total, true
}

// floor is a weaker bound the LP must reach: each resource alone, bought
// at the lowest price per unit of room, and one node per anti-affinity pod
// at the lowest node price.
func floor(in Input) float64 {
	var daemonCPU int64
	for _, ds := range in.DaemonSets {
		q := ds.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		daemonCPU += q.MilliValue()
	}
	var cpu, anti float64
	for _, p := range in.Pods {
		cpu += float64(p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue())
		if p.Spec.Affinity != nil {
			anti++
		}
	}
	perCPU, perNode := math.Inf(1), math.Inf(1)
	for _, it := range in.Types {
		price := math.Inf(1)
		for _, o := range it.Offerings {
			if o.Available {
				price = min(price, o.Price)
			}
		}
		price += in.VolumeHourly
		perCPU = min(perCPU, price/float64(it.Allocatable.Cpu().MilliValue()-daemonCPU))
		perNode = min(perNode, price)
	}
	return max(cpu*perCPU, anti*perNode)
}

// check asserts the bound on one input: at most the cost of every
// feasible plan built here (greedy in several orders) and of Karpless's,
// at least the weaker floor when every pod can be placed, and the same
// pods left out as the greedy plan leaves out.
func check(t *testing.T, seed int64) (karplessCompared bool) {
	in := random(seed)
	got, err := Compute(in)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	r := rand.New(rand.NewSource(seed))
	for k := range 4 {
		order := r.Perm(len(in.Pods))
		if k == 0 {
			slices.SortStableFunc(order, func(a, b int) int {
				return in.Pods[b].Spec.Containers[0].Resources.Requests.Cpu().Cmp(*in.Pods[a].Spec.Containers[0].Resources.Requests.Cpu())
			})
		}
		plan, unplaced := greedy(in, order)
		if unplaced != got.Unplaceable {
			t.Fatalf("seed %d: the greedy plan left %d pods out, the bound %d", seed, unplaced, got.Unplaceable)
		}
		if got.Hourly > plan+1e-9 {
			t.Fatalf("seed %d: bound $%.6f/h above a feasible greedy plan's $%.6f/h", seed, got.Hourly, plan)
		}
	}
	plan, ok := karpless(in)
	if ok && got.Hourly > plan+1e-9 {
		t.Fatalf("seed %d: bound $%.6f/h above Karpless's plan's $%.6f/h", seed, got.Hourly, plan)
	}
	if got.Unplaceable == 0 {
		if f := floor(in); got.Hourly < f-1e-6 {
			t.Fatalf("seed %d: bound $%.6f/h below the floor $%.6f/h", seed, got.Hourly, f)
		}
	}
	return ok
}

// TestNeverAboveAFeasiblePlan checks generated inputs.
func TestNeverAboveAFeasiblePlan(t *testing.T) {
	compared := 0
	for seed := range int64(300) {
		if check(t, seed) {
			compared++
		}
	}
	// Karpless leaves pods out only where no kind takes them.
	if compared < 150 {
		t.Fatalf("only %d of 300 inputs compared with Karpless's plan", compared)
	}
	t.Logf("%d of 300 inputs compared with Karpless's plan", compared)
}

// FuzzNeverAboveAFeasiblePlan is the same check on any seed
// (go test -fuzz FuzzNeverAboveAFeasiblePlan ./bound).
func FuzzNeverAboveAFeasiblePlan(f *testing.F) {
	for _, s := range []int64{1, 7, 42, 1000} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed int64) { check(t, seed) })
}
