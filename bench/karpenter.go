package main

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"

	kv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	kscheduling "sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	kreq "sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/test"
	"sigs.k8s.io/karpenter/pkg/utils/daemonset"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
)

// Karpenter's production settings, all from sigs.k8s.io/karpenter v1.14.1
// and the AWS provider's chart at the same tag:
//
//   - CPU requests: pkg/operator/options/options.go:125 reads CPU_REQUESTS
//     (default 1000) and :153-155 make 0 or less 1000. The chart passes the
//     controller container's requests.cpu in millicores
//     (charts/karpenter/templates/deployment.yaml:116-121); its values.yaml
//     (:145) sets no resources, and the getting-started guide
//     (scripts/step08-apply-helm-chart.sh) sets requests.cpu=1. Either
//     way: 1000.
//   - Workers: pkg/controllers/provisioning/provisioner.go:394 passes
//     NumConcurrentReconciles(ceil(CPURequests/1000)) = 1. The 5 of
//     Karpenter's own tests and benchmark come from pkg/test/options.go:83
//     (CPURequests 5000, "use 5 threads to enforce parallelism").
//   - Solve timeout: provisioner.go:418-422, one minute; what is scheduled
//     by then is kept (:424, DeadlineExceeded is not an error). The
//     guide's controller has one CPU (request and limit 1), so the minute
//     is counted here as one minute of the process's CPU time: on this
//     shared machine a wall-clock minute would give Karpenter far less
//     than the core it has in production (withCPUDeadline).
//   - Truncation: provisioner.go:427 TruncateInstanceTypes to
//     MaxInstanceTypes (600, scheduling/nodeclaimtemplate.go:50); the AWS
//     launch then keeps 60 (karpenter-provider-aws
//     pkg/providers/instance/instance.go:67 and :343), which nodeCost's
//     LaunchOrder does for both sides.
//   - The other scheduler options of provisioner.go:392-399:
//     DisableReservedCapacityFallback, MinValuesPolicy Strict (the default
//     of MIN_VALUES_POLICY), preferences respected (PREFERENCE_POLICY
//     Respect).
const (
	productionCPURequests = 1000
	productionTimeout     = time.Minute
	referenceWorkers      = 5
)

// karpenterWorld is the fixed part of Karpenter's inputs for one case.
type karpenterWorld struct {
	types      []*cloudprovider.InstanceType
	byName     map[string]*scheduling.InstanceType
	pools      []*kv1.NodePool
	daemonPods []*corev1.Pod
}

func newKarpenterWorld(types []*scheduling.InstanceType, ktypes []*cloudprovider.InstanceType, pools []*karpv1.NodePool, dss []*appsv1.DaemonSet) *karpenterWorld {
	w := &karpenterWorld{types: ktypes, byName: map[string]*scheduling.InstanceType{}}
	for _, it := range types {
		w.byName[it.Name] = it
	}
	for _, ours := range pools {
		np := test.NodePool(kv1.NodePool{})
		np.Name = ours.Name
		np.Spec.Limits = nil
		np.Spec.Weight = ours.Spec.Weight
		np.Spec.Template.Spec.Taints = ours.Spec.Template.Spec.Taints
		np.Spec.Template.Spec.Requirements = nil
		for _, r := range ours.Spec.Template.Spec.Requirements {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, kv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values, MinValues: r.MinValues})
		}
		w.pools = append(w.pools, np)
	}
	// As the provisioner's getDaemonSetPods (provisioner.go:534-556): the
	// pod the DaemonSet would make, its required node affinity from the
	// template.
	for _, ds := range dss {
		pod := daemonset.PodForDaemonSet(ds)
		if a := ds.Spec.Template.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			if pod.Spec.Affinity == nil {
				pod.Spec.Affinity = &corev1.Affinity{}
			}
			if pod.Spec.Affinity.NodeAffinity == nil {
				pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
			}
			pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		w.daemonPods = append(w.daemonPods, pod)
	}
	return w
}

// outcome is one scheduler's answer on one batch.
type outcome struct {
	claims int
	cost   cost
	// failed pods could not be placed; unplaced were not tried before the
	// solve timed out.
	failed, unplaced int
	timedOut         bool
	// types counts the launched instance types.
	types map[string]int
	// stages is Karpenter's CPU time in NewTopology and NewScheduler, in
	// Solve, and in TruncateInstanceTypes.
	stages [3]time.Duration
}

// runKarpenter solves once. production sets the provisioner's settings;
// otherwise it is the reference setting of Karpenter's benchmark (5
// workers, no timeout).
func (w *karpenterWorld) runKarpenter(pods []*corev1.Pod, production bool) (outcome, sample) {
	cpuRequests := int64(productionCPURequests)
	if !production {
		cpuRequests = referenceWorkers * 1000
	}
	ctx := options.ToContext(injection.WithControllerName(context.Background(), "provisioner"), test.Options(test.OptionsFields{CPURequests: &cpuRequests}))
	opts := []kscheduling.Options{
		kscheduling.DisableReservedCapacityFallback,
		kscheduling.NumConcurrentReconciles(int(math.Ceil(float64(options.FromContext(ctx).CPURequests) / 1000.0))),
		kscheduling.MinValuesPolicy(options.FromContext(ctx).MinValuesPolicy),
	}
	kpods := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		kpods[i] = p.DeepCopy()
	}
	cp := fake.NewCloudProvider()
	cp.InstanceTypes = w.types
	client := fakecr.NewFakeClient()
	clk := &clock.RealClock{}
	cluster := state.NewCluster(clk, client, cp)
	its := map[string][]*cloudprovider.InstanceType{}
	for _, np := range w.pools {
		its[np.Name] = w.types
	}
	var results kscheduling.Results
	var solveErr error
	var stages [3]time.Duration
	s := measure(func() {
		c0 := cpuTime()
		topology, err := kscheduling.NewTopology(ctx, client, cluster, nil, w.pools, its, kpods, opts...)
		if err != nil {
			panic(err)
		}
		sch := kscheduling.NewScheduler(ctx, client, w.pools, cluster, nil, topology, its, w.daemonPods, events.NewRecorder(&record.FakeRecorder{}), clk, nil, nil, opts...)
		c1 := cpuTime()
		solveCtx, cancel := context.WithCancel(ctx)
		if production {
			solveCtx, cancel = withCPUDeadline(ctx, productionTimeout)
		}
		defer cancel()
		results, solveErr = sch.Solve(solveCtx, kpods)
		if solveErr != nil && !errors.Is(solveErr, context.DeadlineExceeded) {
			panic(solveErr)
		}
		c2 := cpuTime()
		results = results.TruncateInstanceTypes(ctx, kscheduling.MaxInstanceTypes)
		stages = [3]time.Duration{c1 - c0, c2 - c1, cpuTime() - c2}
	})
	o := outcome{claims: len(results.NewNodeClaims), failed: len(results.PodErrors), timedOut: solveErr != nil, stages: stages}
	placed := 0
	for _, nc := range results.NewNodeClaims {
		placed += len(nc.Pods)
		it, off := w.launch(nc)
		o.cost.add(nodeCost(it, off, nc.Pods))
		o.count(it, off)
	}
	o.unplaced = len(pods) - placed - o.failed
	return o, s
}

// launch is what the AWS launch of a Karpenter NodeClaim would buy, by the
// same rule as Karpless's: LaunchOrder over its instance type options,
// restricted to the zones and capacity types its requirements allow. The
// claim carries no requests, so LaunchOrder prices no CPU credits and
// drops no burstable type: Karpenter's launch ignores credits, and EC2
// takes the cheapest offering. Its node's credits are then billed by
// nodeCost, as Karpless's are.
func (w *karpenterWorld) launch(nc *kscheduling.NodeClaim) (*scheduling.InstanceType, scheduling.Offering) {
	claim := &scheduling.NewNodeClaim{}
	for _, key := range []string{corev1.LabelTopologyZone, kv1.CapacityTypeLabelKey} {
		if nc.Requirements.Has(key) {
			r := nc.Requirements.Get(key).NodeSelectorRequirement()
			claim.Requirements = append(claim.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values})
		}
	}
	for _, it := range nc.InstanceTypeOptions {
		claim.InstanceTypes = append(claim.InstanceTypes, w.byName[it.Name])
	}
	return claim.CheapestOffering()
}

// convertTypes turns the catalog into Karpenter's instance types: every
// label as a requirement, zones and capacity types from the available
// offerings, and overhead = capacity - allocatable so both schedulers see
// the same room.
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

func (o *outcome) count(it *scheduling.InstanceType, off scheduling.Offering) {
	if it == nil {
		return
	}
	if o.types == nil {
		o.types = map[string]int{}
	}
	o.types[it.Name+"/"+off.CapacityType]++
}

// cpuDeadline is a context that ends, with context.DeadlineExceeded as a
// timeout does, once the process has used budget of CPU time.
type cpuDeadline struct {
	context.Context
	done chan struct{}
	stop chan struct{}
}

func (c *cpuDeadline) Done() <-chan struct{} { return c.done }

func (c *cpuDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return c.Context.Err()
	}
}

// withCPUDeadline is context.WithTimeout with the budget in CPU time of
// the process: a controller limited to one core gets one CPU-second per
// second, whatever else this machine runs.
func withCPUDeadline(parent context.Context, budget time.Duration) (context.Context, context.CancelFunc) {
	c := &cpuDeadline{Context: parent, done: make(chan struct{}), stop: make(chan struct{})}
	start := cpuTime()
	go func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				if cpuTime()-start >= budget {
					close(c.done)
					return
				}
			}
		}
	}()
	var once sync.Once
	return c, func() { once.Do(func() { close(c.stop) }) }
}
