package repair

import (
	"reflect"
	"testing"
	"time"
)

// TestJudge ports the cases of Karpenter v1.14.1's instance status
// provider and controller suites (pkg/providers/instancestatus,
// pkg/controllers/interruption) that decide from EC2's answer alone.
func TestJudge(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	failed := func(c Category, since time.Duration) Check {
		return Check{Category: c, Name: "reachability", Failed: true, ImpairedSince: ago(since)}
	}
	event := func(code string) Check { return Check{Category: CategoryEvent, Name: code, Failed: true} }
	for _, tc := range []struct {
		name string
		in   []InstanceStatus
		want []Impaired
	}{
		{
			name: "every impairment detail counts",
			in: []InstanceStatus{{InstanceID: "i-1", Checks: []Check{
				failed(CategoryInstance, 5*time.Minute), failed(CategorySystem, 3*time.Minute), event("instance-retirement"),
			}}},
			want: []Impaired{{InstanceID: "i-1", Categories: []Category{CategoryInstance, CategorySystem, CategoryEvent}, Forceful: true, Since: ago(5 * time.Minute)}},
		},
		{
			name: "healthy statuses are not returned",
			in: []InstanceStatus{{InstanceID: "i-1", Checks: []Check{
				{Category: CategoryInstance, Name: "reachability"}, {Category: CategorySystem, Name: "reachability"},
			}}},
		},
		{
			name: "a scheduled event counts while the checks pass, at once and not forcefully",
			in: []InstanceStatus{{InstanceID: "i-1", Checks: []Check{
				{Category: CategoryInstance, Name: "reachability"}, event("system-maintenance"),
			}}},
			want: []Impaired{{InstanceID: "i-1", Categories: []Category{CategoryEvent}, Since: now}},
		},
		{
			name: "the system status check alone is forceful",
			in:   []InstanceStatus{{InstanceID: "i-1", Checks: []Check{failed(CategorySystem, 2*time.Minute)}}},
			want: []Impaired{{InstanceID: "i-1", Categories: []Category{CategorySystem}, Forceful: true, Since: ago(2 * time.Minute)}},
		},
		{
			name: "the instance status check alone is forceful",
			in:   []InstanceStatus{{InstanceID: "i-1", Checks: []Check{failed(CategoryInstance, 10*time.Minute)}}},
			want: []Impaired{{InstanceID: "i-1", Categories: []Category{CategoryInstance}, Forceful: true, Since: ago(10 * time.Minute)}},
		},
		{
			name: "a system failure and an event: forceful",
			in:   []InstanceStatus{{InstanceID: "i-1", Checks: []Check{event("system-reboot"), failed(CategorySystem, 3*time.Minute)}}},
			want: []Impaired{{InstanceID: "i-1", Categories: []Category{CategorySystem, CategoryEvent}, Forceful: true, Since: ago(3 * time.Minute)}},
		},
		{
			name: "a check failed for less than the threshold waits",
			in:   []InstanceStatus{{InstanceID: "i-1", Checks: []Check{failed(CategoryInstance, 119*time.Second)}}},
		},
		{
			name: "at the threshold it counts",
			in:   []InstanceStatus{{InstanceID: "i-1", Checks: []Check{failed(CategoryInstance, 120*time.Second)}}},
			want: []Impaired{{InstanceID: "i-1", Categories: []Category{CategoryInstance}, Forceful: true, Since: ago(120 * time.Second)}},
		},
		{
			name: "EBS failures are ignored",
			in:   []InstanceStatus{{InstanceID: "i-1", Checks: []Check{failed(CategoryEBS, time.Hour)}}},
		},
		{
			name: "initializing or insufficient data is not failed",
			in: []InstanceStatus{{InstanceID: "i-1", Checks: []Check{
				{Category: CategoryInstance, Name: "reachability", ImpairedSince: ago(time.Hour)},
			}}},
		},
		{
			name: "each instance on its own, in the order given",
			in: []InstanceStatus{
				{InstanceID: "i-2", Checks: []Check{failed(CategoryInstance, time.Hour)}},
				{InstanceID: "i-3", Checks: []Check{failed(CategoryInstance, time.Second)}},
				{InstanceID: "i-1", Checks: []Check{event("instance-stop")}},
			},
			want: []Impaired{
				{InstanceID: "i-2", Categories: []Category{CategoryInstance}, Forceful: true, Since: ago(time.Hour)},
				{InstanceID: "i-1", Categories: []Category{CategoryEvent}, Since: now},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Judge(tc.in, now); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Judge:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestCategoryReason(t *testing.T) {
	for c, want := range map[Category]string{CategoryInstance: "instance_status", CategorySystem: "system_status", CategoryEvent: "event_status", CategoryEBS: "no_op"} {
		if got := c.Reason(); got != want {
			t.Errorf("%s: %q, want %q", c, got, want)
		}
	}
}
