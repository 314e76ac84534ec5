package nodeclass

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
)

func pg(id, name string, strategy ec2types.PlacementStrategy, state ec2types.PlacementGroupState, partitions int32) ec2types.PlacementGroup {
	g := ec2types.PlacementGroup{GroupId: aws.String(id), GroupName: aws.String(name), Strategy: strategy, State: state}
	if partitions > 0 {
		g.PartitionCount = aws.Int32(partitions)
	}
	if strategy == ec2types.PlacementStrategySpread {
		g.SpreadLevel = ec2types.SpreadLevelRack
	}
	return g
}

func TestResolvePlacementGroup(t *testing.T) {
	groups := []ec2types.PlacementGroup{
		pg("pg-0c1", "training", ec2types.PlacementStrategyCluster, ec2types.PlacementGroupStateAvailable, 0),
		pg("pg-0a2", "kafka", ec2types.PlacementStrategyPartition, ec2types.PlacementGroupStateAvailable, 3),
		pg("pg-0b3", "etcd", ec2types.PlacementStrategySpread, ec2types.PlacementGroupStateAvailable, 0),
		pg("pg-0d4", "going", ec2types.PlacementStrategyCluster, ec2types.PlacementGroupStateDeleting, 0),
	}
	prev := []awsv1.PlacementGroup{{ID: "pg-0old", Name: "old", Strategy: "cluster"}}
	for _, tc := range []struct {
		name     string
		sel      *awsv1.PlacementGroupSelector
		pgErr    error
		want     []awsv1.PlacementGroup
		status   metav1.ConditionStatus
		reason   string
		msg      string
		wantErr  string
		ready    bool
		describe int
	}{
		{name: "no selector resolves nothing and is ready", status: metav1.ConditionTrue, reason: ReasonReady, ready: true},
		{name: "by name", sel: &awsv1.PlacementGroupSelector{Name: aws.String("training")},
			want:   []awsv1.PlacementGroup{{ID: "pg-0c1", Name: "training", Strategy: "cluster"}},
			status: metav1.ConditionTrue, reason: ReasonReady, ready: true, describe: 1},
		{name: "by id, partition count kept", sel: &awsv1.PlacementGroupSelector{ID: aws.String("pg-0a2")},
			want:   []awsv1.PlacementGroup{{ID: "pg-0a2", Name: "kafka", Strategy: "partition", PartitionCount: 3}},
			status: metav1.ConditionTrue, reason: ReasonReady, ready: true, describe: 1},
		{name: "spread level kept", sel: &awsv1.PlacementGroupSelector{Name: aws.String("etcd")},
			want:   []awsv1.PlacementGroup{{ID: "pg-0b3", Name: "etcd", Strategy: "spread", SpreadLevel: "rack"}},
			status: metav1.ConditionTrue, reason: ReasonReady, ready: true, describe: 1},
		{name: "unknown name is not found", sel: &awsv1.PlacementGroupSelector{Name: aws.String("nope")},
			status: metav1.ConditionFalse, reason: ReasonPlacementGroupNotFound, msg: `placement group name "nope" not found`, describe: 1},
		{name: "unknown id is not found", sel: &awsv1.PlacementGroupSelector{ID: aws.String("pg-0ff")},
			status: metav1.ConditionFalse, reason: ReasonPlacementGroupNotFound, msg: `placement group id "pg-0ff" not found`, describe: 1},
		{name: "a group being deleted does not match", sel: &awsv1.PlacementGroupSelector{Name: aws.String("going")},
			status: metav1.ConditionFalse, reason: ReasonPlacementGroupNotFound, msg: `placement group name "going" not found (or not available)`, describe: 1},
		{name: "throttling keeps the previous group and condition", sel: &awsv1.PlacementGroupSelector{Name: aws.String("training")},
			pgErr: apiErr("RequestLimitExceeded"), want: prev, status: metav1.ConditionTrue, reason: ReasonReady,
			wantErr: "describing placement groups: api error RequestLimitExceeded", ready: true, describe: 1},
		{name: "access denied is for a person to fix", sel: &awsv1.PlacementGroupSelector{Name: aws.String("training")},
			pgErr: apiErr("UnauthorizedOperation"), status: metav1.ConditionFalse, reason: ReasonAccessDenied,
			msg: "describing placement groups: access denied", wantErr: "UnauthorizedOperation", describe: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ec2, ssm, iam := world()
			ec2.pgs, ec2.pgErr = groups, tc.pgErr
			nc := defaultClass()
			nc.Spec.PlacementGroupSelector = tc.sel
			// The previous resolution found a group and was ready.
			nc.Status.PlacementGroups = prev
			nc.Status.Conditions = []metav1.Condition{{Type: awsv1.ConditionTypePlacementGroupReady, Status: metav1.ConditionTrue, Reason: ReasonReady, ObservedGeneration: nc.Generation}}
			st, err := resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cluster)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if !reflect.DeepEqual(st.PlacementGroups, tc.want) {
				t.Errorf("placementGroups = %+v, want %+v", st.PlacementGroups, tc.want)
			}
			c := cond(st, awsv1.ConditionTypePlacementGroupReady)
			if c.Status != tc.status || c.Reason != tc.reason || !strings.HasPrefix(c.Message, tc.msg) || c.ObservedGeneration != nc.Generation && tc.wantErr == "" {
				t.Errorf("PlacementGroupReady = %s %s %q (gen %d), want %s %s %q", c.Status, c.Reason, c.Message, c.ObservedGeneration, tc.status, tc.reason, tc.msg)
			}
			r := cond(st, awsv1.ConditionTypeReady)
			if (r.Status == metav1.ConditionTrue) != tc.ready {
				t.Errorf("Ready = %s %s, want ready=%v", r.Status, r.Message, tc.ready)
			}
			if !tc.ready && !strings.Contains(r.Message, "PlacementGroupReady=False") {
				t.Errorf("Ready's message %q does not name PlacementGroupReady", r.Message)
			}
			if got := ec2.calls["DescribePlacementGroups"]; got != tc.describe {
				t.Errorf("DescribePlacementGroups calls = %d, want %d", got, tc.describe)
			}
		})
	}
}

// TestPlacementGroupInput pins the request Karpenter v1.14.1 sends: the id
// wins, and only available groups are asked for.
func TestPlacementGroupInput(t *testing.T) {
	in := PlacementGroupInput(&awsv1.PlacementGroupSelector{ID: aws.String("pg-0a2")})
	if !reflect.DeepEqual(in.GroupIds, []string{"pg-0a2"}) || in.GroupNames != nil {
		t.Errorf("by id: %+v", in)
	}
	in = PlacementGroupInput(&awsv1.PlacementGroupSelector{Name: aws.String("kafka")})
	if !reflect.DeepEqual(in.GroupNames, []string{"kafka"}) || in.GroupIds != nil {
		t.Errorf("by name: %+v", in)
	}
	if len(in.Filters) != 1 || aws.ToString(in.Filters[0].Name) != "state" || !reflect.DeepEqual(in.Filters[0].Values, []string{"available"}) {
		t.Errorf("filters = %+v", in.Filters)
	}
}
