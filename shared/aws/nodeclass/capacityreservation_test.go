package nodeclass

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
)

const crOwner, crOther = "012345678901", "999999999999"

func cr(id, itype, zone string, mc ec2types.InstanceMatchCriteria, typ ec2types.CapacityReservationType, state ec2types.CapacityReservationState, end *time.Time, avail int32, tags map[string]string) ec2types.CapacityReservation {
	r := ec2types.CapacityReservation{
		CapacityReservationId: aws.String(id), InstanceType: aws.String(itype), AvailabilityZone: aws.String(zone),
		InstanceMatchCriteria: mc, ReservationType: typ, State: state, EndDate: end, OwnerId: aws.String(crOwner),
		AvailableInstanceCount: aws.Int32(avail), TotalInstanceCount: aws.Int32(avail),
	}
	if tags["owner"] != "" {
		r.OwnerId = aws.String(tags["owner"])
	}
	for k, v := range tags {
		r.Tags = append(r.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return r
}

// TestResolveCapacityReservations ports Karpenter v1.14.1's nodeclass
// capacity reservation suite: by id, by tags (and owner), by match
// criteria (with tags, with owner), expired and non-active reservations
// left out, Capacity Blocks found and expiring 40 minutes before their end
// (default reservations never expiring), interruptible kept, and the
// condition true whatever is found.
func TestResolveCapacityReservations(t *testing.T) {
	soon := testNow.Add(30 * time.Minute)
	later := testNow.Add(2 * time.Hour)
	past := testNow.Add(-time.Minute)
	crs := []ec2types.CapacityReservation{
		cr("cr-0a1", "m5.large", "eu-west-1a", ec2types.InstanceMatchCriteriaTargeted, "", ec2types.CapacityReservationStateActive, nil, 2, map[string]string{"team": "ml"}),
		cr("cr-0b2", "c6i.large", "eu-west-1b", ec2types.InstanceMatchCriteriaOpen, ec2types.CapacityReservationTypeDefault, ec2types.CapacityReservationStateActive, nil, 5, map[string]string{"team": "ml", "owner": crOther}),
		cr("cr-0c3", "p5.48xlarge", "eu-west-1a", ec2types.InstanceMatchCriteriaTargeted, ec2types.CapacityReservationTypeCapacityBlock, ec2types.CapacityReservationStateActive, &later, 1, map[string]string{"team": "gpu"}),
		cr("cr-0d4", "p5.48xlarge", "eu-west-1b", ec2types.InstanceMatchCriteriaTargeted, ec2types.CapacityReservationTypeCapacityBlock, ec2types.CapacityReservationStateActive, &soon, 1, map[string]string{"team": "gpu"}),
		cr("cr-0e5", "m5.large", "eu-west-1a", ec2types.InstanceMatchCriteriaOpen, ec2types.CapacityReservationTypeDefault, ec2types.CapacityReservationStateActive, &soon, 1, map[string]string{"team": "soon"}),
		cr("cr-0f6", "m5.large", "eu-west-1a", ec2types.InstanceMatchCriteriaOpen, "", ec2types.CapacityReservationStateActive, &past, 1, map[string]string{"team": "gone"}),
		cr("cr-0a7", "m5.large", "eu-west-1a", ec2types.InstanceMatchCriteriaOpen, "", ec2types.CapacityReservationStateCancelled, nil, 1, map[string]string{"team": "gone"}),
		cr("cr-0b8", "m5.large", "eu-west-1a", ec2types.InstanceMatchCriteria("future"), "", ec2types.CapacityReservationStateActive, nil, 1, map[string]string{"team": "odd"}),
	}
	crs[1].Interruptible = aws.Bool(true)
	endOf := func(t time.Time) *metav1.Time { m := metav1.NewTime(t.UTC()); return &m }
	want := map[string]awsv1.CapacityReservation{
		"cr-0a1": {ID: "cr-0a1", InstanceType: "m5.large", AvailabilityZone: "eu-west-1a", InstanceMatchCriteria: "targeted", OwnerID: crOwner, ReservationType: "default", State: "active"},
		"cr-0b2": {ID: "cr-0b2", InstanceType: "c6i.large", AvailabilityZone: "eu-west-1b", InstanceMatchCriteria: "open", OwnerID: crOther, ReservationType: "default", State: "active", Interruptible: true},
		"cr-0c3": {ID: "cr-0c3", InstanceType: "p5.48xlarge", AvailabilityZone: "eu-west-1a", InstanceMatchCriteria: "targeted", OwnerID: crOwner, ReservationType: "capacity-block", State: "active", EndTime: endOf(later)},
		"cr-0d4": {ID: "cr-0d4", InstanceType: "p5.48xlarge", AvailabilityZone: "eu-west-1b", InstanceMatchCriteria: "targeted", OwnerID: crOwner, ReservationType: "capacity-block", State: "expiring", EndTime: endOf(soon)},
		"cr-0e5": {ID: "cr-0e5", InstanceType: "m5.large", AvailabilityZone: "eu-west-1a", InstanceMatchCriteria: "open", OwnerID: crOwner, ReservationType: "default", State: "active", EndTime: endOf(soon)},
	}
	pick := func(ids ...string) []awsv1.CapacityReservation {
		var out []awsv1.CapacityReservation
		for _, id := range ids {
			out = append(out, want[id])
		}
		return out
	}
	prev := pick("cr-0a1")
	for _, tc := range []struct {
		name    string
		terms   []awsv1.CapacityReservationSelectorTerm
		err     error
		want    []awsv1.CapacityReservation
		wantErr string
	}{
		{name: "no terms resolve nothing"},
		{name: "by id", terms: []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0a1"}, {ID: "cr-0c3"}}, want: pick("cr-0a1", "cr-0c3")},
		{name: "an unknown id matches nothing", terms: []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0ff"}}},
		{name: "by tags", terms: []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}}, want: pick("cr-0a1", "cr-0b2")},
		{name: "by tags and owner", terms: []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}, OwnerID: crOther}}, want: pick("cr-0b2")},
		{name: "by tag key wildcard", terms: []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "*"}}}, want: pick("cr-0a1", "cr-0b2", "cr-0c3", "cr-0d4", "cr-0e5")},
		{name: "by match criteria open", terms: []awsv1.CapacityReservationSelectorTerm{{InstanceMatchCriteria: "open"}}, want: pick("cr-0b2", "cr-0e5")},
		{name: "by match criteria targeted", terms: []awsv1.CapacityReservationSelectorTerm{{InstanceMatchCriteria: "targeted"}}, want: pick("cr-0a1", "cr-0c3", "cr-0d4")},
		{name: "by match criteria with tags", terms: []awsv1.CapacityReservationSelectorTerm{{InstanceMatchCriteria: "targeted", Tags: map[string]string{"team": "gpu"}}}, want: pick("cr-0c3", "cr-0d4")},
		{name: "by match criteria with tags and owner", terms: []awsv1.CapacityReservationSelectorTerm{{InstanceMatchCriteria: "open", Tags: map[string]string{"team": "ml"}, OwnerID: crOwner}}},
		{name: "expired, cancelled and unknown kinds are left out", terms: []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "gone"}}, {Tags: map[string]string{"team": "odd"}}}},
		{name: "terms are ORed, each reservation once", terms: []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0a1"}, {Tags: map[string]string{"team": "ml"}}}, want: pick("cr-0a1", "cr-0b2")},
		{name: "throttling keeps the previous reservations", terms: []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0a1"}}, err: apiErr("RequestLimitExceeded"), want: prev, wantErr: "describing capacity reservations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ec2, ssm, iam := world()
			ec2.crs = crs
			nc := defaultClass()
			nc.Spec.CapacityReservationSelectorTerms = tc.terms
			nc.Status.CapacityReservations = prev
			r := resolver(ec2, ssm, iam)
			if tc.err != nil {
				// Only the reservations' call fails: resolve the rest first.
				st, err := r.Resolve(context.Background(), nc, cluster)
				if err != nil {
					t.Fatal(err)
				}
				nc.Status = st
				nc.Status.CapacityReservations = prev
				ec2.err = tc.err
			}
			st, err := r.Resolve(context.Background(), nc, cluster)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if !reflect.DeepEqual(st.CapacityReservations, tc.want) {
				t.Errorf("capacityReservations =\n%+v\nwant\n%+v", st.CapacityReservations, tc.want)
			}
			if c := cond(st, awsv1.ConditionTypeCapacityReservationsReady); c.Status != metav1.ConditionTrue {
				t.Errorf("CapacityReservationsReady = %s %s %q", c.Status, c.Reason, c.Message)
			}
			if tc.err == nil {
				if c := cond(st, awsv1.ConditionTypeReady); c.Status != metav1.ConditionTrue {
					t.Errorf("Ready = %s %q", c.Status, c.Message)
				}
			}
		})
	}
}

// TestReservationAvailability: one query for every id (the fake pages one
// reservation at a time); an id EC2 does not know costs one query per id
// and leaves that reservation out.
func TestReservationAvailability(t *testing.T) {
	ec2, _, _ := world()
	ec2.crs = []ec2types.CapacityReservation{
		cr("cr-0a1", "m5.large", "eu-west-1a", ec2types.InstanceMatchCriteriaTargeted, "", ec2types.CapacityReservationStateActive, nil, 2, nil),
		cr("cr-0b2", "m5.large", "eu-west-1b", ec2types.InstanceMatchCriteriaTargeted, "", ec2types.CapacityReservationStateActive, nil, 0, nil),
	}
	got, err := ReservationAvailability(context.Background(), ec2, testNow, []string{"cr-0a1", "cr-0b2"})
	if err != nil || !reflect.DeepEqual(got, map[string]int{"cr-0a1": 2, "cr-0b2": 0}) || ec2.calls["DescribeCapacityReservations"] != 2 {
		t.Fatalf("availability %v, %v, %d calls", got, err, ec2.calls["DescribeCapacityReservations"])
	}
	got, err = ReservationAvailability(context.Background(), ec2, testNow, []string{"cr-0a1", "cr-0gone"})
	if err != nil || !reflect.DeepEqual(got, map[string]int{"cr-0a1": 2}) {
		t.Fatalf("with an unknown id: %v, %v", got, err)
	}
}
