package nodeclaim

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/poolstatus"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/nodeclaim/lifecycle (registration_test.go,
// initialization_test.go, liveness_test.go), ported through the decisions
// the lifecycle tick takes: NodeFor, RegisteredNode, NotInitializedReason
// (the tick labels the node karpenter.sh/initialized and sets Initialized
// when it returns ""), Timeout, NodeClaim.IsManaged (the tick skips a
// claim that is not), and poolstatus.RecordRegistration (what the tick
// writes on the NodePool when a claim registers or is given up on). The
// registration hook cases are not ported: Karpless
// has no hook mechanism (its one AWS use, the placement group partition,
// is labelled at launch).

const (
	registrationFile   = "pkg/controllers/nodeclaim/lifecycle/registration_test.go"
	initializationFile = "pkg/controllers/nodeclaim/lifecycle/initialization_test.go"
	livenessFile       = "pkg/controllers/nodeclaim/lifecycle/liveness_test.go"
	lifecycleSuite     = "core/nodeclaim/lifecycle"
)

var now = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

// claim is test.NodeClaim after its launch: of pool default, with a
// provider ID and Launched at creation.
func claim(mods ...func(*karpv1.NodeClaim)) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "nc", UID: types.UID("nc-uid"), CreationTimestamp: metav1.NewTime(now),
			Labels: map[string]string{wellknown.NodePoolLabel: "default"}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("50Mi"), corev1.ResourcePods: resource.MustParse("5"),
			}},
		},
		Status: karpv1.NodeClaimStatus{ProviderID: "aws:///test-zone-1a/i-0123456789abcdef0"},
	}
	nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", metav1.NewTime(now))
	for _, m := range mods {
		m(nc)
	}
	return nc
}

// node is test.Node: Ready, with the claim's provider ID, the unregistered
// taint and the capacity of Karpenter's tests.
func node(nc *karpv1.NodeClaim, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node", Labels: map[string]string{}},
		Spec:       corev1.NodeSpec{ProviderID: nc.Status.ProviderID, Taints: []corev1.Taint{wellknown.UnregisteredNoExecuteTaint}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10"), corev1.ResourceMemory: resource.MustParse("100Mi"), corev1.ResourcePods: resource.MustParse("110"),
			},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("80Mi"), corev1.ResourcePods: resource.MustParse("110"),
			},
		},
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

// testPool is test.NodePool() as stored: generation 1, its class's
// generation observed, ValidationSucceeded and NodeClassReady True and
// NodeRegistrationHealthy Unknown; uid tells apart a NodePool made again
// under the same name.
func testPool(uid types.UID) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: uid, Generation: 1}}
	np.Status.NodeClassObservedGeneration = 1
	for _, c := range []metav1.Condition{
		{Type: karpv1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: karpv1.ConditionTypeValidationSucceeded},
		{Type: karpv1.ConditionTypeNodeClassReady, Status: metav1.ConditionTrue, Reason: karpv1.ConditionTypeNodeClassReady},
		{Type: karpv1.ConditionTypeNodeRegistrationHealthy, Status: metav1.ConditionUnknown, Reason: poolstatus.AwaitingReconciliationReason},
	} {
		c.ObservedGeneration, c.LastTransitionTime = np.Generation, metav1.NewTime(now)
		meta.SetStatusCondition(&np.Status.Conditions, c)
	}
	return np
}

// ownedBy makes the claim np's, as the provisioner creates it: labelled
// with its name, owned by its UID.
func ownedBy(np *karpv1.NodePool, name string) func(*karpv1.NodeClaim) {
	return func(nc *karpv1.NodeClaim) {
		nc.Name, nc.UID = name, types.UID(name+"-uid")
		nc.Labels[wellknown.NodePoolLabel] = np.Name
		nc.OwnerReferences = []metav1.OwnerReference{{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool", Name: np.Name, UID: np.UID, BlockOwnerDeletion: new(true)}}
	}
}

// recordOn is what the tick writes on np for nc's outcome: the buffer
// annotation and the conditions.
func recordOn(np *karpv1.NodePool, nc *karpv1.NodeClaim, registered bool) {
	buf, status, ok := poolstatus.RecordRegistration(np, nodeClass, nc, registered, now)
	if !ok {
		return
	}
	if np.Annotations == nil {
		np.Annotations = map[string]string{}
	}
	np.Annotations[poolstatus.RegistrationOutcomesAnnotation] = buf.Encode()
	np.Status = status
}

// nodeClass is the NodePools' EC2NodeClass, at the generation they observed.
var nodeClass = &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1}}

// registerOn is the tick's registration of nc, with its success recorded
// on np.
func registerOn(t *testing.T, np *karpv1.NodePool, nc *karpv1.NodeClaim, nodes ...*corev1.Node) *corev1.Node {
	t.Helper()
	n, _ := register(t, nc, nodes...)
	if n != nil {
		recordOn(np, nc, true)
	}
	return n
}

// health is np's NodeRegistrationHealthy status ("" when it has none).
func health(np *karpv1.NodePool) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy); c != nil {
		return c.Status
	}
	return ""
}

func expectHealth(t *testing.T, np *karpv1.NodePool, want metav1.ConditionStatus) {
	t.Helper()
	if got := health(np); got != want {
		t.Fatalf("NodeRegistrationHealthy %q, want %q (%+v)", got, want, np.Status.Conditions)
	}
}

func unmanaged(nc *karpv1.NodeClaim) {
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "UnmanagedNodeClass", Name: "default"}
}

// register is the tick's registration of nc with nodes: the Node found,
// and what registration leaves of it (nil when it registers none).
func register(t *testing.T, nc *karpv1.NodeClaim, nodes ...*corev1.Node) (*corev1.Node, bool) {
	t.Helper()
	if !nc.IsManaged() {
		return nil, false
	}
	n, dup := NodeFor(nc, nodes)
	if dup || n == nil {
		return nil, false
	}
	next, missing := RegisteredNode(nc, n)
	nc.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "", metav1.NewTime(now))
	nc.Status.NodeName = n.Name
	return next, missing
}

func hasTaints(n *corev1.Node, ts ...corev1.Taint) bool {
	for _, t := range ts {
		if !slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) && x.Value == t.Value }) {
			return false
		}
	}
	return true
}

func TestConformanceRegistration(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: lifecycleSuite, File: registrationFile, Spec: "Registration > " + spec}
	}
	taints := []corev1.Taint{
		{Key: "custom-taint", Effect: corev1.TaintEffectNoSchedule, Value: "custom-value"},
		{Key: "other-custom-taint", Effect: corev1.TaintEffectNoExecute, Value: "other-custom-value"},
	}
	startupTaints := []corev1.Taint{
		{Key: "custom-startup-taint", Effect: corev1.TaintEffectNoSchedule, Value: "custom-startup-value"},
		{Key: "other-custom-startup-taint", Effect: corev1.TaintEffectNoExecute, Value: "other-custom-startup-value"},
	}
	doNotSync := func(v string) func(*corev1.Node) {
		return func(n *corev1.Node) { n.Labels[wellknown.DoNotSyncTaintsLabel] = v }
	}
	withTaints := func(ts, sts []corev1.Taint) func(*karpv1.NodeClaim) {
		return func(nc *karpv1.NodeClaim) { nc.Spec.Taints, nc.Spec.StartupTaints = ts, sts }
	}

	conformance.Run(t, c("Registration > should match the nodeClaim to the Node when the Node comes online"), func(t *testing.T) {
		np := testPool("np-uid")
		nc := claim(ownedBy(np, "nc"))
		n := registerOn(t, np, nc, node(nc))
		if n == nil || !nc.IsTrue(karpv1.ConditionTypeRegistered) || nc.Status.NodeName != n.Name {
			t.Fatal("not registered")
		}
		expectHealth(t, np, metav1.ConditionTrue)
	})
	conformance.Run(t, c("Registration > should ignore NodeClaims not managed by this Karpenter instance"), func(t *testing.T) {
		nc := claim(unmanaged)
		if n, _ := register(t, nc, node(nc)); n != nil || nc.IsTrue(karpv1.ConditionTypeRegistered) || nc.Status.NodeName != "" {
			t.Fatal("registered another provider's claim")
		}
	})
	conformance.Run(t, c("should add the owner reference to the Node when the Node comes online"), func(t *testing.T) {
		nc := claim()
		n, _ := register(t, nc, node(nc))
		if !slices.ContainsFunc(n.OwnerReferences, func(o metav1.OwnerReference) bool {
			return o.Kind == "NodeClaim" && o.Name == nc.Name && o.UID == nc.UID && o.APIVersion == karpv1.SchemeGroupVersion.String()
		}) {
			t.Fatalf("owner references %v", n.OwnerReferences)
		}
	})
	conformance.Run(t, c("should not add the owner reference to the Node when the Node already has the owner reference"), func(t *testing.T) {
		nc := claim()
		n, _ := register(t, nc, node(nc, func(n *corev1.Node) {
			n.OwnerReferences = []metav1.OwnerReference{{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: new(true)}}
		}))
		if len(n.OwnerReferences) != 1 {
			t.Fatalf("owner references %v", n.OwnerReferences)
		}
	})
	conformance.Run(t, c("should sync the karpenter.sh/registered label to the Node and remove the karpenter.sh/unregistered taint when the Node comes online"), func(t *testing.T) {
		nc := claim()
		n, _ := register(t, nc, node(nc))
		if n.Labels[wellknown.RegisteredLabel] != "true" || hasTaints(n, wellknown.UnregisteredNoExecuteTaint) {
			t.Fatalf("labels %v taints %v", n.Labels, n.Spec.Taints)
		}
	})
	conformance.Run(t, c("should succeed registration if the karpenter.sh/unregistered taint is not present and emit an event"), func(t *testing.T) {
		nc := claim()
		n, missing := register(t, nc, node(nc, func(n *corev1.Node) { n.Spec.Taints = nil }))
		if n == nil || !nc.IsTrue(karpv1.ConditionTypeRegistered) || nc.Status.NodeName != n.Name || n.Labels[wellknown.RegisteredLabel] != "true" {
			t.Fatal("not registered")
		}
		if !missing {
			t.Fatal("no UnregisteredTaintMissing event")
		}
	})
	conformance.Run(t, c("should sync the labels to the Node when the Node comes online"), func(t *testing.T) {
		nc := claim(func(nc *karpv1.NodeClaim) {
			nc.Labels["custom-label"] = "custom-value"
			nc.Labels["other-custom-label"] = "other-custom-value"
		})
		n, _ := register(t, nc, node(nc))
		for k, v := range nc.Labels {
			if n.Labels[k] != v {
				t.Fatalf("node label %s=%q, want %q", k, n.Labels[k], v)
			}
		}
	})
	conformance.Run(t, c("should sync the annotations to the Node when the Node comes online"), func(t *testing.T) {
		nc := claim(func(nc *karpv1.NodeClaim) {
			nc.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true", "my-custom-annotation": "my-custom-value"}
		})
		n, _ := register(t, nc, node(nc))
		for k, v := range nc.Annotations {
			if n.Annotations[k] != v {
				t.Fatalf("node annotation %s=%q, want %q", k, n.Annotations[k], v)
			}
		}
	})
	syncs := func(spec string, nodeLabel string, want bool, startup bool) {
		conformance.Run(t, c(spec), func(t *testing.T) {
			nc := claim(withTaints(taints, nil))
			expect := taints
			if startup {
				nc = claim(withTaints(taints, startupTaints))
				expect = startupTaints
			}
			var mods []func(*corev1.Node)
			if nodeLabel != "" {
				mods = append(mods, doNotSync(nodeLabel))
			}
			n, _ := register(t, nc, node(nc, mods...))
			if want != hasTaints(n, expect...) {
				t.Fatalf("taints %v, synced want %v", n.Spec.Taints, want)
			}
			if !want {
				// Only the unregistered taint was on it, and it is gone.
				if len(n.Spec.Taints) != 0 {
					t.Fatalf("taints %v", n.Spec.Taints)
				}
			}
		})
	}
	syncs("should sync the taints to the Node when the Node comes online, if node label do not sync taints is not present", "", true, false)
	syncs("should sync the taints to the Node when the Node comes online, if node label do not sync taints is present but key is not true", "false", true, false)
	syncs("should not sync the taints to the Node when the Node comes online, with node label do not sync taints", "true", false, false)
	syncs("should not sync the startupTaints to the Node when the Node comes online, with node label do not sync taints", "true", false, true)
	syncs("should sync the startupTaints to the Node when the Node comes online, if node label do not sync taints is not present", "", true, true)
	syncs("should sync the startupTaints to the Node when the Node comes online, if node label do not sync taints is present but key is not true", "false", true, true)
	conformance.Run(t, c("should not re-sync the startupTaints to the Node when the startupTaints are removed"), func(t *testing.T) {
		nc := claim(withTaints(nil, startupTaints))
		n, _ := register(t, nc, node(nc, func(n *corev1.Node) {
			n.Spec.Taints = append(slices.Clone(startupTaints), wellknown.UnregisteredNoExecuteTaint)
		}))
		if !hasTaints(n, startupTaints...) {
			t.Fatal("startup taints gone at registration")
		}
		// Removed by their owner; the claim is Registered, so registration
		// (the only writer of the claim's taints) does not run again.
		n.Spec.Taints = nil
		if !nc.IsTrue(karpv1.ConditionTypeRegistered) {
			t.Fatal("not registered")
		}
		if len(n.Spec.Taints) != 0 {
			t.Fatal("re-synced")
		}
	})
	conformance.Run(t, c("should add NodeRegistrationHealthy=true on the nodePool if registration succeeds and if it was previously false"), func(t *testing.T) {
		np := testPool("np-uid")
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeNodeRegistrationHealthy,
			Status: metav1.ConditionFalse, Reason: "unhealthy", Message: "unhealthy", ObservedGeneration: np.Generation})
		// Karpenter's case runs without the registrationhealth controller
		// that would fill its buffer from the condition: the buffer is
		// empty. Karpless's empty buffer is one kept for the NodePool's
		// generations with no outcome in it.
		np.Annotations = map[string]string{poolstatus.RegistrationOutcomesAnnotation: poolstatus.RegistrationOutcomes{
			Generation: np.Generation, NodeClassGeneration: np.Status.NodeClassObservedGeneration}.Encode()}
		nc := claim(ownedBy(np, "nc"))
		n := registerOn(t, np, nc, node(nc))
		if n == nil || !nc.IsTrue(karpv1.ConditionTypeRegistered) || nc.Status.NodeName != n.Name {
			t.Fatal("not registered")
		}
		expectHealth(t, np, metav1.ConditionTrue)
	})
	conformance.Run(t, c("should not add NodeRegistrationHealthy=true on the nodePool if registration succeeds once and if it had previously failed twice in the registrationHealthBuffer"), func(t *testing.T) {
		np := testPool("np-uid")
		// Both launches fail; 6 minutes on, both are given up on.
		for _, name := range []string{"nc-1", "nc-2"} {
			nc := claim(ownedBy(np, name), failingLaunch)
			if Timeout(nc, now.Add(6*time.Minute), registrationTTL) != LaunchTimeoutReason {
				t.Fatalf("%s not given up on", name)
			}
			recordOn(np, nc, false)
		}
		expectHealth(t, np, metav1.ConditionFalse)
		if buf, _ := poolstatus.StoredRegistrationOutcomes(np); buf.Health() != poolstatus.RegistrationUnhealthy {
			t.Fatalf("buffer %+v is not unhealthy", buf)
		}
		nc := claim(ownedBy(np, "nc-3"))
		if n := registerOn(t, np, nc, node(nc)); n == nil || !nc.IsTrue(karpv1.ConditionTypeRegistered) || nc.Status.NodeName != n.Name {
			t.Fatal("not registered")
		}
		if buf, _ := poolstatus.StoredRegistrationOutcomes(np); buf.Health() != poolstatus.RegistrationUnhealthy {
			t.Fatalf("buffer %+v is not unhealthy", buf)
		}
		expectHealth(t, np, metav1.ConditionFalse)
	})
	conformance.Run(t, c("should not update NodeRegistrationHealthy status condition if nodePool owning the nodeClaim is deleted"), func(t *testing.T) {
		nc := claim(ownedBy(testPool("np-uid"), "nc"))
		// The NodePool deleted and made again: another UID.
		np := testPool("np-uid-2")
		expectHealth(t, np, metav1.ConditionUnknown)
		n := registerOn(t, np, nc, node(nc))
		expectHealth(t, np, metav1.ConditionUnknown)
		if _, ok := np.Annotations[poolstatus.RegistrationOutcomesAnnotation]; ok {
			t.Fatal("the new NodePool's buffer holds the old one's claim")
		}
		if n == nil || !nc.IsTrue(karpv1.ConditionTypeRegistered) || nc.Status.NodeName != n.Name {
			t.Fatal("not registered")
		}
	})
}

// registrationTTL is Karpenter's registrationTimeout, Karpless's default
// REGISTRATION_TTL.
const registrationTTL = 15 * time.Minute

// failingLaunch is a claim whose launch failed at creation (Launched
// False), as Karpenter's cases make it with no Create call allowed.
func failingLaunch(nc *karpv1.NodeClaim) {
	nc.Status.ProviderID = ""
	nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionFalse, "LaunchFailed", "no capacity", metav1.NewTime(now))
}

func TestConformanceInitialization(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: lifecycleSuite, File: initializationFile, Spec: "Initialization > " + spec}
	}
	initialized := func(t *testing.T, nc *karpv1.NodeClaim, n *corev1.Node, want bool) {
		t.Helper()
		why := NotInitializedReason(nc, n)
		if got := why == ""; got != want {
			t.Fatalf("initialized %v (%q), want %v", got, why, want)
		}
	}
	gpu := corev1.ResourceName("fake.com/vendor-a")
	conformance.Run(t, c("Initialization > should consider the NodeClaim initialized when all initialization conditions are met"), func(t *testing.T) {
		nc := claim()
		n, _ := register(t, nc, node(nc))
		initialized(t, nc, n, true)
	})
	conformance.Run(t, c("Initialization > should ignore NodeClaims which aren't managed by this Karpenter instance"), func(t *testing.T) {
		if claim(unmanaged).IsManaged() {
			t.Fatal("another provider's claim is initialized by the lifecycle tick")
		}
	})
	conformance.Run(t, c("shouldn't consider the nodeClaim initialized when it has not registered"), func(t *testing.T) {
		nc := claim()
		n1, n2 := node(nc), node(nc, func(n *corev1.Node) { n.Name = "node-2" })
		if n, _ := register(t, nc, n1, n2); n != nil || nc.IsTrue(karpv1.ConditionTypeRegistered) {
			t.Fatal("registered with two nodes of its provider ID")
		}
		// The tick initializes registered claims only.
	})
	conformance.Run(t, c("should add the initialization label to the node when the nodeClaim is initialized"), func(t *testing.T) {
		nc := claim()
		n, _ := register(t, nc, node(nc))
		initialized(t, nc, n, true)
	})
	conformance.Run(t, c("should not consider the Node to be initialized when the status of the Node is NotReady"), func(t *testing.T) {
		nc := claim()
		n, _ := register(t, nc, node(nc, func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }))
		initialized(t, nc, n, false)
	})
	withGPU := func(nc *karpv1.NodeClaim) { nc.Spec.Resources.Requests[gpu] = resource.MustParse("1") }
	conformance.Run(t, c("should not consider the Node to be initialized when all requested resources aren't registered"), func(t *testing.T) {
		nc := claim(withGPU)
		n, _ := register(t, nc, node(nc))
		initialized(t, nc, n, false)
	})
	conformance.Run(t, c("should consider the node to be initialized once all the resources are registered"), func(t *testing.T) {
		nc := claim(withGPU)
		n, _ := register(t, nc, node(nc))
		initialized(t, nc, n, false)
		n.Status.Capacity[gpu] = resource.MustParse("2")
		n.Status.Allocatable[gpu] = resource.MustParse("2")
		initialized(t, nc, n, true)
	})
	startup := func(nc *karpv1.NodeClaim) {
		nc.Spec.StartupTaints = []corev1.Taint{
			{Key: "custom-startup-taint", Effect: corev1.TaintEffectNoSchedule, Value: "custom-startup-value"},
			{Key: "other-custom-startup-taint", Effect: corev1.TaintEffectNoExecute, Value: "other-custom-startup-value"},
		}
	}
	conformance.Run(t, c("should not consider the Node to be initialized when all startupTaints aren't removed"), func(t *testing.T) {
		nc := claim(startup)
		n, _ := register(t, nc, node(nc))
		if !hasTaints(n, nc.Spec.StartupTaints...) {
			t.Fatalf("registration did not add the startup taints: %v", n.Spec.Taints)
		}
		initialized(t, nc, n, false)
	})
	conformance.Run(t, c("should consider the Node to be initialized once the startupTaints are removed"), func(t *testing.T) {
		nc := claim(startup)
		n, _ := register(t, nc, node(nc))
		initialized(t, nc, n, false)
		n.Spec.Taints = nil
		initialized(t, nc, n, true)
	})
	ephemeral := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{
			{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.cloudprovider.kubernetes.io/uninitialized", Effect: corev1.TaintEffectNoSchedule, Value: "true"},
			wellknown.UnregisteredNoExecuteTaint,
		}
	}
	conformance.Run(t, c("should not consider the Node to be initialized when all ephemeralTaints aren't removed"), func(t *testing.T) {
		nc := claim(startup)
		n, _ := register(t, nc, node(nc, ephemeral))
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x corev1.Taint) bool {
			return slices.ContainsFunc(nc.Spec.StartupTaints, func(st corev1.Taint) bool { return x.MatchTaint(&st) })
		})
		initialized(t, nc, n, false)
	})
	conformance.Run(t, c("should consider the Node to be initialized once the ephemeralTaints are removed"), func(t *testing.T) {
		nc := claim(startup)
		n, _ := register(t, nc, node(nc, ephemeral))
		initialized(t, nc, n, false)
		n.Spec.Taints = nil
		initialized(t, nc, n, true)
	})
	conformance.Run(t, c("should not consider the Node to be initialized while a readiness.k8s.io/ taint is present, and initialize once it is removed"), func(t *testing.T) {
		nc := claim()
		n, _ := register(t, nc, node(nc))
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "readiness.k8s.io/some-rule", Effect: corev1.TaintEffectNoSchedule})
		initialized(t, nc, n, false)
		n.Spec.Taints = nil
		initialized(t, nc, n, true)
	})
}

func TestConformanceLiveness(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: lifecycleSuite, File: livenessFile, Spec: "Liveness > " + spec}
	}
	const ttl = registrationTTL
	failing := failingLaunch
	timeout := func(t *testing.T, nc *karpv1.NodeClaim, after time.Duration, want string) {
		t.Helper()
		if !nc.IsManaged() {
			want = ""
		}
		got := ""
		if nc.IsManaged() {
			got = Timeout(nc, now.Add(after), ttl)
		}
		if got != want {
			t.Fatalf("timeout %q after %s, want %q", got, after, want)
		}
	}
	conformance.Run(t, c("Liveness > should delete the nodeClaim when the Node hasn't registered past the registration timeout"), func(t *testing.T) {
		timeout(t, claim(), 20*time.Minute, RegistrationTimeoutReason)
	})
	conformance.Run(t, c("Liveness > should ignore NodeClaims not managed by this Karpenter instance"), func(t *testing.T) {
		timeout(t, claim(unmanaged), 20*time.Minute, "")
	})
	conformance.Run(t, c("shouldn't delete the nodeClaim when the node has registered past the registration timeout"), func(t *testing.T) {
		nc := claim()
		register(t, nc, node(nc))
		timeout(t, nc, 20*time.Minute, "")
	})
	conformance.Run(t, c("should delete the NodeClaim when the NodeClaim hasn't launched past the launch timeout"), func(t *testing.T) {
		timeout(t, claim(failing), 6*time.Minute, LaunchTimeoutReason)
	})
	conformance.Run(t, c("should not delete the NodeClaim when the NodeClaim hasn't launched before the launch timeout"), func(t *testing.T) {
		timeout(t, claim(failing), time.Minute, "")
	})
	conformance.Run(t, conformance.Case{Suite: lifecycleSuite, File: livenessFile,
		Spec:    "Liveness > should respect a custom launch timeout configured via the LaunchTimeout var",
		Differs: "Karpenter's launch timeout is a package variable its tests change; Karpless's is fixed at Karpenter's default, 5 minutes"}, func(t *testing.T) {})
	// moved is Karpenter's edit: every condition's transition 10 minutes
	// after creation.
	moved := func(nc *karpv1.NodeClaim) {
		for i := range nc.Status.Conditions {
			nc.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now.Add(10 * time.Minute))
		}
	}
	conformance.Run(t, c("should use the status condition transition time for launch timeout, not the creation timestamp"), func(t *testing.T) {
		timeout(t, claim(failing, moved), 12*time.Minute, "")
	})
	conformance.Run(t, c("should use the status condition transition time for registration timeout, not the creation timestamp"), func(t *testing.T) {
		nc := claim(func(nc *karpv1.NodeClaim) {
			nc.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionUnknown, "NodeNotFound", "Node not registered with cluster", metav1.NewTime(now))
		}, moved)
		timeout(t, nc, 16*time.Minute, "")
	})
	// giveUp is the tick's liveness after: the claim given up on and its
	// failure recorded on np.
	giveUp := func(t *testing.T, np *karpv1.NodePool, nc *karpv1.NodeClaim, after time.Duration) {
		t.Helper()
		if Timeout(nc, now.Add(after), ttl) == "" {
			t.Fatalf("%s not given up on after %s", nc.Name, after)
		}
		recordOn(np, nc, false)
	}
	twoFailures := func(previously metav1.ConditionStatus) func(t *testing.T) {
		return func(t *testing.T) {
			np := testPool("np-uid")
			meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeNodeRegistrationHealthy,
				Status: previously, Reason: "Previously", ObservedGeneration: np.Generation})
			nc1, nc2 := claim(ownedBy(np, "nc-1"), failing), claim(ownedBy(np, "nc-2"), failing)
			giveUp(t, np, nc1, 6*time.Minute)
			expectHealth(t, np, previously) // one failure in four is healthy
			giveUp(t, np, nc2, 6*time.Minute)
			expectHealth(t, np, metav1.ConditionFalse)
			if c := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy); c.Reason != "LaunchFailed" || c.Message != "no capacity" {
				t.Fatalf("NodeRegistrationHealthy %s: %s, want the failed launch's reason", c.Reason, c.Message)
			}
		}
	}
	conformance.Run(t, c("should update NodeRegistrationHealthy status condition to False if it was previously set to True and there are >=2 registration failures"),
		twoFailures(metav1.ConditionTrue))
	conformance.Run(t, c("should update NodeRegistrationHealthy status condition to False if it was previously set to Unknown and there are >=2 registration failures"),
		twoFailures(metav1.ConditionUnknown))
	conformance.Run(t, c("should not update NodeRegistrationHealthy status condition if nodePool owning the nodeClaim is deleted"), func(t *testing.T) {
		nc := claim(ownedBy(testPool("np-uid"), "nc"), failing)
		np := testPool("np-uid-2") // deleted and made again: another UID
		expectHealth(t, np, metav1.ConditionUnknown)
		giveUp(t, np, nc, 20*time.Minute)
		expectHealth(t, np, metav1.ConditionUnknown)
	})
}
