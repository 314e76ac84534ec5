package scheduling

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Snapshot is everything a scheduling decision depends on. Solve reads it and
// never modifies it.
type Snapshot struct {
	// Pods is the batch of pending pods to place.
	Pods []*corev1.Pod
	// Nodes are the existing nodes and the in-flight NodeClaims (launched, not
	// registered yet), with the pods bound to them.
	Nodes       []*Node
	NodePools   []*karpv1.NodePool
	NodeClasses map[string]*NodeClass // by EC2NodeClass name
	DaemonSets  []*appsv1.DaemonSet
	// DaemonSetPods are the DaemonSets' own pods, bound or pending (the
	// newest of each, as Karpenter's cluster state keeps it): a DaemonSet's
	// overhead is its pod's requests and tolerations, which a LimitRange
	// or a webhook may have made other than its template's. Optional: a
	// DaemonSet without one here is stood for by its pod on a node, else
	// its template.
	DaemonSetPods []*corev1.Pod

	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	PersistentVolumes      []*corev1.PersistentVolume
	StorageClasses         []*storagev1.StorageClass
	// CSINodes give the attach limits of existing nodes (optional).
	CSINodes []*storagev1.CSINode
	// Namespaces are needed only to resolve pod-affinity namespaceSelectors
	// (optional; an empty selector matches every namespace regardless).
	Namespaces []*corev1.Namespace
	// ReservationsHeld counts, per capacity reservation, the NodeClaims
	// created but not launched yet that are pinned to it: their launches
	// will take what the offerings' ReservationCapacity still shows.
	ReservationsHeld map[string]int
}

// Node is an existing node or an in-flight NodeClaim.
type Node struct {
	// Name is the Node name, or the NodeClaim name when not registered yet.
	Name string
	// NodeClaim is the owning NodeClaim, "" when not managed by Karpless.
	NodeClaim string
	NodePool  string
	// Labels are the node's labels; for in-flight claims the NodeClaim's
	// labels (type, zone, capacity type, nodepool, ...).
	Labels map[string]string
	// Taints as on the node (or the NodeClaim spec). For managed nodes that
	// are not initialized yet, startup taints of the NodePool and known
	// ephemeral taints are ignored.
	Taints      []corev1.Taint
	Allocatable corev1.ResourceList
	// Capacity counts against NodePool limits; Allocatable is used when nil.
	Capacity corev1.ResourceList
	// Pods bound to the node: their requests use capacity, their labels
	// count for topology and affinity, their host ports and volumes are taken.
	Pods []*corev1.Pod
	// Requested, when set, is SumRequests(Pods): what the pods use. It is
	// optional; callers that solve many times over the same nodes (every
	// consolidation candidate is a Solve) set it once so that each Solve
	// does not add up every pod's containers again.
	Requested corev1.ResourceList
	// InFlight marks a NodeClaim that is launched but has no Ready node yet.
	InFlight bool
	// MarkedForDeletion marks a node being disrupted or terminated: pods are
	// not placed on it, but its pods count for topology until they move.
	MarkedForDeletion bool
	// Deleting marks a node being deleted (it or its NodeClaim has a
	// deletion timestamp): its capacity no longer counts against its
	// NodePool's limits, as Karpenter leaves such nodes out of a pass, so
	// that its pods' replacement capacity may launch.
	Deleting bool
	// Price is the $/h of its offering (for consolidation), 0 if unknown.
	Price float64
	// Requirements, non-nil for a NodeClaim whose Node has not joined yet
	// (launched or not), are the claim's: Labels then hold only the values
	// certain, and a pod goes on it when its requirements are compatible
	// with these and with one of InstanceTypes (the types the claim may
	// launch as), as they are for the pods the claim was made for. Until
	// the launch names the type, a pod that requires an instance attribute
	// (karpenter.k8s.aws/instance-local-nvme Gt 0) or a key the claim
	// allows any value of must still see it as its capacity, or each pass
	// would make another claim for it.
	Requirements  []karpv1.NodeSelectorRequirementWithMinValues
	InstanceTypes []*InstanceType
}

// NodeClass is the scheduling view of one EC2NodeClass.
type NodeClass struct {
	Name string
	// Ready is the EC2NodeClass Ready condition; NodePools whose class is not
	// ready cannot launch.
	Ready bool
	// InstanceTypes this class can launch, with allocatable already computed
	// for its kubelet settings and offerings only in its subnets' zones.
	InstanceTypes []*InstanceType
	// Pools has, by NodePool name, the types of a NodePool that sees them
	// otherwise than InstanceTypes (a NodeOverlay that selects some of the
	// class's NodePools only: Karpenter keeps instance types per NodePool).
	// A NodePool not listed uses InstanceTypes.
	Pools map[string][]*InstanceType
}

// ForPool is the class as a NodePool sees it: InstanceTypes are the
// pool's own when Pools lists it.
func (c *NodeClass) ForPool(pool string) *NodeClass {
	types, ok := c.Pools[pool]
	if !ok {
		return c
	}
	cp := *c
	cp.InstanceTypes, cp.Pools = types, nil
	return &cp
}

// InstanceType is a type a NodeClass can launch.
type InstanceType struct {
	Name string
	// Labels are the well-known labels of nodes of this type (single values),
	// from the catalog: instance-type, arch, os, karpenter.k8s.aws/instance-*.
	Labels map[string]string
	// LabelChoices are the labels a node of this type may get any one of
	// several values of, the launch choosing among those its NodeClaim
	// allows: Karpenter's instance types require
	// karpenter.k8s.aws/instance-tenancy In [default, dedicated] and launch
	// dedicated when the claim allows nothing else. A requirement on such
	// a key holds for the type when it holds for any of the values; Labels
	// keeps the one a node gets when the claim does not choose.
	LabelChoices map[string][]string
	Capacity     corev1.ResourceList
	Allocatable  corev1.ResourceList // capacity minus kubelet overhead
	Offerings    []Offering
}

// LabelMatches reports whether a node of this type can meet r: its label
// does, or, for a key of LabelChoices, one of the choices does.
func (it *InstanceType) LabelMatches(r *Requirement) bool {
	if vs, ok := it.LabelChoices[r.Key]; ok {
		for _, v := range vs {
			if r.Has(v) {
				return true
			}
		}
		return false
	}
	v, ok := it.Labels[r.Key]
	return r.Matches(v, ok)
}

// LabelValues are the values a node of this type can have for key: its
// LabelChoices, else its label (none when it has neither).
func (it *InstanceType) LabelValues(key string) []string {
	if vs, ok := it.LabelChoices[key]; ok {
		return vs
	}
	if v, ok := it.Labels[key]; ok {
		return []string{v}
	}
	return nil
}

// Offering is one way to buy an instance type.
type Offering struct {
	Zone         string
	CapacityType string  // spot | on-demand | reserved
	Price        float64 // USD per hour
	// Available is false when the capacity-error cache marks it unavailable.
	Available     bool
	ReservationID string // reserved only
	// ReservationCapacity is how many more instances the reservation takes
	// (reserved only); the solve holds one per NodeClaim that may launch
	// into it, as Karpenter's ReservationManager does.
	ReservationCapacity int
	// ReservationType is default or capacity-block (reserved only).
	ReservationType string
	// ReservationInterruptible marks an interruptible reservation.
	ReservationInterruptible bool
}

// PreferencePolicy says what to do with soft constraints.
type PreferencePolicy int

const (
	// PreferencesRespect treats preferred node affinity, preferred pod
	// (anti-)affinity and ScheduleAnyway spreads as required first, relaxing
	// them one at a time when a pod does not fit (Karpenter's default).
	PreferencesRespect PreferencePolicy = iota
	// PreferencesIgnore drops every soft constraint up front.
	PreferencesIgnore
)

// MinValuesPolicy says what to do when a NodeClaim cannot keep minValues.
type MinValuesPolicy int

const (
	// MinValuesStrict fails pods whose NodeClaim would break minValues.
	MinValuesStrict MinValuesPolicy = iota
	// MinValuesBestEffort keeps as many values as remain and marks the claim.
	MinValuesBestEffort
)

// Options tune a solve. The zero value is what provisioning uses, except
// that MaxNewNodeClaims 0 means "existing nodes only": use Provisioning().
type Options struct {
	// MaxNewNodeClaims caps new NodeClaims: -1 unlimited (provisioning),
	// 0 existing nodes only, 1 at most one replacement (consolidation).
	MaxNewNodeClaims int
	Preferences      PreferencePolicy
	MinValues        MinValuesPolicy
	// MaxInstanceTypes caps the instance types carried per NodeClaim; 0 means
	// 600, Karpenter's cap.
	MaxInstanceTypes int
	// ReservedFallback lets a pod go to on-demand or spot when the reserved
	// capacity it could use is all held by other NodeClaims of the solve
	// (Karpenter's ReservedOfferingModeFallback, for consolidation and
	// drift). Without it (provisioning, Karpenter's strict mode) such a pod
	// is left for the next pass (PodError.ReservedDeferred), when the
	// launches have used the reservation up and its offerings are gone.
	ReservedFallback bool
	// Settling and Moving are a consolidation simulation's (Karpenter's
	// IsConsolidationSimulation): the pods in Moving (those leaving the
	// candidates) are not placed on the existing nodes named in Settling
	// (still inside their NodePool's consolidateAfter window); other pods
	// may be.
	Settling map[string]bool
	Moving   map[*corev1.Pod]bool
}

// Provisioning returns the options a provisioning tick uses.
func Provisioning() Options { return Options{MaxNewNodeClaims: -1} }

// DefaultMaxInstanceTypes is the number of instance types a NodeClaim carries
// at most, as in Karpenter; CreateFleet later keeps the first 60.
const DefaultMaxInstanceTypes = 600

// Results is the outcome of a solve.
type Results struct {
	// Existing maps a node name (existing or in-flight) to the pods placed on it.
	Existing      map[string][]*corev1.Pod
	NewNodeClaims []*NewNodeClaim
	Unschedulable []PodError
}

// NewNodeClaim is a node to launch.
type NewNodeClaim struct {
	NodePool  string
	NodeClass string
	// Requirements are the narrowed requirements to write on the NodeClaim:
	// the NodePool's, the pods', topology decisions (zone, capacity type),
	// and node.kubernetes.io/instance-type In the types below.
	Requirements []karpv1.NodeSelectorRequirementWithMinValues
	// Labels are the template labels plus single-valued custom requirements.
	Labels        map[string]string
	Taints        []corev1.Taint
	StartupTaints []corev1.Taint
	// Requests are the pods' requests plus DaemonSet overhead.
	Requests corev1.ResourceList
	Pods     []*corev1.Pod
	// InstanceTypes are every type that fits, ordered by the price of their
	// cheapest available compatible offering, GPU/accelerator/metal types
	// after all others (at most Options.MaxInstanceTypes, 600).
	InstanceTypes []*InstanceType
	// MinValuesRelaxed is set when minValues could not be kept (BestEffort).
	MinValuesRelaxed bool

	// zoneReq and ctReq say which offerings the claim allows; a
	// NewNodeClaim built elsewhere gets them from Requirements on first use.
	// resReq is the capacity-reservation-id requirement (nil: any).
	zoneReq, ctReq, resReq *Requirement
}

// PodError is a pod that could not be placed, and why, in words.
type PodError struct {
	Pod    *corev1.Pod
	Reason string
	// ReservedDeferred marks a pod left for the next pass because the
	// reserved capacity it could use is held by the NodeClaims of this one
	// (strict mode): not a scheduling failure, as in Karpenter.
	ReservedDeferred bool
}

// allows reports whether the claim's requirements admit an offering.
func (n *NewNodeClaim) allows(o *Offering) bool {
	if !o.Available {
		return false
	}
	if n.zoneReq == nil || n.ctReq == nil {
		reqs := RequirementsFromNodePool(n.Requirements)
		n.zoneReq, n.ctReq = reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel)
		if r, ok := reqs[wellknown.CapacityReservationIDLabel]; ok {
			n.resReq = r
		}
	}
	return n.zoneReq.Has(o.Zone) && n.ctReq.Has(o.CapacityType) && OfferingMatchesReservation(n.resReq, o)
}

// OfferingMatchesReservation reports whether an offering meets a
// karpenter.k8s.aws/capacity-reservation-id requirement (nil: any): a
// reserved offering by its reservation, another by the label's absence,
// as Karpenter's offerings carry the label or DoesNotExist.
func OfferingMatchesReservation(r *Requirement, o *Offering) bool {
	if r == nil {
		return true
	}
	if o.CapacityType == wellknown.CapacityTypeReserved {
		return r.Matches(o.ReservationID, true)
	}
	return r.Matches("", false)
}

// CheapestOffering returns the instance type and offering the AWS launch
// would pick, the figure to use for $/h reports: the first of LaunchOrder
// over the claim's types and the offerings its requirements allow. It
// returns nil when no instance type has a compatible available offering.
func (n *NewNodeClaim) CheapestOffering() (*InstanceType, Offering) {
	o, ok := n.cheapest()
	if !ok {
		return nil, Offering{}
	}
	return o.Type, o.Offering
}

// HourlyPrice is what the claim's node is expected to cost per hour: the
// offering CheapestOffering picks plus the surplus CPU credits its
// requests spend on that type (burstable types above their baseline). It
// is the figure to compare with a node's (consolidation); 0 when nothing
// can launch.
func (n *NewNodeClaim) HourlyPrice() float64 {
	o, ok := n.cheapest()
	if !ok {
		return 0
	}
	return o.Hourly()
}

func (n *NewNodeClaim) cheapest() (LaunchOffering, bool) {
	_, offs := LaunchOrder(n.InstanceTypes, n.allows, n.hasMinValues(), n.RequestedCPUMilli())
	if len(offs) == 0 {
		return LaunchOffering{}, false
	}
	return offs[0], true
}

// RequestedCPUMilli is the CPU the claim's pods and DaemonSets request.
func (n *NewNodeClaim) RequestedCPUMilli() int64 {
	q := n.Requests[corev1.ResourceCPU]
	return q.MilliValue()
}

// CreditHourly is the $/h of surplus CPU credits the claim's node would
// spend on type it (CreditHourly at the claim's requests).
func (n *NewNodeClaim) CreditHourly(it *InstanceType) float64 {
	return CreditHourly(it, n.RequestedCPUMilli())
}

func (n *NewNodeClaim) hasMinValues() bool {
	for _, r := range n.Requirements {
		if r.MinValues != nil {
			return true
		}
	}
	return false
}

// exoticResources are the resources that make an instance type "exotic":
// launched only when asked for.
var exoticResources = []corev1.ResourceName{
	wellknown.ResourceNVIDIAGPU, wellknown.ResourceAMDGPU, wellknown.ResourceAWSNeuron,
	wellknown.ResourceAWSNeuronCore, wellknown.ResourceHabanaGaudi,
}

// isExotic reports whether a type is bare metal or carries GPUs or
// accelerators, which Karpenter's AWS launch avoids unless nothing else fits.
func isExotic(it *InstanceType) bool {
	if size := it.Labels[wellknown.InstanceSizeLabel]; size != "" && containsMetal(size) {
		return true
	}
	for _, r := range exoticResources {
		if q, ok := it.Capacity[r]; ok && !q.IsZero() {
			return true
		}
	}
	return false
}

func containsMetal(s string) bool {
	for i := 0; i+5 <= len(s); i++ {
		if s[i:i+5] == "metal" {
			return true
		}
	}
	return false
}
