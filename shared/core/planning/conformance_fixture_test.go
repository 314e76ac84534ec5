package planning_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// The fixture of the ported cases of Karpenter v1.14.1's provisioning
// and state suites: its fake cloud provider's instance types, test.Pod,
// test.NodePool and test.DaemonSet in Karpless's inputs, and a small
// cluster that provisions as ExpectProvisioned does (a copy of
// shared/core/scheduling's conformance fixture, whose files are another
// package's tests).

var fixtureNow = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

const (
	fakeZone1, fakeZone2, fakeZone3 = "test-zone-1", "test-zone-2", "test-zone-3"
	fakeVendorA                     = "fake.com/vendor-a"
	fakeVendorB                     = "fake.com/vendor-b"
	// fakeSizeKey is the fake's fake.LabelInstanceSize: an AWS label of
	// the same kind here (an instance type's size, "small" or "large").
	fakeSizeKey = wellknown.InstanceSizeLabel
)

// rl is a resource list from name, quantity pairs.
func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func fakeOffer(ct, zone string, price float64) scheduling.Offering {
	return scheduling.Offering{Zone: zone, CapacityType: ct, Price: price, Available: true}
}

// fakePrice is fake.PriceFromResources: 0.1 per CPU and per GB of memory,
// 1 per GPU of the fake vendors.
func fakePrice(r corev1.ResourceList) float64 {
	p := 0.0
	for k, v := range r {
		switch k {
		case corev1.ResourceCPU:
			p += 0.1 * v.AsApproximateFloat64()
		case corev1.ResourceMemory:
			p += 0.1 * v.AsApproximateFloat64() / 1e9
		case fakeVendorA, fakeVendorB:
			p += 1.0
		}
	}
	return p
}

// fakeType is fake.NewInstanceType: 4 CPU, 4Gi and 5 pods unless told,
// spot in zones 1 and 2 and on-demand in all three at a price by its
// resources (unless offerings are given), kube-reserved 100m CPU and 10Mi
// taken from its allocatable; "small", or "large" above 4 CPU and 8Gi.
func fakeType(name, arch string, resources corev1.ResourceList, offerings ...scheduling.Offering) *scheduling.InstanceType {
	capacity := maps.Clone(resources)
	if capacity == nil {
		capacity = corev1.ResourceList{}
	}
	for k, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "4Gi", corev1.ResourcePods: "5"} {
		if q := capacity[k]; q.IsZero() {
			capacity[k] = resource.MustParse(v)
		}
	}
	if arch == "" {
		arch = "amd64"
	}
	if offerings == nil {
		price := fakePrice(capacity)
		offerings = []scheduling.Offering{
			fakeOffer(wellknown.CapacityTypeSpot, fakeZone1, price),
			fakeOffer(wellknown.CapacityTypeSpot, fakeZone2, price),
			fakeOffer(wellknown.CapacityTypeOnDemand, fakeZone1, price),
			fakeOffer(wellknown.CapacityTypeOnDemand, fakeZone2, price),
			fakeOffer(wellknown.CapacityTypeOnDemand, fakeZone3, price),
		}
	}
	cpu, mem := capacity[corev1.ResourceCPU], capacity[corev1.ResourceMemory]
	labels := map[string]string{
		wellknown.InstanceTypeLabel: name, wellknown.ArchLabel: arch, wellknown.OSLabel: "linux",
		wellknown.InstanceCPULabel: fmt.Sprint(cpu.Value()), fakeSizeKey: "small",
	}
	if cpu.Cmp(resource.MustParse("4")) > 0 && mem.Cmp(resource.MustParse("8Gi")) > 0 {
		labels[fakeSizeKey] = "large"
	}
	alloc := capacity.DeepCopy()
	for k, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: "100m", corev1.ResourceMemory: "10Mi"} {
		q := alloc[k]
		q.Sub(resource.MustParse(v))
		alloc[k] = q
	}
	return &scheduling.InstanceType{Name: name, Labels: labels, Capacity: capacity, Allocatable: alloc, Offerings: offerings}
}

// fakeTypes are fake.NewCloudProvider's default instance types.
func fakeTypes() []*scheduling.InstanceType {
	return []*scheduling.InstanceType{
		fakeType("default-instance-type", "", nil),
		fakeType("small-instance-type", "", rl("cpu", "2", "memory", "2Gi")),
		fakeType("gpu-vendor-instance-type", "", rl(fakeVendorA, "2")),
		fakeType("gpu-vendor-b-instance-type", "", rl(fakeVendorB, "2")),
		fakeType("arm-instance-type", "arm64", rl("cpu", "16", "memory", "128Gi")),
		fakeType("single-pod-instance-type", "", rl("pods", "1")),
	}
}

// exampleType is the suite's AddInstanceResources: a type of arch "arch"
// with the resources given, spot in zone 1 only (Karpenter names each
// "example"; here they are told apart by their CPU count).
func exampleType(cpu, mem string) *scheduling.InstanceType {
	r := rl("cpu", cpu, "memory", mem)
	return fakeType("example-"+cpu, "arch", r, fakeOffer(wellknown.CapacityTypeSpot, fakeZone1, fakePrice(r)))
}

// fakePool is test.NodePool: no requirements, a limit of 2000 CPU, on
// the default class.
func fakePool(name string, opts ...func(*karpv1.NodePool)) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-np-" + name)}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Limits = karpv1.Limits(rl("cpu", "2000"))
	for _, o := range opts {
		o(np)
	}
	return np
}

func withPoolReq(key string, op corev1.NodeSelectorOperator, vals ...string) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals})
	}
}

func withPoolLabel(k, v string) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) {
		if np.Spec.Template.Labels == nil {
			np.Spec.Template.Labels = map[string]string{}
		}
		np.Spec.Template.Labels[k] = v
	}
}

func withPoolTaint(t corev1.Taint) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) { np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, t) }
}

func withPoolLimits(kv ...string) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) { np.Spec.Limits = karpv1.Limits(rl(kv...)) }
}

func withPoolWeight(w int32) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) { np.Spec.Weight = &w }
}

var fixturePodSeq int

// fakePod is test.UnschedulablePod: no requests unless given.
func fakePod(opts ...func(*corev1.Pod)) *corev1.Pod {
	fixturePodSeq++
	name := fmt.Sprintf("pod-%06d", fixturePodSeq)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: map[string]string{},
			CreationTimestamp: metav1.NewTime(fixtureNow.Add(-time.Minute))},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// requests sets the pod's requests.
func requests(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = rl(kv...) }
}

// limited sets limits, and requests to them where not set, as the API
// server defaults a container's requests.
func limited(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Resources.Limits = rl(kv...)
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		for k, v := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[k]; !ok {
				c.Resources.Requests[k] = v
			}
		}
	}
}

func initContainer(sidecar bool, kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		c := corev1.Container{Name: fmt.Sprintf("init-%d", len(p.Spec.InitContainers)), Resources: corev1.ResourceRequirements{Requests: rl(kv...), Limits: rl(kv...)}}
		if sidecar {
			always := corev1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

func labelled(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func selector(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func expr(key string, op corev1.NodeSelectorOperator, vals ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals}
}

func ensureAffinity(p *corev1.Pod) {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	if p.Spec.Affinity.NodeAffinity == nil {
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
}

// nodeTerms sets the required node affinity, one term per list.
func nodeTerms(terms ...[]corev1.NodeSelectorRequirement) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		ensureAffinity(p)
		ns := &corev1.NodeSelector{}
		for _, t := range terms {
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = ns
	}
}

// nodeReqs is PodOptions.NodeRequirements: one required term.
func nodeReqs(exprs ...corev1.NodeSelectorRequirement) func(*corev1.Pod) { return nodeTerms(exprs) }

// nodePref adds a preferred node-affinity term.
func nodePref(weight int32, exprs ...corev1.NodeSelectorRequirement) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		ensureAffinity(p)
		p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: exprs}})
	}
}

func podAntiAffinity(preferred bool, key string, sel map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		if p.Spec.Affinity.PodAntiAffinity == nil {
			p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a := p.Spec.Affinity.PodAntiAffinity
		term := corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}
		if preferred {
			a.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PreferredDuringSchedulingIgnoredDuringExecution, corev1.WeightedPodAffinityTerm{Weight: 1, PodAffinityTerm: term})
		} else {
			a.RequiredDuringSchedulingIgnoredDuringExecution = append(a.RequiredDuringSchedulingIgnoredDuringExecution, term)
		}
	}
}

func podAffinityPref(key string, sel map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
			{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}}}}
	}
}

func spreadAnyway(key string, sel map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}})
	}
}

func tolerations(ts ...corev1.Toleration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, ts...) }
}

func hostPort(port int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port})
	}
}

// daemonSet is test.DaemonSet with the pod options given.
func daemonSet(name string, opts ...func(*corev1.Pod)) *appsv1.DaemonSet {
	p := fakePod(opts...)
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-ds-" + name)},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"ds": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"ds": name}}, Spec: p.Spec}},
	}
}

// ownedBy makes a pod a DaemonSet's, as its controller creates them.
func ownedBy(ds *appsv1.DaemonSet) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID,
			Controller: new(true), BlockOwnerDeletion: new(true)})
	}
}

// world is a cluster that provisions as Karpenter's ExpectProvisioned:
// a provisioning pass (planning.PodsToProvision, SimulationInput, then
// scheduling.Solve), after which each new NodeClaim is created as
// planning.NodeClaimFor writes it and launched as Karpenter's fake cloud
// provider does (the type and offering the AWS launch would pick), its
// Node joins registered but not initialized, and the pods are bound.
type world struct {
	t       *testing.T
	class   *scheduling.NodeClass
	snap    cluster.Snapshot
	seq     int
	results *scheduling.Results // of the last pass
	created []*karpv1.NodeClaim // every NodeClaim created, as cloudProvider.CreateCalls
	opts    scheduling.Options
}

func newWorld(t *testing.T, its []*scheduling.InstanceType, pools ...*karpv1.NodePool) *world {
	if its == nil {
		its = fakeTypes()
	}
	return &world{t: t, class: &scheduling.NodeClass{Name: "default", Ready: true, InstanceTypes: its},
		snap: cluster.Snapshot{NodePools: pools}, opts: scheduling.Provisioning()}
}

// binding is where a pass put a pod.
type binding struct {
	node  *corev1.Node
	claim *karpv1.NodeClaim
}

type pass map[*corev1.Pod]binding

func (w *world) addPods(pods ...*corev1.Pod) {
	for _, p := range pods {
		if !slices.Contains(w.snap.Pods, p) {
			w.snap.Pods = append(w.snap.Pods, p)
		}
	}
}

// provision is ExpectProvisioned: one pass, pods bound where it put them.
func (w *world) provision(pods ...*corev1.Pod) pass { return w.run(true, pods...) }

// provisionNoBinding is ExpectProvisionedNoBinding.
func (w *world) provisionNoBinding(pods ...*corev1.Pod) pass { return w.run(false, pods...) }

func (w *world) run(bind bool, pods ...*corev1.Pod) pass {
	w.t.Helper()
	w.addPods(pods...)
	pending := planning.PodsToProvision(&w.snap, fixtureNow)
	sim := planning.SimulationInput(&w.snap, pending, map[string]*scheduling.NodeClass{w.class.Name: w.class})
	r := scheduling.Solve(sim, w.opts)
	w.results = r
	out := pass{}
	for name, placed := range r.Existing {
		b := w.bindingOf(name)
		for _, p := range placed {
			out[p] = b
		}
	}
	for _, c := range r.NewNodeClaims {
		b := w.launch(c)
		for _, p := range c.Pods {
			out[p] = b
		}
	}
	if bind {
		for p, b := range out {
			w.bindPod(p, b.node)
		}
	}
	return out
}

func (w *world) bindingOf(name string) binding {
	w.t.Helper()
	for _, n := range w.snap.Nodes {
		if n.Name == name {
			for _, nc := range w.snap.NodeClaims {
				if nc.Status.ProviderID != "" && nc.Status.ProviderID == n.Spec.ProviderID {
					return binding{node: n, claim: nc}
				}
			}
			return binding{node: n}
		}
	}
	w.t.Fatalf("the solve placed pods on %s, which is no node", name)
	return binding{}
}

func (w *world) pool(name string) *karpv1.NodePool {
	for _, np := range w.snap.NodePools {
		if np.Name == name {
			return np
		}
	}
	w.t.Fatalf("no NodePool %s", name)
	return nil
}

// launch creates the claim's NodeClaim (planning.NodeClaimFor), launches
// it on the type and offering the AWS launch would pick, and joins its
// Node, registered, not initialized.
func (w *world) launch(c *scheduling.NewNodeClaim) binding {
	w.t.Helper()
	it, o := c.CheapestOffering()
	if it == nil {
		w.t.Fatalf("new NodeClaim of %s has no offering to launch", c.NodePool)
	}
	w.seq++
	nc := planning.NodeClaimFor(w.pool(c.NodePool), &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: c.NodeClass}}, c)
	nc.Name = fmt.Sprintf("nodeclaim-%d", w.seq)
	w.created = append(w.created, nc.DeepCopy())
	maps.Copy(nc.Labels, it.Labels)
	nc.Labels[wellknown.ZoneLabel] = o.Zone
	nc.Labels[wellknown.CapacityTypeLabel] = o.CapacityType
	providerID := fmt.Sprintf("fake:///%d", w.seq)
	nc.Status = karpv1.NodeClaimStatus{ProviderID: providerID, Capacity: it.Capacity.DeepCopy(), Allocatable: it.Allocatable.DeepCopy()}
	nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", metav1.NewTime(fixtureNow))
	nc.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "", metav1.NewTime(fixtureNow))
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", w.seq), Labels: maps.Clone(nc.Labels), Annotations: maps.Clone(nc.Annotations)},
		Spec:       corev1.NodeSpec{ProviderID: providerID, Taints: append(slices.Clone(c.Taints), c.StartupTaints...)},
		Status: corev1.NodeStatus{Capacity: it.Capacity.DeepCopy(), Allocatable: it.Allocatable.DeepCopy(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	node.Labels[wellknown.RegisteredLabel] = "true"
	node.Labels[wellknown.HostnameLabel] = node.Name
	nc.Status.NodeName = node.Name
	w.snap.NodeClaims = append(w.snap.NodeClaims, nc)
	w.snap.Nodes = append(w.snap.Nodes, node)
	return binding{node: node, claim: nc}
}

// bindPod is ExpectManualBinding.
func (w *world) bindPod(p *corev1.Pod, n *corev1.Node) {
	p.Spec.NodeName = n.Name
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	w.addPods(p)
}

// typeOf is the instance type a node was launched as.
func (w *world) typeOf(n *corev1.Node) *scheduling.InstanceType {
	w.t.Helper()
	for _, it := range w.class.InstanceTypes {
		if it.Name == n.Labels[wellknown.InstanceTypeLabel] {
			return it
		}
	}
	w.t.Fatalf("node %s has no known instance type", n.Name)
	return nil
}

// expectScheduled is ExpectScheduled.
func expectScheduled(t *testing.T, w *world, p pass, pod *corev1.Pod) *corev1.Node {
	t.Helper()
	b, ok := p[pod]
	if !ok {
		t.Fatalf("pod %s not scheduled: %s", pod.Name, reasonOf(w.results, pod))
	}
	return b.node
}

// expectNotScheduled is ExpectNotScheduled.
func expectNotScheduled(t *testing.T, p pass, pod *corev1.Pod) {
	t.Helper()
	if b, ok := p[pod]; ok {
		t.Fatalf("pod %s scheduled on %s, want it pending", pod.Name, b.node.Name)
	}
}

func reasonOf(r *scheduling.Results, p *corev1.Pod) string {
	if r == nil {
		return "no pass"
	}
	for _, e := range r.Unschedulable {
		if e.Pod == p {
			return e.Reason
		}
	}
	return "no reason given"
}

// expectCapacity checks the CPU and memory of the type a node was
// launched as (instanceTypeMap[...].Capacity in Karpenter's cases).
func expectCapacity(t *testing.T, w *world, n *corev1.Node, cpu, mem string) {
	t.Helper()
	it := w.typeOf(n)
	c, m := it.Capacity[corev1.ResourceCPU], it.Capacity[corev1.ResourceMemory]
	if c.Cmp(resource.MustParse(cpu)) != 0 || m.Cmp(resource.MustParse(mem)) != 0 {
		t.Fatalf("node %s is %s with %s CPU and %s memory, want %s and %s", n.Name, it.Name, c.String(), m.String(), cpu, mem)
	}
}

// expectResources is ExpectResources: each resource of want, as got has it.
func expectResources(t *testing.T, want, got corev1.ResourceList) {
	t.Helper()
	for name, q := range want {
		g := got[name]
		if g.Cmp(q) != 0 {
			t.Errorf("%s = %s, want %s (all: %v)", name, g.String(), q.String(), got)
		}
	}
}
