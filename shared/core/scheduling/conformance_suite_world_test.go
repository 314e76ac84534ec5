package scheduling_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// A small cluster for the ported cases of Karpenter v1.14.1's scheduling
// suite that provision more than once: Karpenter's ExpectProvisioned is a
// provisioning pass here (the pending pods and the cluster's NodeClaims,
// Nodes and bound pods through planning.SimulationInput, then
// scheduling.Solve), after which each new NodeClaim is launched as
// Karpenter's fake cloud provider does it (the type and offering the AWS
// launch would pick, a reservation's count taken down by one), its Node
// joins registered but not initialized, and the pods are bound where the
// solve placed them.

const suiteFile = "pkg/controllers/provisioning/scheduling/suite_test.go"

func suiteCase(spec string) conformance.Case {
	return conformance.Case{Suite: "core/provisioning/scheduling", File: suiteFile, Spec: "Scheduling > " + spec}
}

var worldNow = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

type world struct {
	t       *testing.T
	class   *scheduling.NodeClass
	snap    cluster.Snapshot
	seq     int
	results *scheduling.Results // of the last pass
}

// newWorld is a cluster on the given instance types (the fake's defaults
// when nil) with the given NodePools.
func newWorld(t *testing.T, types []*scheduling.InstanceType, pools ...*karpv1.NodePool) *world {
	if types == nil {
		types = scheduling.FakeTypes()
	}
	return &world{t: t, class: &scheduling.NodeClass{Name: "default", Ready: true, InstanceTypes: types}, snap: cluster.Snapshot{NodePools: pools}}
}

// binding is where a pass put a pod: a node, and the NodeClaim behind it.
type binding struct {
	node  *corev1.Node
	claim *karpv1.NodeClaim
}

// pass is one ExpectProvisioned: what each pod of the pass was bound to
// (or nominated for, without binding).
type pass map[*corev1.Pod]binding

func (p pass) nodes() []*corev1.Node {
	var out []*corev1.Node
	seen := map[string]bool{}
	for _, b := range p {
		if !seen[b.node.Name] {
			seen[b.node.Name] = true
			out = append(out, b.node)
		}
	}
	return out
}

// addPods adds pods to the cluster, pending and unschedulable, as
// test.UnschedulablePod makes them.
func (w *world) addPods(pods ...*corev1.Pod) {
	for _, p := range pods {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		p.CreationTimestamp = metav1.NewTime(worldNow.Add(-time.Minute))
		if !slices.Contains(w.snap.Pods, p) {
			w.snap.Pods = append(w.snap.Pods, p)
		}
	}
}

// provision is ExpectProvisioned; provisionNoBinding ExpectProvisionedNoBinding.
func (w *world) provision(pods ...*corev1.Pod) pass { return w.run(true, pods...) }

func (w *world) provisionNoBinding(pods ...*corev1.Pod) pass { return w.run(false, pods...) }

func (w *world) run(bind bool, pods ...*corev1.Pod) pass {
	w.t.Helper()
	w.addPods(pods...)
	pending := planning.PodsToProvision(&w.snap, worldNow)
	sim := planning.SimulationInput(&w.snap, pending, map[string]*scheduling.NodeClass{"default": w.class})
	r := scheduling.Solve(sim, scheduling.Provisioning())
	scheduling.CheckInvariants(w.t, sim, r)
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
			p.Spec.NodeName = b.node.Name
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		}
	}
	return out
}

// bindingOf finds a node (or an in-flight claim's node) by the name the
// solve gave it.
func (w *world) bindingOf(name string) binding {
	w.t.Helper()
	for _, n := range w.snap.Nodes {
		if n.Name == name {
			return binding{node: n, claim: w.claimOf(n)}
		}
	}
	w.t.Fatalf("the solve placed pods on %s, which is no node", name)
	return binding{}
}

func (w *world) claimOf(n *corev1.Node) *karpv1.NodeClaim {
	for _, nc := range w.snap.NodeClaims {
		if nc.Status.ProviderID != "" && nc.Status.ProviderID == n.Spec.ProviderID {
			return nc
		}
	}
	return nil
}

// launch creates the NodeClaim, launches it (the cheapest type and
// offering its requirements allow, as the AWS launch picks them) and joins
// its Node, registered, not initialized.
func (w *world) launch(c *scheduling.NewNodeClaim) binding {
	w.t.Helper()
	it, o := c.CheapestOffering()
	if it == nil {
		w.t.Fatalf("new NodeClaim of %s has no offering to launch", c.NodePool)
	}
	if o.CapacityType == wellknown.CapacityTypeReserved {
		w.takeReservation(o.ReservationID)
	}
	w.seq++
	labels := maps.Clone(c.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, it.Labels)
	labels[wellknown.ZoneLabel] = o.Zone
	labels[wellknown.CapacityTypeLabel] = o.CapacityType
	labels[wellknown.NodePoolLabel] = c.NodePool
	if o.ReservationID != "" {
		labels[wellknown.CapacityReservationIDLabel] = o.ReservationID
	}
	providerID := fmt.Sprintf("fake:///%d", w.seq)
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("nodeclaim-%d", w.seq), Labels: labels},
		Spec: karpv1.NodeClaimSpec{
			Requirements:  c.Requirements,
			Taints:        c.Taints,
			StartupTaints: c.StartupTaints,
			NodeClassRef:  &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Resources:     karpv1.ResourceRequirements{Requests: c.Requests},
		},
		Status: karpv1.NodeClaimStatus{ProviderID: providerID, Capacity: it.Capacity.DeepCopy(), Allocatable: it.Allocatable.DeepCopy()},
	}
	nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", metav1.NewTime(worldNow))
	nc.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "", metav1.NewTime(worldNow))
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", w.seq), Labels: maps.Clone(labels)},
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

// takeReservation is EC2 counting the instance a launch put into a
// capacity reservation: what its offerings show goes down by one.
func (w *world) takeReservation(id string) {
	take := func(types []*scheduling.InstanceType) {
		for _, it := range types {
			for i := range it.Offerings {
				o := &it.Offerings[i]
				if o.ReservationID == id {
					o.ReservationCapacity--
					if o.ReservationCapacity <= 0 {
						o.Available = false
					}
				}
			}
		}
	}
	take(w.class.InstanceTypes)
	for _, types := range w.class.Pools {
		take(types)
	}
}

// initialize is ExpectMakeNodeClaimsInitialized and ExpectMakeNodesInitialized.
func (w *world) initialize(b binding) {
	if b.claim != nil {
		b.claim.SetCondition(karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "", metav1.NewTime(worldNow))
	}
	b.node.Labels[wellknown.InitializedLabel] = "true"
	b.node.Labels[wellknown.RegisteredLabel] = "true"
}

// deletePod is ExpectDeleted on a pod.
func (w *world) deletePod(p *corev1.Pod) {
	w.snap.Pods = slices.DeleteFunc(w.snap.Pods, func(q *corev1.Pod) bool { return q == p })
}

// bindPod is ExpectManualBinding.
func (w *world) bindPod(p *corev1.Pod, n *corev1.Node) {
	p.Spec.NodeName = n.Name
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	if !slices.Contains(w.snap.Pods, p) {
		w.snap.Pods = append(w.snap.Pods, p)
	}
}

// addNode adds a node not owned by Karpless (no NodeClaim), initialized.
func (w *world) addNode(name string, allocatable corev1.ResourceList, labels map[string]string) *corev1.Node {
	l := map[string]string{wellknown.HostnameLabel: name}
	maps.Copy(l, labels)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Status: corev1.NodeStatus{Allocatable: allocatable, Capacity: allocatable,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	w.snap.Nodes = append(w.snap.Nodes, n)
	return n
}

// addClaimAndNode is test.NodeClaimAndNode: a NodeClaim of no NodePool
// with its registered Node, allocatable as given.
func (w *world) addClaimAndNode(allocatable corev1.ResourceList, labels map[string]string) binding {
	w.seq++
	providerID := fmt.Sprintf("fake:///%d", w.seq)
	l := map[string]string{wellknown.EC2NodeClassLabel: "default"}
	maps.Copy(l, labels)
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("nodeclaim-%d", w.seq), Labels: l},
		Spec:       karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}},
		Status:     karpv1.NodeClaimStatus{ProviderID: providerID, Capacity: allocatable, Allocatable: allocatable},
	}
	nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", metav1.NewTime(worldNow))
	nc.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "", metav1.NewTime(worldNow))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", w.seq), Labels: maps.Clone(l)},
		Spec: corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Allocatable: allocatable, Capacity: allocatable,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	node.Labels[wellknown.HostnameLabel] = node.Name
	node.Labels[wellknown.RegisteredLabel] = "true"
	nc.Status.NodeName = node.Name
	w.snap.NodeClaims = append(w.snap.NodeClaims, nc)
	w.snap.Nodes = append(w.snap.Nodes, node)
	return binding{node: node, claim: nc}
}

// daemonSet is test.DaemonSet with the pod options given.
func daemonSet(name string, opts ...func(*corev1.Pod)) *appsv1.DaemonSet {
	p := scheduling.FakePod()
	for _, o := range opts {
		o(p)
	}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-ds-" + name)},
		Spec:       appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec}},
	}
}

// ownedBy makes a pod a DaemonSet's.
func ownedBy(ds *appsv1.DaemonSet) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: new(true)})
	}
}

// nodeCount is how many nodes the cluster has.
func (w *world) nodeCount() int { return len(w.snap.Nodes) }

func expectNode(t *testing.T, p pass, pod *corev1.Pod) *corev1.Node {
	t.Helper()
	b, ok := p[pod]
	if !ok {
		t.Fatalf("pod %s not scheduled", pod.Name)
	}
	return b.node
}

func expectSameNode(t *testing.T, a, b *corev1.Node) {
	t.Helper()
	if a.Name != b.Name {
		t.Fatalf("pods on %s and %s, want the same node", a.Name, b.Name)
	}
}

func expectOtherNode(t *testing.T, a, b *corev1.Node) {
	t.Helper()
	if a.Name == b.Name {
		t.Fatalf("both pods on %s, want different nodes", a.Name)
	}
}
