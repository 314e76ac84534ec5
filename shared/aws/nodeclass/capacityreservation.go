package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/core/timing"
)

// CapacityReservationAPI is the EC2 call capacity reservations need.
type CapacityReservationAPI interface {
	DescribeCapacityReservations(ctx context.Context, params *ec2.DescribeCapacityReservationsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
}

// CapacityBlockExpiringWindow is how long before a Capacity Block's end
// Karpenter v1.14.1 calls it expiring (timing.CapacityBlockExpiring).
const CapacityBlockExpiringWindow = timing.CapacityBlockExpiring

// Capacity reservation states and types, as the status spells them.
const (
	ReservationStateActive       = "active"
	ReservationStateExpiring     = "expiring"
	ReservationTypeDefault       = "default"
	ReservationTypeCapacityBlock = "capacity-block"
)

// describeReservationsPageSize is Karpenter's MaxResults for selector
// queries (EC2's maximum).
const describeReservationsPageSize = 1000

// CapacityReservationInputs are the DescribeCapacityReservations requests
// for selector terms, as Karpenter v1.14.1 builds its queries: one by id
// for each term with an id (MaxResults cannot go with ids), one by owner,
// tags (a "*" value matches the key with any value) and match criteria for
// each term with tags or match criteria; every one asks for active
// reservations only.
func CapacityReservationInputs(terms []awsv1.CapacityReservationSelectorTerm) []*ec2.DescribeCapacityReservationsInput {
	var out []*ec2.DescribeCapacityReservationsInput
	for _, t := range terms {
		active := ec2types.Filter{Name: aws.String("state"), Values: []string{string(ec2types.CapacityReservationStateActive)}}
		if t.ID != "" {
			out = append(out, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{t.ID}, Filters: []ec2types.Filter{active}})
		}
		if len(t.Tags) == 0 && t.InstanceMatchCriteria == "" {
			continue
		}
		filters := []ec2types.Filter{active}
		if t.OwnerID != "" {
			filters = append(filters, ec2types.Filter{Name: aws.String("owner-id"), Values: []string{t.OwnerID}})
		}
		keys := make([]string, 0, len(t.Tags))
		for k := range t.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if v := t.Tags[k]; v == "*" {
				filters = append(filters, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
			} else {
				filters = append(filters, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
			}
		}
		if t.InstanceMatchCriteria != "" {
			filters = append(filters, ec2types.Filter{Name: aws.String("instance-match-criteria"), Values: []string{t.InstanceMatchCriteria}})
		}
		out = append(out, &ec2.DescribeCapacityReservationsInput{Filters: filters, MaxResults: aws.Int32(describeReservationsPageSize)})
	}
	return out
}

// Reservation is what EC2 says of one capacity reservation: its status
// entry and how many instances it can still take.
type Reservation struct {
	Status    awsv1.CapacityReservation
	Available int
}

// DescribeReservations runs the queries and returns the active, unexpired
// reservations they match, each once, by id. A query naming an id EC2 does
// not have matches nothing (the reservation was cancelled or has not
// reached this reader yet), as in Karpenter.
func DescribeReservations(ctx context.Context, api CapacityReservationAPI, now time.Time, inputs []*ec2.DescribeCapacityReservationsInput) ([]Reservation, error) {
	return describeReservations(ctx, api, now, inputs, true)
}

func describeReservations(ctx context.Context, api CapacityReservationAPI, now time.Time, inputs []*ec2.DescribeCapacityReservationsInput, tolerateUnknown bool) ([]Reservation, error) {
	byID := map[string]Reservation{}
	var skipped []error
	for _, in := range inputs {
		p := ec2.NewDescribeCapacityReservationsPaginator(api, in)
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				if tolerateUnknown && awserr.Code(err) == "InvalidCapacityReservationId.NotFound" {
					break
				}
				return nil, fmt.Errorf("describing capacity reservations: %w", err)
			}
			for _, cr := range page.CapacityReservations {
				if cr.EndDate != nil && !cr.EndDate.After(now) {
					continue
				}
				st, err := reservationStatus(cr, now)
				if err != nil {
					skipped = append(skipped, err)
					continue
				}
				byID[st.ID] = Reservation{Status: st, Available: int(aws.ToInt32(cr.AvailableInstanceCount))}
			}
		}
	}
	out := make([]Reservation, 0, len(byID))
	for _, r := range byID {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Status.ID < out[j].Status.ID })
	if len(skipped) > 0 {
		return out, &SkippedReservationsError{Errs: skipped}
	}
	return out, nil
}

// SkippedReservationsError lists reservations EC2 returned that Karpless
// (as Karpenter) does not know how to use; the others were resolved.
type SkippedReservationsError struct{ Errs []error }

func (e *SkippedReservationsError) Error() string {
	return fmt.Sprintf("skipped %d capacity reservations: %v", len(e.Errs), errors.Join(e.Errs...))
}

// reservationStatus is Karpenter's CapacityReservationFromEC2: a match
// criteria or type it does not know is refused (a future kind must not be
// launched into as if it were a known one); a Capacity Block within
// CapacityBlockExpiringWindow of its end is expiring.
func reservationStatus(cr ec2types.CapacityReservation, now time.Time) (awsv1.CapacityReservation, error) {
	id := aws.ToString(cr.CapacityReservationId)
	if cr.InstanceMatchCriteria != ec2types.InstanceMatchCriteriaOpen && cr.InstanceMatchCriteria != ec2types.InstanceMatchCriteriaTargeted {
		return awsv1.CapacityReservation{}, fmt.Errorf("capacity reservation %s: unsupported instance match criteria %q", id, cr.InstanceMatchCriteria)
	}
	typ := string(cr.ReservationType)
	switch typ {
	case "":
		typ = ReservationTypeDefault
	case ReservationTypeDefault, ReservationTypeCapacityBlock:
	default:
		return awsv1.CapacityReservation{}, fmt.Errorf("capacity reservation %s: unsupported reservation type %q", id, typ)
	}
	st := awsv1.CapacityReservation{
		AvailabilityZone: aws.ToString(cr.AvailabilityZone), ID: id, InstanceMatchCriteria: string(cr.InstanceMatchCriteria),
		InstanceType: aws.ToString(cr.InstanceType), OwnerID: aws.ToString(cr.OwnerId), ReservationType: typ,
		Interruptible: aws.ToBool(cr.Interruptible), State: ReservationStateActive,
	}
	if cr.EndDate != nil {
		end := metav1.NewTime(cr.EndDate.UTC())
		st.EndTime = &end
		if typ == ReservationTypeCapacityBlock && !now.Before(cr.EndDate.Add(-CapacityBlockExpiringWindow)) {
			st.State = ReservationStateExpiring
		}
	}
	return st, nil
}

// capacityReservations resolves capacityReservationSelectorTerms into the
// status, sorted by id. The condition is true whatever is found, as in
// Karpenter (no reservation just means no reserved offerings); EC2's
// failures keep the previous value.
func (r *Resolver) capacityReservations(ctx context.Context, nc *awsv1.EC2NodeClass, now time.Time) ([]awsv1.CapacityReservation, outcome) {
	terms := nc.Spec.CapacityReservationSelectorTerms
	if len(terms) == 0 {
		return nil, ready()
	}
	found, err := DescribeReservations(ctx, r.EC2, now, CapacityReservationInputs(terms))
	var skipped *SkippedReservationsError
	if err != nil && !errors.As(err, &skipped) {
		return nil, failed("describing capacity reservations", err)
	}
	// Skipped kinds (a match criteria or type Karpenter does not know) are
	// left out, as Karpenter logs and leaves them.
	out := make([]awsv1.CapacityReservation, 0, len(found))
	for _, f := range found {
		out = append(out, f.Status)
	}
	if len(out) == 0 {
		return nil, ready()
	}
	return out, ready()
}

// ReservationIDs are the ids of the reservations a set of classes resolved,
// sorted and each once.
func ReservationIDs(ncs []*awsv1.EC2NodeClass) []string {
	seen := map[string]bool{}
	var ids []string
	for _, nc := range ncs {
		if nc == nil {
			continue
		}
		for _, cr := range nc.Status.CapacityReservations {
			if !seen[cr.ID] {
				seen[cr.ID] = true
				ids = append(ids, cr.ID)
			}
		}
	}
	sort.Strings(ids)
	return ids
}

// ReservationAvailability asks EC2 how many more instances each reservation
// can take now, by id, in one call (EC2 fails such a call for any id it
// does not know; then it asks once per id).
// A reservation EC2 does not report (unknown, expired, not active) is
// absent: it has no capacity.
func ReservationAvailability(ctx context.Context, api CapacityReservationAPI, now time.Time, ids []string) (map[string]int, error) {
	out := map[string]int{}
	if len(ids) == 0 || api == nil {
		return out, nil
	}
	active := ec2types.Filter{Name: aws.String("state"), Values: []string{string(ec2types.CapacityReservationStateActive)}}
	inputs := []*ec2.DescribeCapacityReservationsInput{{CapacityReservationIds: ids, Filters: []ec2types.Filter{active}}}
	found, err := describeReservations(ctx, api, now, inputs, false)
	if awserr.Code(err) == "InvalidCapacityReservationId.NotFound" {
		inputs = inputs[:0]
		for _, id := range ids {
			inputs = append(inputs, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}, Filters: []ec2types.Filter{active}})
		}
		found, err = DescribeReservations(ctx, api, now, inputs)
	}
	var skipped *SkippedReservationsError
	if err != nil && !errors.As(err, &skipped) {
		return nil, err
	}
	for _, f := range found {
		out[f.Status.ID] = f.Available
	}
	return out, nil
}
