package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
)

// fleetAPI answers CreateFleet with errs, or with one error of code per
// override it was asked for when errs is nil; it records the calls.
type fleetAPI struct {
	instance.EC2
	free  map[string]int32
	code  string
	errs  []ec2types.CreateFleetError
	ok    bool
	calls []*ec2.CreateFleetInput
}

func (f *fleetAPI) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	out := &ec2.DescribeSubnetsOutput{}
	for _, id := range in.SubnetIds {
		n, ok := f.free[id]
		if !ok {
			n = 100
		}
		out.Subnets = append(out.Subnets, ec2types.Subnet{SubnetId: aws.String(id), AvailableIpAddressCount: aws.Int32(n)})
	}
	return out, nil
}

func (f *fleetAPI) CreateFleet(_ context.Context, in *ec2.CreateFleetInput, _ ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	f.calls = append(f.calls, in)
	if f.ok {
		o := in.LaunchTemplateConfigs[0].Overrides[0]
		return &ec2.CreateFleetOutput{Instances: []ec2types.CreateFleetInstance{{InstanceIds: []string{"i-new"}, InstanceType: o.InstanceType,
			LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{AvailabilityZone: o.AvailabilityZone, SubnetId: o.SubnetId}}}}}, nil
	}
	if f.errs != nil {
		return &ec2.CreateFleetOutput{Errors: f.errs}, nil
	}
	out := &ec2.CreateFleetOutput{}
	for _, o := range in.LaunchTemplateConfigs[0].Overrides {
		out.Errors = append(out.Errors, fleetErr(f.code, string(o.InstanceType), aws.ToString(o.AvailabilityZone), aws.ToString(o.SubnetId)))
	}
	return out, nil
}

func (f *fleetAPI) DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return &ec2.DescribeInstancesOutput{}, nil
}

func fleetErr(code, it, zone, subnet string) ec2types.CreateFleetError {
	o := &ec2types.FleetLaunchTemplateOverrides{InstanceType: ec2types.InstanceType(it), AvailabilityZone: aws.String(zone)}
	if subnet != "" {
		o.SubnetId = aws.String(subnet)
	}
	return ec2types.CreateFleetError{ErrorCode: aws.String(code), ErrorMessage: aws.String(code),
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: o}}
}

// fleetErrMsg is a CreateFleet error of an override, with EC2's message.
func fleetErrMsg(code, message, it, zone string) ec2types.CreateFleetError {
	e := fleetErr(code, it, zone, "")
	e.ErrorMessage = aws.String(message)
	return e
}

// launchFailures reads LaunchFailuresMetric's series from what m would
// write, by seriesKey of their dimensions.
func launchFailures(t *testing.T, m *record.Metrics) map[string]float64 {
	t.Helper()
	var out strings.Builder
	if err := m.Flush(&out, 0); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for line := range strings.Lines(out.String()) {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		if doc["metric"] != LaunchFailuresMetric {
			continue
		}
		dims := map[string]string{}
		for _, k := range []string{"zone", "zone_id", "capacity_type", "reason"} {
			v, ok := doc[k].(string)
			if !ok {
				t.Fatalf("%s without dimension %s: %s", LaunchFailuresMetric, k, line)
			}
			dims[k] = v
		}
		v, _ := doc[LaunchFailuresMetric].(float64)
		got[seriesKey(dims)] += v
	}
	return got
}

func seriesKey(dims map[string]string) string {
	return fmt.Sprintf("zone=%s zone_id=%s capacity_type=%s reason=%s", dims["zone"], dims["zone_id"], dims["capacity_type"], dims["reason"])
}

// confCloud is a Cloud without a cluster: capacity marks in a fake
// ConfigMap store, events gathered.
func confCloud(t *testing.T) (*Cloud, *k8sfake.Clientset) {
	t.Helper()
	client := k8sfake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	ice, err := unavailable.Load(context.Background(), client.CoreV1(), "karpless", 3*time.Minute, clk)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &Cloud{Deps: Deps{Clock: clk, Log: log, Metrics: record.NewMetrics("Karpless"), Events: record.NewRecorder(client.CoreV1(), clk, log)}, ice: ice}
	c.resv.count = map[string]int{}
	return c, client
}

// confView is a class with subnets per zone and types offered spot
// (cheaper) and on-demand in each zone.
func confView(subnets map[string][]string, types ...string) *classView {
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	for _, z := range []string{"test-zone-1a", "test-zone-1b", "test-zone-1c"} {
		for _, id := range subnets[z] {
			nc.Status.Subnets = append(nc.Status.Subnets, awsv1.Subnet{ID: id, Zone: z})
		}
	}
	v := &classView{nc: nc}
	for i, name := range types {
		it := &scheduling.InstanceType{Name: name, Labels: map[string]string{wellknown.InstanceTypeLabel: name}}
		for z := range subnets {
			it.Offerings = append(it.Offerings,
				scheduling.Offering{Zone: z, CapacityType: wellknown.CapacityTypeSpot, Price: 0.03 * float64(i+1), Available: true},
				scheduling.Offering{Zone: z, CapacityType: wellknown.CapacityTypeOnDemand, Price: 0.1 * float64(i+1), Available: true})
		}
		v.types = append(v.types, it)
	}
	return v
}

func confClaim(reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x", UID: "uid-x", Annotations: map[string]string{}},
		Spec: karpv1.NodeClaimSpec{Requirements: reqs}}
}

// confLaunch is one pass of Launch's loop without the cluster: pick the
// offerings, CreateFleet, record what the answer says.
func confLaunch(t *testing.T, c *Cloud, api *fleetAPI, nc *karpv1.NodeClaim, v *classView) (string, instance.Result, error) {
	t.Helper()
	ct, offs, types, resv := c.offerings(nc, v, false)
	if len(offs) == 0 {
		return ct, instance.Result{}, errNoOffering
	}
	lt := instance.LaunchTemplate{Name: "lt", ImageID: "ami-1"}
	for _, it := range types {
		lt.InstanceTypes = append(lt.InstanceTypes, it.Name)
	}
	res, err := instance.NewProvider(api, "demo").Create(context.Background(), instance.Request{
		NodeClaimName: nc.Name, NodeClaimUID: string(nc.UID), CapacityType: ct, Offerings: offs,
		LaunchTemplates: []instance.LaunchTemplate{lt}, Subnets: launchSubnets(c.ice, v.nc),
		ReservationID: resv.ReservationID, ReservationType: resv.ReservationType,
	})
	c.fleetErrors(nc, v.nc, ct, resv.ReservationID, res.Errors)
	return ct, res, err
}

func isICE(err error) bool {
	return errors.Is(err, instance.ErrNoCapacity) || errors.Is(err, errNoOffering)
}

var twoZones = map[string][]string{"test-zone-1a": {"subnet-1a"}, "test-zone-1b": {"subnet-1b"}}

// Karpenter v1.14.1's instance provider suite
// (aws/karpenter-provider-aws pkg/providers/instance/suite_test.go), its
// launch's capacity handling: which offerings a launch asks for and what
// EC2's errors mark unavailable (launch.go, subnets.go, reservation.go).
func TestConformanceInstanceProviderLaunch(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "aws/providers/instance", File: "pkg/providers/instance/suite_test.go", Spec: "InstanceProvider > " + spec}
	}
	conformance.Run(t, c("should return an ICE error when instance type truncation fails minValues validation"), func(t *testing.T) {
		cl, _ := confCloud(t)
		api := &fleetAPI{ok: true}
		v := confView(map[string][]string{"test-zone-1a": {"s-a"}, "test-zone-1b": {"s-b"}, "test-zone-1c": {"s-c"}}, "m5.large", "m5.xlarge")
		nc := confClaim(karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.ZoneLabel, Operator: corev1.NodeSelectorOpExists, MinValues: aws.Int(50)})
		if _, _, err := confLaunch(t, cl, api, nc, v); !isICE(err) {
			t.Fatalf("launch: %v, want a lack of capacity", err)
		}
		if len(api.calls) != 0 {
			t.Errorf("%d CreateFleet calls for a claim whose minValues no offering set meets", len(api.calls))
		}
	})
	marked := func(cl *Cloud, v *classView, ct, it, zone string) bool {
		return unavailableIn(cl.ice, v.nc)(ct, it, zone)
	}
	conformance.Run(t, c("should return an ICE error when all attempted instance types return an ICE error"), func(t *testing.T) {
		cl, _ := confCloud(t)
		api := &fleetAPI{code: "InsufficientInstanceCapacity"}
		v := confView(twoZones, "m5.xlarge")
		nc := confClaim()
		ct, _, err := confLaunch(t, cl, api, nc, v)
		if !isICE(err) || ct != wellknown.CapacityTypeSpot {
			t.Fatalf("first launch (%s): %v, want spot and a lack of capacity", ct, err)
		}
		for _, z := range []string{"test-zone-1a", "test-zone-1b"} {
			if !marked(cl, v, wellknown.CapacityTypeSpot, "m5.xlarge", z) || marked(cl, v, wellknown.CapacityTypeOnDemand, "m5.xlarge", z) {
				t.Errorf("%s: spot should be marked, on-demand not", z)
			}
		}
		ct, _, err = confLaunch(t, cl, api, nc, v)
		if !isICE(err) || ct != wellknown.CapacityTypeOnDemand {
			t.Fatalf("second launch (%s): %v, want on-demand and a lack of capacity", ct, err)
		}
		for _, z := range []string{"test-zone-1a", "test-zone-1b"} {
			if !marked(cl, v, wellknown.CapacityTypeSpot, "m5.xlarge", z) || !marked(cl, v, wellknown.CapacityTypeOnDemand, "m5.xlarge", z) {
				t.Errorf("%s: spot and on-demand should be marked", z)
			}
		}
	})
	conformance.Run(t, c("should return an ICE error when spot instances are used and SpotSLR can't be created"), func(t *testing.T) {
		cl, client := confCloud(t)
		api := &fleetAPI{errs: []ec2types.CreateFleetError{
			fleetErr(awserr.SpotServiceLinkedRoleMissing, "m5.xlarge", "test-zone-1a", ""),
			fleetErr(awserr.SpotServiceLinkedRoleMissing, "m5.xlarge", "test-zone-1b", ""),
		}}
		v := confView(twoZones, "m5.xlarge")
		if ct, _, err := confLaunch(t, cl, api, confClaim(), v); !isICE(err) || ct != wellknown.CapacityTypeSpot {
			t.Fatalf("launch (%s): %v, want spot and a lack of capacity", ct, err)
		}
		for _, it := range []string{"m5.xlarge", "m5.large"} {
			for _, z := range []string{"test-zone-1a", "test-zone-1b"} {
				if !marked(cl, v, wellknown.CapacityTypeSpot, it, z) || marked(cl, v, wellknown.CapacityTypeOnDemand, it, z) {
					t.Errorf("%s %s: spot should be marked, on-demand not", it, z)
				}
			}
		}
		cl.Events.Flush(context.Background())
		evs, err := client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range evs.Items {
			found = found || strings.Contains(e.Message, `Attempted to launch a spot instance but failed due to "AuthFailure.ServiceLinkedRoleCreationNotPermitted"`)
		}
		if !found {
			t.Errorf("no spot service-linked role event in %d events", len(evs.Items))
		}
	})
	conformance.Run(t, c("should return an ICE error when max fleet count is reached"), func(t *testing.T) {
		cl, _ := confCloud(t)
		api := &fleetAPI{errs: []ec2types.CreateFleetError{fleetErr("MaxFleetCountExceeded", "m5.xlarge", "test-zone-1a", "")}}
		v := confView(twoZones, "m5.xlarge")
		if ct, _, err := confLaunch(t, cl, api, confClaim(), v); !isICE(err) || ct != wellknown.CapacityTypeSpot {
			t.Fatalf("launch (%s): %v, want spot and a lack of capacity", ct, err)
		}
		if !marked(cl, v, wellknown.CapacityTypeSpot, "m5.xlarge", "test-zone-1a") || marked(cl, v, wellknown.CapacityTypeSpot, "m5.xlarge", "test-zone-1b") ||
			marked(cl, v, wellknown.CapacityTypeOnDemand, "m5.xlarge", "test-zone-1a") || marked(cl, v, wellknown.CapacityTypeOnDemand, "m5.xlarge", "test-zone-1b") {
			t.Error("only spot m5.xlarge in test-zone-1a should be marked")
		}
	})
	const crID = "cr-m5.large-1a-1"
	reservedView := func() *classView {
		v := confView(twoZones, "m5.large")
		v.nc.Status.CapacityReservations = []awsv1.CapacityReservation{{ID: crID, AvailabilityZone: "test-zone-1a", InstanceType: "m5.large",
			InstanceMatchCriteria: "targeted", OwnerID: "012345678901", State: "active", ReservationType: "default"}}
		v.types[0].Offerings = append(v.types[0].Offerings, scheduling.Offering{Zone: "test-zone-1a", CapacityType: wellknown.CapacityTypeReserved,
			Available: true, ReservationID: crID, ReservationType: "default", ReservationCapacity: 1})
		return v
	}
	reserved := karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeReserved}}
	conformance.Run(t, c("should return an ICE error when all attempted instance types return a ReservedCapacityReservation error"), func(t *testing.T) {
		cl, _ := confCloud(t)
		cl.resv.count[crID] = 1
		api := &fleetAPI{code: "ReservationCapacityExceeded"}
		if ct, _, err := confLaunch(t, cl, api, confClaim(reserved), reservedView()); !isICE(err) || ct != wellknown.CapacityTypeReserved {
			t.Fatalf("launch (%s): %v, want reserved and a lack of capacity", ct, err)
		}
		if got := cl.available(crID); got != 0 {
			t.Errorf("reservation takes %d more, want 0 once EC2 said it is full", got)
		}
	})
	conformance.Run(t, c("should not mark capacity reservations unavailable for RequestLimitExceeded CreateFleet errors"), func(t *testing.T) {
		cl, _ := confCloud(t)
		cl.resv.count[crID] = 1
		api := &fleetAPI{errs: []ec2types.CreateFleetError{fleetErr("RequestLimitExceeded", "m5.large", "test-zone-1a", "")}}
		_, res, err := confLaunch(t, cl, api, confClaim(reserved), reservedView())
		if err == nil || res.Instance != nil {
			t.Fatalf("launch: %v %v, want an error and no instance", res.Instance, err)
		}
		if got := cl.available(crID); got != 1 {
			t.Errorf("reservation takes %d more, want 1: throttling says nothing of its capacity", got)
		}
	})
	onDemand := karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeOnDemand}}
	for _, tc := range []struct {
		spec string
		errs []ec2types.CreateFleetError
		// dims are the one series the errors count in, want how often.
		dims map[string]string
		want float64
	}{
		{"should emit a zone-dimensioned launch failure metric for each CreateFleet offering error",
			[]ec2types.CreateFleetError{
				fleetErrMsg("RequestLimitExceeded", "Request limit exceeded.", "m5.large", "test-zone-1a"),
				fleetErrMsg("RequestLimitExceeded", "Request limit exceeded.", "m5.2xlarge", "test-zone-1a"),
			},
			// zone_id is the class's subnet's: CreateFleet's errors do not carry it.
			map[string]string{"zone": "test-zone-1a", "zone_id": "tstz1-1a", "capacity_type": wellknown.CapacityTypeOnDemand, "reason": "RequestLimitExceeded"}, 2},
		{"should record the generic launch failure reason and an empty zone_id for an unrecognized error in an unknown zone",
			[]ec2types.CreateFleetError{fleetErrMsg("SomeBrandNewEC2ErrorCode", "unexpected.", "m5.large", "unknown-zone-9z")},
			map[string]string{"zone": "unknown-zone-9z", "zone_id": "", "capacity_type": wellknown.CapacityTypeOnDemand, "reason": "LaunchFailed"}, 1},
	} {
		conformance.Run(t, c(tc.spec), func(t *testing.T) {
			cl, _ := confCloud(t)
			v := confView(twoZones, "m5.large", "m5.2xlarge")
			for i, s := range v.nc.Status.Subnets {
				v.nc.Status.Subnets[i].ZoneID = "tstz1-" + strings.TrimPrefix(s.Zone, "test-zone-")
			}
			api := &fleetAPI{errs: tc.errs}
			if _, res, err := confLaunch(t, cl, api, confClaim(onDemand), v); err == nil || res.Instance != nil {
				t.Fatalf("launch: %v %v, want an error and no instance", res.Instance, err)
			}
			got := launchFailures(t, cl.Metrics)
			if got[seriesKey(tc.dims)] != tc.want {
				t.Errorf("%s%v = %v, want %v (series: %v)", LaunchFailuresMetric, tc.dims, got[seriesKey(tc.dims)], tc.want, got)
			}
			if len(got) != 1 {
				t.Errorf("%d series of %s, want only %v: %v", len(got), LaunchFailuresMetric, tc.dims, got)
			}
		})
	}
	for _, tc := range []struct {
		entry    string
		subnets  map[string][]string
		iced     []string
		unusable map[string]bool
	}{
		{"zone unavailable when 1 subnet gets ICEd with 1 subnet in zone",
			map[string][]string{"test-zone-1a": {"subnet-1a-1"}, "test-zone-1b": {"subnet-1b-1"}, "test-zone-1c": {"subnet-1c-1"}},
			[]string{"subnet-1a-1"}, map[string]bool{"test-zone-1a": true, "test-zone-1b": false, "test-zone-1c": false}},
		{"zone available when only 1 subnet gets ICEd with multiple subnets in zone",
			map[string][]string{"test-zone-1a": {"subnet-1a-1", "subnet-1a-2", "subnet-1a-3"}, "test-zone-1b": {"subnet-1b-1"}, "test-zone-1c": {"subnet-1c-1"}},
			[]string{"subnet-1a-1"}, map[string]bool{"test-zone-1a": false, "test-zone-1b": false, "test-zone-1c": false}},
		{"zone unavailable when all subnets in zone get ICEd",
			map[string][]string{"test-zone-1a": {"subnet-1a-1", "subnet-1a-2", "subnet-1a-3"}, "test-zone-1b": {"subnet-1b-1"}, "test-zone-1c": {"subnet-1c-1"}},
			[]string{"subnet-1a-1", "subnet-1a-2", "subnet-1a-3"}, map[string]bool{"test-zone-1a": true, "test-zone-1b": false, "test-zone-1c": false}},
	} {
		conformance.Run(t, c("should handle subnet IP exhaustion correctly > "+tc.entry), func(t *testing.T) {
			cl, _ := confCloud(t)
			var errs []ec2types.CreateFleetError
			for _, s := range tc.iced {
				errs = append(errs, fleetErr(awserr.SubnetOutOfAddresses, "m5.xlarge", "test-zone-1a", s))
			}
			api := &fleetAPI{errs: errs}
			v := confView(tc.subnets, "m5.large", "m5.xlarge")
			if _, _, err := confLaunch(t, cl, api, confClaim(), v); !isICE(err) {
				t.Fatalf("launch: %v, want a lack of capacity", err)
			}
			for zone, want := range tc.unusable {
				for _, it := range v.types {
					if got := marked(cl, v, wellknown.CapacityTypeOnDemand, it.Name, zone); got != want {
						t.Errorf("on-demand %s in %s unavailable %v, want %v", it.Name, zone, got, want)
					}
				}
			}
		})
	}
	conformance.Run(t, c("should deprioritize subnets on subsequent launches after subnet IP exhaustion"), func(t *testing.T) {
		cl, _ := confCloud(t)
		api := &fleetAPI{free: map[string]int32{"subnet-1a-1": 50, "subnet-1a-2": 200},
			errs: []ec2types.CreateFleetError{fleetErr(awserr.SubnetOutOfAddresses, "m5.xlarge", "test-zone-1a", "subnet-1a-2")}}
		v := confView(map[string][]string{"test-zone-1a": {"subnet-1a-1", "subnet-1a-2"}}, "m5.xlarge")
		if _, _, err := confLaunch(t, cl, api, confClaim(), v); !isICE(err) {
			t.Fatalf("first launch: %v, want a lack of capacity", err)
		}
		subnetOf := func(in *ec2.CreateFleetInput) string {
			if len(in.LaunchTemplateConfigs) != 1 || len(in.LaunchTemplateConfigs[0].Overrides) == 0 {
				t.Fatalf("fleet request %+v", in.LaunchTemplateConfigs)
			}
			return aws.ToString(in.LaunchTemplateConfigs[0].Overrides[0].SubnetId)
		}
		if got := subnetOf(api.calls[0]); got != "subnet-1a-2" {
			t.Errorf("first launch used %s, want subnet-1a-2 (most free addresses)", got)
		}
		api.errs, api.ok = nil, true
		_, res, err := confLaunch(t, cl, api, confClaim(), v)
		if err != nil || res.Instance == nil {
			t.Fatalf("second launch: %v", err)
		}
		if got := subnetOf(api.calls[1]); got != "subnet-1a-1" {
			t.Errorf("second launch used %s, want subnet-1a-1 (the other is out of addresses)", got)
		}
	})
}
