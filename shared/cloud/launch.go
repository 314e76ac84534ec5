package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/instancetype"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/tick"
)

// LaunchAttemptAnnotation counts definitive launch failures of a NodeClaim;
// it is part of the CreateFleet ClientToken, and is written before the next
// CreateFleet so that a retried call repeats the same token.
const LaunchAttemptAnnotation = "karpless.dev/launch-attempt"

// maxFleetCallsPerLaunch bounds the CreateFleet calls that launched
// nothing for one claim in one pass; later ticks continue from the recorded
// attempt. EC2 answers capacity errors at once, and one call names at most
// instance.MaxInstanceTypes types, so a zone-wide spot outage of a claim
// that allows a few hundred offerings takes several calls before on-demand
// is tried: Karpenter gets there within seconds (it deletes the claim and
// provisions again without the marked offerings), and a tick a minute
// apart must not take minutes.
const maxFleetCallsPerLaunch = 12

// maxTemplateWaits bounds the consecutive waits for EC2 to list a launch
// template it has just created (timing.LaunchTemplateWait each).
const maxTemplateWaits = 5

var nodeClaimGVK = karpv1.SchemeGroupVersion.WithKind("NodeClaim")

// Launch starts the claim's instance, or adopts one a previous tick started.
// It returns the updated claim, or nil when the claim cannot launch now (its
// node class is not ready, or an earlier launch is still to be seen) or was
// retired for lack of capacity.
//
// Each CreateFleet uses the ClientToken of the claim's current attempt. The
// attempt advances (and is written on the claim before the next call) after
// every answer that launched nothing, since EC2 replays that answer to any
// retry with the same token; it does not advance when no answer came (the
// call may have been applied, and the same token then returns its result).
//
// Each failed call to EC2 (and each launch that ends before CreateFleet,
// as Karpenter's Create does) counts in karpenter_cloudprovider_errors_total
// as method Create (errors.go).
func (c *Cloud) Launch(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	failed := Errors{Metrics: c.Metrics, Controller: ControllerLifecycle}
	existing, err := c.Instances.ForNodeClaim(ctx, nc.Name)
	if err != nil {
		return nil, failed.Count(MethodCreate, err)
	}
	if len(existing) > 0 {
		// A tick died between CreateFleet and recording its result.
		keep := existing[0]
		if len(existing) > 1 {
			// One in a zonally shifted zone is left to garbage
			// collection, after the shift.
			if err := c.Instances.Delete(ctx, c.Metrics, existing[1:]...); err != nil && !instance.OnlyZonallyShifted(err) {
				return nil, failed.Count(MethodCreate, err)
			}
		}
		c.Log.Info("adopting instance launched by an earlier tick", "nodeclaim", nc.Name, "instance", keep.ID)
		return c.record(ctx, nc, &keep)
	}
	if nc.Spec.NodeClassRef == nil {
		return nil, errors.New("nodeclaim has no nodeClassRef")
	}
	view := c.views[nc.Spec.NodeClassRef.Name]
	if view != nil {
		view = view.forPool(nc.Labels[wellknown.NodePoolLabel])
	}
	if view == nil {
		// Karpenter's Create takes a missing class for a lack of capacity.
		failed.Count(MethodCreate, errNoOffering)
		c.Events.Warning(record.ObjectOf(nodeClaimGVK, nc), "NodeClassNotReady", "EC2NodeClass %s not found", nc.Spec.NodeClassRef.Name)
		return nil, nil
	}
	if !nodeclass.IsReady(view.nc) {
		failed.Count(MethodCreate, errNodeClassNotReady)
		c.Events.Warning(record.ObjectOf(nodeClaimGVK, nc), "NodeClassNotReady", "EC2NodeClass %s is not ready", view.nc.Name)
		return nil, nil
	}
	attempt, _ := strconv.Atoi(nc.Annotations[LaunchAttemptAnnotation])
	calls, waits := 0, 0
	for calls < maxFleetCallsPerLaunch {
		capacityType, offerings, types, reservation := c.offerings(nc, view, calls == 0)
		if len(offerings) == 0 {
			failed.Count(MethodCreate, errNoOffering)
			return nil, c.retire(ctx, nc, "no offering of its instance types is available (all marked unavailable or filtered out)")
		}
		info, err := c.Cluster(ctx)
		if err != nil {
			return nil, failed.Count(MethodCreate, err)
		}
		templates, err := c.Templates.Ensure(ctx, TemplateRequest{
			NodeClass: view.nc, NodeClaim: nc, InstanceTypes: types, CapacityType: capacityType, Cluster: info,
			Seen: &c.templates, CapacityReservationID: reservation.ReservationID, CapacityReservationType: reservation.ReservationType,
		})
		if err != nil {
			return nil, failed.Count(MethodCreate, fmt.Errorf("ensuring launch templates: %w", err))
		}
		if err := c.guard.Check(ctx, "launching"); err != nil {
			return nil, err
		}
		res, err := c.Instances.Create(ctx, instance.Request{
			NodeClaimName: nc.Name, NodeClaimUID: string(nc.UID), Attempt: attempt,
			CapacityType: capacityType, Offerings: offerings, LaunchTemplates: templates,
			Subnets: launchSubnets(c.ice, view.nc), Tags: c.instanceTags(nc, view.nc),
			Tenancy:       instancetype.Tenancy(nc.Spec.Requirements),
			Context:       fleetContext(view.nc, nc),
			ReservationID: reservation.ReservationID, ReservationType: reservation.ReservationType,
			Prioritized: nc.Annotations[wellknown.PriceOverlayAppliedAnnotation] == "true",
		})
		if !errors.Is(err, instance.ErrAlreadyRequested) {
			// An earlier call with this token was applied: not a failure.
			failed.Count(MethodCreate, err)
		}
		c.fleetErrors(nc, view.nc, capacityType, reservation.ReservationID, res.Errors)
		if awserr.Code(err) != "InvalidLaunchTemplateName.NotFoundException" {
			waits = 0 // EC2 listed this call's templates; the next may need new ones
		}
		switch {
		case err == nil:
			c.launched.Add(1)
			if capacityType == wellknown.CapacityTypeReserved {
				c.markLaunched(reservation.ReservationID)
				if res.Instance.CapacityReservationID == "" {
					// EC2 does not list the instance yet: it went where the
					// fleet was told to.
					res.Instance.CapacityType = wellknown.CapacityTypeReserved
					res.Instance.CapacityReservationID, res.Instance.CapacityReservationType = reservation.ReservationID, reservation.ReservationType
				}
			}
			return c.record(ctx, nc, res.Instance)
		case errors.Is(err, instance.ErrAlreadyRequested):
			// ForNodeClaim above listed no instance of the claim.
			spent, err := c.tokenSpent(ctx, nc, attempt)
			if err != nil || !spent {
				return nil, err
			}
			attempt++
			if err := c.setAttempt(ctx, nc, attempt); err != nil {
				return nil, err
			}
			calls++
			continue
		case awserr.Code(err) == "InvalidLaunchTemplateName.NotFoundException":
			// EC2 does not list a template it has just created yet, or
			// garbage collection removed one Ensure had just found: wait a
			// moment and ensure again (a top-level 400 records nothing for
			// this token, so the attempt stays).
			for _, t := range templates {
				c.templates.Forget(t.Name)
			}
			if waits++; waits > maxTemplateWaits {
				return nil, fmt.Errorf("EC2 did not list the launch templates after %d waits: %w", maxTemplateWaits, err)
			}
			c.Log.Info("launch template not found; ensuring it again", "nodeclaim", nc.Name, "wait", waits)
			if err := tick.Sleep(ctx, c.Clock, timing.LaunchTemplateWait); err != nil {
				return nil, err
			}
			continue
		case errors.Is(err, instance.ErrNothingLaunched):
			calls++
			attempt++
			if err := c.setAttempt(ctx, nc, attempt); err != nil {
				return nil, err
			}
			if errors.Is(err, instance.ErrNoCapacity) {
				c.Log.Info("no capacity for the offerings tried; retrying with the rest", "nodeclaim", nc.Name, "attempt", attempt, "capacity_type", capacityType, "offerings_tried", len(res.Errors), "codes", fleetCodes(res.Errors))
				continue
			}
			// Not a capacity error (an instance profile IAM does not know
			// yet, an AMI not found...): the same offerings would fail again
			// now, so the next pass tries with the next token.
			return nil, err
		default:
			// No answer: the call may have been applied; the next try keeps
			// this token so EC2 returns what it did.
			return nil, err
		}
	}
	return nil, nil
}

// fleetCodes counts EC2's per-override error codes, for the log.
func fleetCodes(errs []instance.FleetError) map[string]int {
	out := map[string]int{}
	for _, e := range errs {
		out[e.Code]++
	}
	return out
}

// maxParallelLaunches bounds the CreateFleet calls one pass has in flight:
// launching a burst of claims one after the other would make the pass long
// (each call takes about a second on EC2), and Karpenter launches in
// parallel too.
const maxParallelLaunches = 8

// LaunchAll launches claims in parallel, at most maxParallelLaunches at a
// time, and returns what failed.
func (c *Cloud) LaunchAll(ctx context.Context, claims []*karpv1.NodeClaim) error {
	errs := make([]error, len(claims))
	sem := make(chan struct{}, maxParallelLaunches)
	var wg sync.WaitGroup
	for i, claim := range claims {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if _, err := c.Launch(ctx, claim); err != nil {
				errs[i] = fmt.Errorf("nodeclaim %s: %w", claim.Name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// LaunchFailuresMetric is Karpenter's
// karpenter_cloudprovider_instance_launch_failures_total: one for each error
// a CreateFleet answer holds (one per offering it could not fill, so one
// call may count several, in several zones), whatever the error and
// whether or not the call launched an instance, as Karpenter counts them.
// Its labels are Karpenter's: zone, zone_id (the zone's ID, read from the
// class's subnets since CreateFleet's errors do not carry it; empty for a
// zone the class has no subnet in), capacity_type and reason
// (awserr.LaunchFailureReason).
const LaunchFailuresMetric = "karpenter_cloudprovider_instance_launch_failures_total"

// fleetErrors records what the errors of a CreateFleet answer say: each
// counts in LaunchFailuresMetric; then subnets out of addresses, full
// reservations (a reserved launch) or unavailable offerings (the others).
func (c *Cloud) fleetErrors(nc *karpv1.NodeClaim, class *awsv1.EC2NodeClass, capacityType, reservationID string, errs []instance.FleetError) {
	zoneIDs := map[string]string{}
	for _, s := range class.Status.Subnets {
		if s.ZoneID != "" {
			zoneIDs[s.Zone] = s.ZoneID
		}
	}
	for _, e := range errs {
		c.Metrics.Count(LaunchFailuresMetric, 1, map[string]string{
			"zone": e.Zone, "zone_id": zoneIDs[e.Zone], "capacity_type": capacityType, "reason": awserr.LaunchFailureReason(e.Code, e.Message),
		})
	}
	c.markSubnets(errs)
	if capacityType == wellknown.CapacityTypeReserved {
		c.markReservationsFull(reservationID, errs)
	} else {
		c.markUnavailable(nc, capacityType, errs)
	}
}

// markUnavailable records the capacity errors of a fleet answer.
func (c *Cloud) markUnavailable(nc *karpv1.NodeClaim, capacityType string, errs []instance.FleetError) {
	slr := false
	for _, e := range errs {
		switch {
		case capacityType == wellknown.CapacityTypeSpot && awserr.IsSpotServiceLinkedRoleMissing(e.Code):
			slr = true
		case e.InstanceType != "" && e.Zone != "" && awserr.IsCapacityCode(e.Code):
			c.ice.Mark(capacityType, e.InstanceType, e.Zone, e.Code)
		}
	}
	if slr {
		// No spot launch can succeed until someone creates the role: take
		// spot out everywhere so on-demand is tried at once (as Karpenter).
		c.ice.MarkCapacityType(wellknown.CapacityTypeSpot, awserr.SpotServiceLinkedRoleMissing)
		c.Events.Warning(record.ObjectOf(nodeClaimGVK, nc), "SpotServiceLinkedRoleCreationFailure",
			"Attempted to launch a spot instance but failed due to %q", awserr.SpotServiceLinkedRoleMissing)
	}
}

// LaunchUnresolvedAnnotation records when a launch first met a ClientToken
// EC2 had already used (IdempotentParameterMismatch) without an instance of
// the claim to show for it: "<attempt>/<RFC 3339 time>".
const LaunchUnresolvedAnnotation = "karpless.dev/launch-token-unresolved"

// tokenSpent decides, after EC2 said this attempt's token was already used
// and no instance of the claim is listed, whether that earlier call
// launched nothing (spent: launch with the next token) or its instance is
// not listed yet (wait). EC2 answers DescribeFleets for instant fleets only
// by fleet id, which a lost answer never told us, so the evidence is the
// claim's tag: an instance is never launched a second time on a guess,
// only once none has shown up for timing.TokenPatience.
func (c *Cloud) tokenSpent(ctx context.Context, nc *karpv1.NodeClaim, attempt int) (bool, error) {
	since, ok := unresolvedSince(nc, attempt)
	if !ok {
		v := fmt.Sprintf("%d/%s", attempt, c.Clock.Now().UTC().Format(time.RFC3339))
		if err := c.Kube.AnnotateNodeClaim(ctx, nc, map[string]*string{LaunchUnresolvedAnnotation: &v}); err != nil {
			return false, fmt.Errorf("recording an unresolved launch: %w", err)
		}
		c.Log.Info("EC2 has used this launch token; waiting for its instance to be listed", "nodeclaim", nc.Name, "attempt", attempt)
		return false, nil
	}
	if c.Clock.Since(since) < timing.TokenPatience {
		return false, nil
	}
	c.Log.Warn("no instance of an earlier launch appeared; trying the next token", "nodeclaim", nc.Name, "attempt", attempt, "since", since)
	return true, nil
}

func unresolvedSince(nc *karpv1.NodeClaim, attempt int) (time.Time, bool) {
	a, t, ok := strings.Cut(nc.Annotations[LaunchUnresolvedAnnotation], "/")
	if !ok || a != strconv.Itoa(attempt) {
		return time.Time{}, false
	}
	since, err := time.Parse(time.RFC3339, t)
	return since, err == nil
}

// offerings picks the capacity type and the offerings to request, by
// scheduling.LaunchOrder (the rules the simulator's price prediction uses
// too), over the claim's types and the offerings its requirements allow
// and the unavailable offerings do not rule out.
//
// A reserved launch goes into one reservation per call, the one of its
// cheapest offering, which it returns (zero otherwise).
//
// On an invocation's first call for a claim pinned to a reservation
// (tokenRetry), the reservation's offerings are kept though marked
// unavailable: an earlier invocation, killed before recording it, may
// have launched the claim's instance there (which is what fills it), and
// the call with the claim's token gets that instance back; if the token
// was not used, EC2 answers that the reservation is full, and the next
// call honours the mark.
func (c *Cloud) offerings(nc *karpv1.NodeClaim, view *classView, tokenRetry bool) (string, []instance.Offering, []*scheduling.InstanceType, scheduling.Offering) {
	reqs := scheduling.RequirementsFromNodePool(nc.Spec.Requirements)
	allowedType := reqs.Get(wellknown.InstanceTypeLabel)
	zones, cts := reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel)
	resReq := claimReservationReq(nc)
	// Reserved offerings are marked by themselves only (Karpenter builds
	// them apart); spot and on-demand also by their zone's subnets.
	marked := unavailableIn(c.ice, view.nc)
	var candidates []*scheduling.InstanceType
	for _, it := range view.types {
		if !allowedType.Matches(it.Name, true) {
			continue
		}
		var offs []scheduling.Offering
		for _, o := range it.Offerings {
			reserved := o.CapacityType == wellknown.CapacityTypeReserved
			retried := tokenRetry && reserved && pinnedTo(resReq, o.ReservationID)
			unavailable := (reserved && !retried && c.ice.Unavailable(o.CapacityType, it.Name, o.Zone)) || (!reserved && marked(o.CapacityType, it.Name, o.Zone))
			if (o.Available || c.pinnedReservation(view, o, resReq)) && zones.Matches(o.Zone, true) && cts.Matches(o.CapacityType, true) &&
				!unavailable && c.reservedOffering(o, resReq) {
				offs = append(offs, o)
			}
		}
		if len(offs) > 0 {
			cp := *it
			cp.Offerings = offs
			candidates = append(candidates, &cp)
		}
	}
	// As Karpenter's Create (its truncation's minValues check): offerings
	// left too few to meet a minValues (marked unavailable since the
	// claim was made, or a claim no simulation would make) launch
	// nothing, and the claim is retired for lack of capacity.
	for _, r := range nc.Spec.Requirements {
		if r.MinValues != nil && scheduling.MinValuesCount(candidates, r.Key, zones, cts) < *r.MinValues {
			return "", nil, nil, scheduling.Offering{}
		}
	}
	minValues := slices.ContainsFunc(nc.Spec.Requirements, func(r karpv1.NodeSelectorRequirementWithMinValues) bool { return r.MinValues != nil })
	requested := nc.Spec.Resources.Requests[corev1.ResourceCPU]
	ct, order := scheduling.LaunchOrder(candidates, func(*scheduling.Offering) bool { return true }, minValues, requested.MilliValue())
	var reservation scheduling.Offering
	if ct == wellknown.CapacityTypeReserved && len(order) > 0 {
		order, reservation = oneReservation(order)
	}
	var types []*scheduling.InstanceType
	seen := map[string]bool{}
	offs := make([]instance.Offering, 0, len(order))
	for _, o := range order {
		if !seen[o.Type.Name] {
			seen[o.Type.Name] = true
			types = append(types, o.Type)
		}
		offs = append(offs, instance.Offering{InstanceType: o.Type.Name, Zone: o.Offering.Zone, Price: o.Offering.Price})
	}
	return ct, offs, types, reservation
}

// fleetContext is the class's CreateFleet Context, left out for a claim
// annotated karpenter.sh/nodeclaim-min-values-relaxed=true, as Karpenter's
// launchInstance leaves it out.
func fleetContext(class *awsv1.EC2NodeClass, nc *karpv1.NodeClaim) string {
	if nc.Annotations[wellknown.NodeClaimMinValuesRelaxedAnnotation] == "true" {
		return ""
	}
	return deref(class.Spec.Context)
}

func subnetsByZone(nc *awsv1.EC2NodeClass) map[string][]string {
	out := map[string][]string{}
	for _, s := range nc.Status.Subnets {
		out[s.Zone] = append(out[s.Zone], s.ID)
	}
	return out
}

// instanceTags are the tags every resource of the launch carries: the
// class's tags with Karpenter's static keys on top (they win), and the
// claim's name so the instance can be found if this tick dies.
func (c *Cloud) instanceTags(nc *karpv1.NodeClaim, class *awsv1.EC2NodeClass) map[string]string {
	tags := maps.Clone(class.Spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[wellknown.ClusterTagKey(c.ClusterName)] = wellknown.OwnedTagValue
	tags[wellknown.NodePoolTagKey] = nc.Labels[wellknown.NodePoolLabel]
	tags[wellknown.EKSClusterNameTagKey] = c.ClusterName
	tags[wellknown.EC2NodeClassTagKey] = class.Name
	tags[wellknown.NodeClaimTagKey] = nc.Name
	return tags
}

func (c *Cloud) setAttempt(ctx context.Context, nc *karpv1.NodeClaim, attempt int) error {
	if err := c.Kube.AnnotateNodeClaim(ctx, nc, map[string]*string{LaunchAttemptAnnotation: new(strconv.Itoa(attempt))}); err != nil {
		return fmt.Errorf("recording the launch attempt: %w", err)
	}
	return nil
}

// retire deletes a claim that cannot launch; its pods become pending again
// and the next simulation picks other offerings (the cache remembers why).
func (c *Cloud) retire(ctx context.Context, nc *karpv1.NodeClaim, why string) error {
	c.Events.Warning(record.ObjectOf(nodeClaimGVK, nc), "InsufficientCapacityError", "NodeClaim %s cannot launch: %s", nc.Name, why)
	c.Log.Warn("retiring nodeclaim that cannot launch", "nodeclaim", nc.Name, "reason", why)
	return c.Kube.DeleteNodeClaim(ctx, nc)
}

// record writes what was launched onto the claim: the instance's labels
// (type, zone, capacity type, tenancy and every single-valued instance-type
// label), then status (provider ID, image, capacity, allocatable, Launched).
func (c *Cloud) record(ctx context.Context, nc *karpv1.NodeClaim, inst *instance.Instance) (*karpv1.NodeClaim, error) {
	labels := map[string]string{
		wellknown.InstanceTypeLabel: inst.Type,
		wellknown.ZoneLabel:         inst.Zone,
		wellknown.CapacityTypeLabel: inst.CapacityType,
		// As Karpenter's instance labels: what EC2 says, else what the
		// launch asked for.
		wellknown.InstanceTenancyLabel: inst.Tenancy,
	}
	if inst.Tenancy == "" {
		labels[wellknown.InstanceTenancyLabel] = instancetype.Tenancy(nc.Spec.Requirements)
	}
	var it *scheduling.InstanceType
	if nc.Spec.NodeClassRef != nil {
		if view := c.views[nc.Spec.NodeClassRef.Name]; view != nil {
			for _, t := range view.forPool(nc.Labels[wellknown.NodePoolLabel]).types {
				if t.Name == inst.Type {
					it = t
				}
			}
			for _, s := range view.nc.Status.Subnets {
				if s.Zone == inst.Zone && s.ZoneID != "" {
					labels[wellknown.TopologyZoneIDLabel] = s.ZoneID
				}
			}
			// Launched through the class's template, so into its group.
			maps.Copy(labels, placementLabels(nc, view.nc))
		}
	}
	maps.Copy(labels, reservationLabels(inst, c.views[classOf(nc)]))
	if it != nil {
		for k, v := range it.Labels {
			if _, set := labels[k]; !set && !strings.HasPrefix(k, wellknown.KarpenterDomain+"/") {
				labels[k] = v
			}
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if _, err := c.Kube.NodeClaims.Patch(ctx, nc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("labelling launched nodeclaim %s: %w", nc.Name, err)
	}
	now := metav1.NewTime(c.Clock.Now())
	err := c.Kube.UpdateNodeClaimStatus(ctx, nc, func(claim *karpv1.NodeClaim) {
		claim.Status.ProviderID = inst.ProviderID()
		claim.Status.ImageID = inst.ImageID
		if it != nil {
			claim.Status.Capacity, claim.Status.Allocatable = launchedResources(nc, c.NodeClass(classOf(nc)), it)
		}
		claim.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", now)
	})
	if err != nil {
		return nil, err
	}
	c.Log.Info("launched nodeclaim", "nodeclaim", nc.Name, "instance", inst.ID, "instance_type", inst.Type, "zone", inst.Zone, "capacity_type", inst.CapacityType)
	return c.Kube.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
}

// launchedResources are the capacity and allocatable a launched claim
// advertises: its type's, without EFA devices unless the launch attached
// them (the claim requests vpc.amazonaws.com/efa, or the class lists its
// network interfaces, whose EFA ones the type's count already is), as
// Karpenter's EFACount: an instance launched with plain ENIs has none, and
// a pod that needs one must not wait for this node.
func launchedResources(nc *karpv1.NodeClaim, class *awsv1.EC2NodeClass, it *scheduling.InstanceType) (capacity, allocatable corev1.ResourceList) {
	capacity, allocatable = it.Capacity.DeepCopy(), it.Allocatable.DeepCopy()
	_, requested := nc.Spec.Resources.Requests[wellknown.ResourceEFA]
	if !requested && (class == nil || len(class.Spec.NetworkInterfaces) == 0) {
		delete(capacity, wellknown.ResourceEFA)
		delete(allocatable, wellknown.ResourceEFA)
	}
	return capacity, allocatable
}

func classOf(nc *karpv1.NodeClaim) string {
	if nc.Spec.NodeClassRef == nil {
		return ""
	}
	return nc.Spec.NodeClassRef.Name
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
