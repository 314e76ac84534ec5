// Command bench runs Karpenter's scheduler and Karpless's on the same pods,
// instance types and NodePool, and prints time, NodeClaims, $/h and failures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	kscheduling "sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	kreq "sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/test"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/local/workload"
)

type workloadSpec struct {
	name string
	spec workload.Spec
}

var workloads = []workloadSpec{
	{"mix-1k", workload.Spec{Pods: 1000, Seed: 101}},
	{"mix-5k", workload.Spec{Pods: 5000, Seed: 105}},
	{"mix+arm64+gpu-5k", workload.Spec{Pods: 5000, Seed: 205, ARM64: true, GPU: true}},
}

// outcome is one scheduler's answer on one workload.
type outcome struct {
	wall, cpu time.Duration
	claims    int
	cost      float64
	failures  int
}

func main() {
	only := flag.String("workloads", "", "comma-separated workload names (default: all)")
	skipKarpenter := flag.Bool("skip-karpenter", false, "run only Karpless")
	flag.Parse()
	log.SetLogger(logging.NopLogger)

	types, err := workload.InstanceTypes()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ktypes := convertTypes(types)
	byName := map[string]*scheduling.InstanceType{}
	for _, it := range types {
		byName[it.Name] = it
	}
	fmt.Printf("%d instance types x %d zones x spot/on-demand; one NodePool, no limits; GOMAXPROCS=%d; Karpenter v1.14.1 with 5 workers as in its benchmark\n", len(types), len(workload.Zones), runtime.GOMAXPROCS(0))
	fmt.Printf("%-18s %6s  %-9s %11s %11s %10s %9s %8s %10s\n", "workload", "pods", "scheduler", "solve wall", "solve cpu", "NodeClaims", "$/h", "failures", "$/h / LB")
	var speedup5k, cost5k float64
	worstCost, worstSpeed := 0.0, 0.0
	for _, w := range workloads {
		if *only != "" && !strings.Contains(","+*only+",", ","+w.name+",") {
			continue
		}
		pods := workload.Pods(w.spec)
		bound := workload.LowerBound(pods, types)
		row := func(who string, o outcome) {
			fmt.Printf("%-18s %6d  %-9s %11s %11s %10d %9.2f %8d %10.2f\n", w.name, len(pods), who, o.wall.Round(time.Millisecond), o.cpu.Round(time.Millisecond), o.claims, o.cost, o.failures, o.cost/bound)
		}
		ours := runOurs(pods, types)
		row("karpless", ours)
		if *skipKarpenter {
			continue
		}
		fmt.Fprintf(os.Stderr, "running Karpenter's scheduler on %s (minutes)...\n", w.name)
		theirs := runKarpenter(pods, ktypes, byName)
		row("karpenter", theirs)
		// Speedup is the ratio of CPU time (all threads), as the anchor
		// figures are quoted: wall time swings with whatever else the
		// machine runs, and Karpenter spreads its solve over 5 workers.
		speed := theirs.cpu.Seconds() / ours.cpu.Seconds()
		ratio := ours.cost / theirs.cost
		fmt.Printf("%-18s %6s  speedup %.0fx cpu (%.0fx wall); cost-ratio %.3f (karpless $/h / karpenter $/h); LP lower bound $%.2f/h\n",
			w.name, "", speed, theirs.wall.Seconds()/ours.wall.Seconds(), ratio, bound)
		worstCost = max(worstCost, ratio)
		if worstSpeed == 0 || speed < worstSpeed {
			worstSpeed = speed
		}
		if w.name == "mix-5k" {
			speedup5k, cost5k = speed, ratio
		}
	}
	if !*skipKarpenter {
		fmt.Printf("over all workloads: lowest speedup %.0fx, highest cost-ratio %.3f\n", worstSpeed, worstCost)
		fmt.Printf("speedup-vs-karpenter=%.1f cost-ratio=%.3f\n", speedup5k, cost5k)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func runOurs(pods []*corev1.Pod, types []*scheduling.InstanceType) outcome {
	snap := &scheduling.Snapshot{
		Pods:        pods,
		NodePools:   []*karpv1.NodePool{workload.NodePool()},
		NodeClasses: map[string]*scheduling.NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: types}},
	}
	runtime.GC()
	w0, c0 := time.Now(), cpuTime()
	r := scheduling.Solve(snap, scheduling.Provisioning())
	o := outcome{wall: time.Since(w0), cpu: cpuTime() - c0, claims: len(r.NewNodeClaims), failures: len(r.Unschedulable)}
	for _, c := range r.NewNodeClaims {
		_, off := c.CheapestOffering()
		o.cost += off.Price
	}
	return o
}

// runKarpenter builds Karpenter's scheduler as its own benchmark does (fake
// client and cluster state, NewTopology then NewScheduler, no timeout) and
// solves once. The NodePool has no limits: the test helper's 2,000-CPU
// default would cut the larger workloads short.
func runKarpenter(pods []*corev1.Pod, types []*cloudprovider.InstanceType, byName map[string]*scheduling.InstanceType) outcome {
	ctx := options.ToContext(injection.WithControllerName(context.Background(), "provisioner"), test.Options())
	ours := workload.NodePool()
	np := test.NodePool(kv1.NodePool{})
	np.Name = ours.Name
	np.Spec.Limits = nil
	np.Spec.Template.Spec.Requirements = nil
	for _, r := range ours.Spec.Template.Spec.Requirements {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, kv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	kpods := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		kpods[i] = p.DeepCopy()
	}
	cp := fake.NewCloudProvider()
	cp.InstanceTypes = types
	client := fakecr.NewFakeClient()
	clk := &clock.RealClock{}
	cluster := state.NewCluster(clk, client, cp)
	its := map[string][]*cloudprovider.InstanceType{np.Name: types}
	opts := []kscheduling.Options{kscheduling.NumConcurrentReconciles(5)}

	runtime.GC()
	w0, c0 := time.Now(), cpuTime()
	topology, err := kscheduling.NewTopology(ctx, client, cluster, nil, []*kv1.NodePool{np}, its, kpods, opts...)
	if err != nil {
		panic(err)
	}
	s := kscheduling.NewScheduler(ctx, client, []*kv1.NodePool{np}, cluster, nil, topology, its, nil, events.NewRecorder(&record.FakeRecorder{}), clk, nil, nil, opts...)
	results, err := s.Solve(ctx, kpods)
	if err != nil {
		panic(err)
	}
	o := outcome{wall: time.Since(w0), cpu: cpuTime() - c0, claims: len(results.NewNodeClaims), failures: len(results.PodErrors)}
	for _, nc := range results.NewNodeClaims {
		o.cost += launchPrice(nc, byName)
	}
	return o
}

// launchPrice prices a Karpenter NodeClaim with the same rule as ours: the
// offering the AWS launch would pick among its instance type options,
// restricted to the zones and capacity types its requirements allow.
func launchPrice(nc *kscheduling.NodeClaim, byName map[string]*scheduling.InstanceType) float64 {
	claim := &scheduling.NewNodeClaim{}
	for _, key := range []string{corev1.LabelTopologyZone, kv1.CapacityTypeLabelKey} {
		if nc.Requirements.Has(key) {
			r := nc.Requirements.Get(key).NodeSelectorRequirement()
			claim.Requirements = append(claim.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values})
		}
	}
	for _, it := range nc.InstanceTypeOptions {
		claim.InstanceTypes = append(claim.InstanceTypes, byName[it.Name])
	}
	_, off := claim.CheapestOffering()
	return off.Price
}

// convertTypes turns the catalog into Karpenter's instance types: every
// label as a requirement, zones and capacity types from the offerings, and
// overhead = capacity - allocatable so both schedulers see the same room.
func convertTypes(types []*scheduling.InstanceType) []*cloudprovider.InstanceType {
	out := make([]*cloudprovider.InstanceType, 0, len(types))
	for _, it := range types {
		reqs := kreq.NewRequirements()
		for k, v := range it.Labels {
			reqs.Add(kreq.NewRequirement(k, corev1.NodeSelectorOpIn, v))
		}
		zones, cts := map[string]bool{}, map[string]bool{}
		var offs cloudprovider.Offerings
		for _, o := range it.Offerings {
			offs = append(offs, &cloudprovider.Offering{
				Requirements: kreq.NewLabelRequirements(map[string]string{corev1.LabelTopologyZone: o.Zone, kv1.CapacityTypeLabelKey: o.CapacityType}),
				Price:        o.Price,
				Available:    o.Available,
			})
			if o.Available {
				zones[o.Zone], cts[o.CapacityType] = true, true
			}
		}
		reqs.Add(kreq.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, keys(zones)...))
		reqs.Add(kreq.NewRequirement(kv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, keys(cts)...))
		overhead := corev1.ResourceList{}
		for name, c := range it.Capacity {
			a, ok := it.Allocatable[name]
			if !ok {
				continue
			}
			d := c.DeepCopy()
			d.Sub(a)
			if d.Sign() > 0 {
				overhead[name] = d
			}
		}
		out = append(out, &cloudprovider.InstanceType{
			Name:         it.Name,
			Requirements: reqs,
			Offerings:    offs,
			Capacity:     it.Capacity.DeepCopy(),
			Overhead:     &cloudprovider.InstanceTypeOverhead{KubeReserved: overhead, SystemReserved: corev1.ResourceList{}, EvictionThreshold: corev1.ResourceList{}},
		})
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
