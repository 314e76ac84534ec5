// Package scheduling simulates where pending pods go: existing nodes, in-flight
// NodeClaims, or new NodeClaims with every instance type that still fits.
//
// # Contract
//
// Solve(snapshot, options) is a pure function: it reads a Snapshot (pending
// pods, nodes and in-flight NodeClaims with their bound pods, NodePools,
// NodeClasses with their instance types and offerings, DaemonSets, storage
// objects) and returns Results. It holds no clients, clocks or globals,
// starts no goroutines and never modifies its input; the same input gives
// the same output.
//
//	r := scheduling.Solve(snap, scheduling.Provisioning())
//	r.Existing       // node name -> pods placed there (existing or in-flight)
//	r.NewNodeClaims  // NodeClaims to create, each with its NodePool, narrowed
//	                 // requirements, labels, taints, requests, pods, and every
//	                 // instance type that fits, cheapest offering first (<= 600)
//	r.Unschedulable  // pods that fit nowhere, with a reason a person can act on
//
// Options{} (MaxNewNodeClaims 0) places pods on existing nodes only, which is
// what a consolidation "can these pods move" check needs; provisioning passes
// Provisioning() (-1, unlimited); a replacement check passes 1.
// NewNodeClaim.CheapestOffering gives the type and offering the AWS launch
// would pick (the figure for $/h reports). Explain answers, for one pod, where
// it goes and what rules out each existing node, NodePool and instance type.
//
// # Semantics (Karpenter v1)
//
// Pods are tried largest first (cpu, then memory, then age, then UID), each
// on existing nodes first (real nodes before in-flight claims, by name), then
// on NodeClaims opened earlier in the solve, then on a new NodeClaim from
// the highest-weight NodePool that can take it (or on an open claim grown
// to a bigger type, when that costs no more than a new claim; see Solve for
// the second growth rule a provisioning solve also tries, keeping the
// cheaper plan). A pod that fits nowhere has
// its preferences relaxed one at a time in Karpenter's order (extra required
// node-affinity terms, preferred pod affinity, preferred pod anti-affinity,
// preferred node affinity, ScheduleAnyway spreads, PreferNoSchedule taints)
// and, if it still fails, is retried after the rest of the queue as long as
// the queue makes progress.
//
// A node takes a pod whose requirements its labels meet. An in-flight
// NodeClaim with no Node yet (Node.Requirements set) takes one that some
// launch it allows would meet: its labels where it has them, else its
// requirements and instance types (Node.InstanceTypes), narrowed by each
// pod placed on it in the solve.
//
// Resources are the scheduler's effective requests (init and sidecar
// containers, overhead, in-place resizes) against allocatable; the overhead
// of the DaemonSets that would run on a node (their tolerations and node
// affinity evaluated per NodePool and instance type) is taken from each
// type's allocatable. Requirements come from nodeSelector, required node
// affinity (first term, then the next ones) and preferred node affinity
// (heaviest first); In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte and Lte are
// supported, deprecated label keys normalised. Well-known labels the
// NodePool does not constrain are allowed; custom labels must come from the
// NodePool's labels or requirements. Taints of the NodePool must be
// tolerated (PreferNoSchedule until relaxed); startup taints and the known
// ephemeral taints of uninitialized nodes are ignored, and their
// resources count at least at what their NodeClaims promise
// (shared/core/planning);
// karpenter.sh/do-not-disrupt is not a scheduling constraint. Pods with
// resource claims (DRA) are placed nowhere and DaemonSets' claims are
// left out of overhead, as Karpenter does by default (dra.go). NodePools that
// are static (spec.replicas: shared/core/static keeps their size, not pods),
// being deleted, or whose EC2NodeClass is missing or not ready do not launch
// for pods; a static NodePool's nodes take pods as any node. minValues
// counts distinct values across the types that still fit: labels, and for
// zone and capacity type the available offerings the claim allows. Under
// MinValuesStrict a claim short of them is not opened or grown; under
// MinValuesBestEffort a new claim lowers them to what there is
// (NewNodeClaim.MinValuesRelaxed) and later pods must keep that. The types
// kept after the cut to MaxInstanceTypes are counted again: Strict fails
// the claim's pods, BestEffort lowers minValues, so an In requirement
// never lists fewer values than its minValues.
// NodePool limits count existing and in-flight nodes but those being
// deleted (Node.Deleting: their pods need room elsewhere); each new NodeClaim
// holds the capacity of its largest remaining type against them, and gives
// back what it no longer needs as pods narrow it.
//
// Topology follows Karpenter: spread constraints on any key (zone, hostname,
// capacity type, ...) with maxSkew, minDomains, nodeAffinityPolicy,
// nodeTaintsPolicy and matchLabelKeys; required and preferred pod affinity
// and anti-affinity, including the anti-affinity of pods already placed;
// domains come from what the NodePools can launch and from existing nodes,
// counts from bound pods and from pods placed in the solve. Host ports are
// unique per node; bound PersistentVolumes pin pods to their zones and
// WaitForFirstConsumer StorageClasses to their allowed topologies (each
// alternative term tried in turn; the EBS CSI zone key is the zone); a
// claim that names no class gets the cluster's default StorageClass, and
// one that names its volume is bound only once marked
// pv.kubernetes.io/bind-completed; CSI attach limits of existing nodes
// (CSINode) are enforced, in-tree EBS volumes counted as ebs.csi.aws.com's.
// A NodeClaim is labelled with every custom key its requirements name, a
// value that meets them (for NotIn, Exists and bounds the smallest integer
// admitted, where Karpenter draws one at random).
//
// # Reserved capacity
//
// Reserved offerings (capacity type reserved, one per capacity reservation
// of the type in its zone) are priced as Karpenter prices them, the
// on-demand price over 10,000,000, and carry what the reservation can
// still take (Offering.ReservationCapacity). As Karpenter's
// ReservationManager, a new NodeClaim holds one instance of every
// reservation it could launch into while its pods allow one, gives back
// those they no longer allow, and is finalized pinned to capacity type
// reserved and to the reservations it holds (and to the types that have
// them). When every reservation a pod could use is held, provisioning
// (strict, Karpenter's DisableReservedCapacityFallback) leaves the pod for
// the next pass without relaxing it or trying lower-weight NodePools
// (PodError.ReservedDeferred; the launches will have used the reservation
// up, so that pass falls back to on-demand or spot), and consolidation
// (Options.ReservedFallback) sends it to on-demand or spot at once. Pods
// may select reservations by karpenter.k8s.aws/capacity-reservation-id,
// -type and -interruptible, which only reserved offerings carry.
//
// # Cost
//
// Among the places a pod may go, the solve prefers the one that costs least:
// an open NodeClaim whose cheapest fitting type stays the same price, else a
// new NodeClaim or a recent one grown to a bigger type, whichever adds less
// to the bill. Ties between equally valid zones go to the zone where the
// NodePool's types are cheapest. A claim's price is that of its cheapest
// available offering under its zone and capacity-type constraints, GPU and
// metal types only when nothing else fits, as the AWS launch does, plus
// the surplus CPU credits a burstable type (t3, t3a, t4g, unlimited mode)
// would spend above its baseline with the claim's pods and DaemonSets
// (CreditHourly; the model is catalog.Credits).
//
// Node.Price is carried for consolidation and not used here.
//
// # Differences from Karpenter, on purpose
//
//   - Owners of zonal anti-affinity take one empty zone each, and affinity
//     bootstraps on one zone. Karpenter narrows a new claim to every empty
//     zone and records them all, so only one such pod per batch goes
//     through and the rest wait for later batches; here all are placed in
//     one, within the same constraint.
//   - Equal-weight NodePools are tried cheapest first (Karpenter: by name),
//     so the order of names does not decide the bill.
//   - minValues counts only the zones and capacity types a claim still
//     allows (Karpenter counts all the type's zones, and its NodeClaim CRD
//     then refuses a claim narrowed below minValues), and BestEffort relaxes
//     again after the types are cut to the sixty sent (Karpenter does not):
//     either way the NodeClaim written never lists fewer values than its
//     minValues, which the CRD would refuse.
//   - Burstable types are priced with their surplus CPU credits (credits.go;
//     Karpenter ignores credits): a claim takes the type that costs least
//     with them, and its types (what CreateFleet is offered, LaunchOrder)
//     leave out a burstable type that costs more with credits than a type
//     EC2 would take after it for its higher offering price, unless that
//     breaks a minValues the full list meets (then all stay, as in
//     Karpenter).
//   - Topology keys other than the hostname track at most 64 domains (a
//     bitset per key, for speed); zones and custom keys stay far below.
package scheduling
