// Package planning turns a cluster snapshot into what the simulator
// decides on and its plan into NodeClaims: plain data in, plain data out.
package planning

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/nodeclaim"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// SimulationInput turns a snapshot into the simulator's input. Existing
// nodes carry their bound pods; NodeClaims without a Ready node yet are
// in-flight capacity, so pods already provisioned for are not provisioned
// for twice. classes gives each EC2NodeClass's launchable instance types.
func SimulationInput(snap *cluster.Snapshot, pending []*corev1.Pod, classes map[string]*scheduling.NodeClass) *scheduling.Snapshot {
	claimByProvider := map[string]*karpv1.NodeClaim{}
	for _, nc := range snap.NodeClaims {
		if nc.Status.ProviderID != "" {
			claimByProvider[nc.Status.ProviderID] = nc
		}
	}
	// A pod being re-provisioned off a leaving node is in the batch; it must
	// not also count on its old node.
	inBatch := make(map[*corev1.Pod]bool, len(pending))
	for _, p := range pending {
		inBatch[p] = true
	}
	podsByNode := map[string][]*corev1.Pod{}
	for _, p := range snap.Pods {
		if p.Spec.NodeName != "" && !podutil.IsTerminal(p) && !inBatch[p] {
			podsByNode[p.Spec.NodeName] = append(podsByNode[p.Spec.NodeName], p)
		}
	}
	out := &scheduling.Snapshot{
		ReservationsHeld:       ReservationsHeld(snap.NodeClaims),
		Pods:                   pending,
		NodePools:              snap.NodePools,
		NodeClasses:            classes,
		DaemonSets:             snap.DaemonSets,
		DaemonSetPods:          daemonSetPods(snap),
		PersistentVolumeClaims: snap.PVCs,
		PersistentVolumes:      snap.PVs,
		StorageClasses:         snap.StorageClasses,
		CSINodes:               snap.CSINodes,
	}
	withNode := map[string]bool{}
	for _, n := range snap.Nodes {
		claim := claimByProvider[n.Spec.ProviderID]
		sn := &scheduling.Node{
			Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints, Allocatable: n.Status.Allocatable, Capacity: n.Status.Capacity,
			Pods: podsByNode[n.Name], Requested: scheduling.SumRequests(podsByNode[n.Name]), NodePool: n.Labels[wellknown.NodePoolLabel],
			MarkedForDeletion: n.DeletionTimestamp != nil || n.Spec.Unschedulable || wellknown.IsDisrupted(n),
			Deleting:          n.DeletionTimestamp != nil,
		}
		if claim != nil {
			withNode[claim.Name] = true
			sn.NodeClaim = claim.Name
			sn.NodePool = claim.Labels[wellknown.NodePoolLabel]
			sn.InFlight = !claim.IsTrue(karpv1.ConditionTypeInitialized)
			sn.MarkedForDeletion = sn.MarkedForDeletion || claim.DeletionTimestamp != nil
			sn.Deleting = sn.Deleting || claim.DeletionTimestamp != nil
			sn.Price = claimPrice(claim, classes)
			if n.Labels[wellknown.RegisteredLabel] != "true" {
				// Joined, not registered yet: the kubelet could not give
				// itself every label of its claim (NodeRestriction refuses
				// node.kubernetes.io/team, kops.k8s.io/...), nor its taints.
				// The node counts as registration will leave it, as
				// Karpenter's state node reads an unregistered node's
				// labels and taints from its NodeClaim: else the pods made
				// for it would get another node.
				reg, _ := nodeclaim.RegisteredNode(claim, n)
				sn.Labels, sn.Taints = reg.Labels, reg.Spec.Taints
			}
			if sn.InFlight {
				// Until the node is initialized, what it still reports as
				// zero (a GPU before its device plugin runs) counts at what
				// its claim promises, as Karpenter's state node does: else
				// the pods made for it would get another node.
				sn.Allocatable = promised(n.Status.Allocatable, claim.Status.Allocatable)
				sn.Capacity = promised(n.Status.Capacity, claim.Status.Capacity)
			} else if len(sn.Allocatable) == 0 {
				sn.Allocatable = claim.Status.Allocatable
			}
			// Until the node is initialized its startup taints are expected
			// to go away; pods need not tolerate them.
			if sn.InFlight {
				sn.Taints = slices.DeleteFunc(slices.Clone(sn.Taints), func(t corev1.Taint) bool {
					return wellknown.IsEphemeralTaint(&t) || slices.ContainsFunc(claim.Spec.StartupTaints, func(s corev1.Taint) bool { return s.MatchTaint(&t) })
				})
			}
		}
		out.Nodes = append(out.Nodes, sn)
	}
	for _, claim := range snap.NodeClaims {
		if withNode[claim.Name] {
			continue
		}
		sn := &scheduling.Node{
			Name: claim.Name, NodeClaim: claim.Name, NodePool: claim.Labels[wellknown.NodePoolLabel],
			Labels: inFlightLabels(claim), Taints: claim.Spec.Taints, InFlight: true,
			MarkedForDeletion: claim.DeletionTimestamp != nil, Deleting: claim.DeletionTimestamp != nil,
			Allocatable: claim.Status.Allocatable, Capacity: claim.Status.Capacity,
			Price: claimPrice(claim, classes),
			// What the node may still be beyond its labels: a pod the
			// claim's requirements and types could meet waits for it.
			Requirements:  requirementsOf(claim),
			InstanceTypes: poolTypes(claim, classes),
		}
		if len(sn.Allocatable) == 0 {
			// Not launched yet: assume the smallest of the types it may
			// become, so the pods it was created for still fit in the
			// simulation and are not provisioned for twice. A capacity
			// the claim already states is kept: it counts against its
			// NodePool's limits as Karpenter's state node counts it.
			smallest, capacity := smallestOf(claim, classes)
			sn.Allocatable = smallest
			if len(sn.Capacity) == 0 {
				sn.Capacity = capacity
			}
		}
		out.Nodes = append(out.Nodes, sn)
	}
	return out
}

// daemonSetPods is, for each DaemonSet, its newest pod, bound or pending
// (Karpenter's cluster state keeps the same, by creation time): the pod
// stands for the DaemonSet's overhead on a new node.
func daemonSetPods(snap *cluster.Snapshot) []*corev1.Pod {
	if len(snap.DaemonSets) == 0 {
		return nil
	}
	newest := map[types.UID]*corev1.Pod{} // by the controller's UID
	for _, p := range snap.Pods {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil || ref.Kind != "DaemonSet" {
			continue
		}
		if cur := newest[ref.UID]; cur == nil || p.CreationTimestamp.After(cur.CreationTimestamp.Time) {
			newest[ref.UID] = p
		}
	}
	var out []*corev1.Pod
	for _, ds := range snap.DaemonSets {
		if p := newest[ds.UID]; p != nil && p.Namespace == ds.Namespace {
			out = append(out, p)
		}
	}
	return out
}

// promised is what a node not yet initialized reports, with each resource
// it reports as zero (or not at all) at its claim's value.
func promised(node, claim corev1.ResourceList) corev1.ResourceList {
	out := maps.Clone(node)
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range claim {
		if have, ok := out[name]; !ok || have.IsZero() {
			out[name] = q
		}
	}
	return out
}

// inFlightLabels are the labels a claim without a node will have for sure:
// its own, and each requirement that allows a single value (a zone, a
// capacity type the pods it was made for asked for). Instance labels are
// written at launch and the node's at registration; until then a pod that
// selects such a value must still see the claim as the capacity made for
// it, or every tick would create another claim for it (Karpenter reads an
// unregistered claim's missing labels as "any value" for the same reason).
func inFlightLabels(claim *karpv1.NodeClaim) map[string]string {
	out := maps.Clone(claim.Labels)
	if out == nil {
		out = map[string]string{}
	}
	for _, r := range claim.Spec.Requirements {
		if _, set := out[r.Key]; !set && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			out[r.Key] = r.Values[0]
		}
	}
	return out
}

// requirementsOf is the claim's requirements, never nil (nil is a node's).
func requirementsOf(claim *karpv1.NodeClaim) []karpv1.NodeSelectorRequirementWithMinValues {
	if claim.Spec.Requirements == nil {
		return []karpv1.NodeSelectorRequirementWithMinValues{}
	}
	return claim.Spec.Requirements
}

// poolTypes is the instance types the claim's instance-type requirement
// allows, as its NodePool sees them (NodeOverlays); the solver narrows
// them by the claim's other requirements.
func poolTypes(claim *karpv1.NodeClaim, classes map[string]*scheduling.NodeClass) []*scheduling.InstanceType {
	if claim.Spec.NodeClassRef == nil || classes[claim.Spec.NodeClassRef.Name] == nil {
		return nil
	}
	class := classes[claim.Spec.NodeClassRef.Name].ForPool(claim.Labels[wellknown.NodePoolLabel])
	allowed := scheduling.RequirementsFromNodePool(claim.Spec.Requirements).Get(wellknown.InstanceTypeLabel)
	var out []*scheduling.InstanceType
	for _, it := range class.InstanceTypes {
		if allowed.Matches(it.Name, true) {
			out = append(out, it)
		}
	}
	return out
}

// claimTypes is the instance types a claim's requirements allow.
func claimTypes(claim *karpv1.NodeClaim, classes map[string]*scheduling.NodeClass) []*scheduling.InstanceType {
	if claim.Spec.NodeClassRef == nil {
		return nil
	}
	class := classes[claim.Spec.NodeClassRef.Name]
	if class == nil {
		return nil
	}
	reqs := scheduling.RequirementsFromNodePool(claim.Spec.Requirements)
	allowed := reqs.Get(wellknown.InstanceTypeLabel)
	var out []*scheduling.InstanceType
	for _, it := range class.InstanceTypes {
		if allowed.Matches(it.Name, true) {
			out = append(out, it)
		}
	}
	return out
}

func smallestOf(claim *karpv1.NodeClaim, classes map[string]*scheduling.NodeClass) (corev1.ResourceList, corev1.ResourceList) {
	types := claimTypes(claim, classes)
	if len(types) == 0 {
		return claim.Spec.Resources.Requests, claim.Spec.Resources.Requests
	}
	return elementwiseMin(types, func(it *scheduling.InstanceType) corev1.ResourceList { return it.Allocatable }),
		elementwiseMin(types, func(it *scheduling.InstanceType) corev1.ResourceList { return it.Capacity })
}

// elementwiseMin is, per resource, the least any type offers (a resource
// some type lacks is left out).
func elementwiseMin(types []*scheduling.InstanceType, get func(*scheduling.InstanceType) corev1.ResourceList) corev1.ResourceList {
	out := get(types[0]).DeepCopy()
	for _, it := range types[1:] {
		l := get(it)
		for name, q := range out {
			other, ok := l[name]
			if !ok {
				delete(out, name)
				continue
			}
			if other.Cmp(q) < 0 {
				out[name] = other.DeepCopy()
			}
		}
	}
	return out
}

// claimPrice is the price of the claim's offering (instance type, zone,
// capacity type), 0 when unknown.
func claimPrice(claim *karpv1.NodeClaim, classes map[string]*scheduling.NodeClass) float64 {
	t, z, ct := claim.Labels[wellknown.InstanceTypeLabel], claim.Labels[wellknown.ZoneLabel], claim.Labels[wellknown.CapacityTypeLabel]
	if t == "" || claim.Spec.NodeClassRef == nil || classes[claim.Spec.NodeClassRef.Name] == nil {
		return 0
	}
	for _, it := range classes[claim.Spec.NodeClassRef.Name].InstanceTypes {
		if it.Name != t {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == z && o.CapacityType == ct {
				return o.Price
			}
		}
	}
	return 0
}

// ReservationsHeld counts the NodeClaims not launched yet (no provider ID,
// not being deleted) pinned to each capacity reservation by their
// karpenter.k8s.aws/capacity-reservation-id requirement: one of each
// reservation a claim names, as the simulation that made it held them.
// EC2's count does not show them yet, and a tick killed between creating
// a claim and launching it must not let the next one fill the
// reservation twice.
func ReservationsHeld(claims []*karpv1.NodeClaim) map[string]int {
	out := map[string]int{}
	for _, nc := range claims {
		if nc.Status.ProviderID != "" || nc.DeletionTimestamp != nil {
			continue
		}
		for _, r := range nc.Spec.Requirements {
			if r.Key == wellknown.CapacityReservationIDLabel && r.Operator == corev1.NodeSelectorOpIn {
				for _, id := range r.Values {
					out[id]++
				}
			}
		}
	}
	return out
}
