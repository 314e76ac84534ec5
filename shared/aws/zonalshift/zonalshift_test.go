package zonalshift

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/arczonalshift"
	arctypes "github.com/aws/aws-sdk-go-v2/service/arczonalshift/types"
	"github.com/aws/smithy-go"

	"github.com/karpless/karpless/shared/core/zonalshift"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/emulator/emulatortest"
)

type fakeARC struct {
	out   *arczonalshift.GetManagedResourceOutput
	err   error
	asked []string
}

func (f *fakeARC) GetManagedResource(_ context.Context, in *arczonalshift.GetManagedResourceInput, _ ...func(*arczonalshift.Options)) (*arczonalshift.GetManagedResourceOutput, error) {
	f.asked = append(f.asked, aws.ToString(in.ResourceIdentifier))
	return f.out, f.err
}

func TestRead(t *testing.T) {
	now := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	const arn = "arn:aws:eks:us-west-2:123456789012:cluster/demo"
	for _, tc := range []struct {
		name    string
		api     *fakeARC
		want    string
		wantErr string
		notReg  bool
	}{
		{name: "shifts, one in force", api: &fakeARC{out: &arczonalshift.GetManagedResourceOutput{ZonalShifts: []arctypes.ZonalShiftInResource{
			{AwayFrom: aws.String("usw2-az1"), ExpiryTime: aws.Time(now.Add(time.Hour)), AppliedStatus: arctypes.AppliedStatusApplied},
			{AwayFrom: aws.String("usw2-az2"), ExpiryTime: aws.Time(now.Add(time.Hour)), AppliedStatus: arctypes.AppliedStatusNotApplied},
			{AwayFrom: aws.String("usw2-az3"), ExpiryTime: aws.Time(now.Add(-time.Minute)), AppliedStatus: arctypes.AppliedStatusApplied},
		}}}, want: "usw2-az1"},
		{name: "no shift", api: &fakeARC{out: &arczonalshift.GetManagedResourceOutput{}}, want: ""},
		{name: "not registered", api: &fakeARC{err: &arctypes.ResourceNotFoundException{Message: aws.String("The resource was not found.")}},
			wantErr: "enableZonalShift=false", notReg: true},
		{name: "throttled", api: &fakeARC{err: &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}}, wantErr: "Rate exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reader{API: tc.api, ClusterARN: arn, Now: func() time.Time { return now }}
			got, err := r.Read(context.Background())
			if len(tc.api.asked) != 1 || tc.api.asked[0] != arn {
				t.Errorf("asked ARC about %v, want the cluster's ARN once", tc.api.asked)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				if errors.Is(err, ErrNotRegistered) != tc.notReg {
					t.Errorf("errors.Is(ErrNotRegistered) = %v, want %v", !tc.notReg, tc.notReg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want {
				t.Errorf("shifted %q, want %q", got.String(), tc.want)
			}
		})
	}
	var off *Reader
	if z, err := off.Read(context.Background()); err != nil || z != nil {
		t.Errorf("a nil Reader read %v %v, want nothing", z, err)
	}
}

// TestReadThroughEmulator reads shifts with the functions' real SDK client
// from the emulator: an unregistered cluster fails the read, then a shift
// holds until it expires (the emulator still lists it, APPLIED, after).
func TestReadThroughEmulator(t *testing.T) {
	clk := emulatortest.FakeClock()
	e := emulatortest.New(t, nil, clk)
	r := &Reader{
		API:        arczonalshift.NewFromConfig(emulatortest.CarefulAWSConfig(t, e, "")),
		ClusterARN: e.ClusterARN(e.ClusterName()), Now: clk.Now,
	}
	ctx := context.Background()
	if _, err := r.Read(ctx); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("reading an unregistered cluster: %v, want ErrNotRegistered", err)
	}
	if err := e.RegisterZonalShift(e.ClusterName()); err != nil {
		t.Fatal(err)
	}
	zone := e.Config().Zones[0].ID
	if _, err := e.StartZonalShift(r.ClusterARN, zone, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(ctx)
	if err != nil || !got.Has(zone) || len(got) != 1 {
		t.Fatalf("shifted %v %v, want %s", got, err, zone)
	}
	emulatortest.Step(t, e, clk, 11*time.Minute)
	if got, err := r.Read(ctx); err != nil || len(got) != 0 {
		t.Errorf("after the shift expired: %v %v, want none", got, err)
	}
	// ARC still lists the expired shift, APPLIED (for
	// emulator.ExpiredShiftListed): Read went by its expiry.
	out, err := r.API.GetManagedResource(ctx, &arczonalshift.GetManagedResourceInput{ResourceIdentifier: aws.String(r.ClusterARN)})
	if err != nil || len(out.ZonalShifts) != 1 || emulator.ExpiredShiftListed <= 11*time.Minute-10*time.Minute {
		t.Errorf("the emulator no longer lists the expired shift (%v); the case above tested nothing", err)
	}
}

func TestReadReuse(t *testing.T) {
	now := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	api := &fakeARC{out: &arczonalshift.GetManagedResourceOutput{ZonalShifts: []arctypes.ZonalShiftInResource{
		{AwayFrom: aws.String("usw2-az1"), ExpiryTime: aws.Time(now.Add(10 * time.Second)), AppliedStatus: arctypes.AppliedStatusApplied},
	}}}
	clock := now
	r := &Reader{API: api, ClusterARN: "arn", Now: func() time.Time { return clock }, MaxAge: DefaultMaxAge}
	ctx := context.Background()
	for _, step := range []struct {
		at    time.Duration
		want  string
		calls int
	}{
		{0, "usw2-az1", 1},
		{5 * time.Second, "usw2-az1", 1},     // reused
		{15 * time.Second, "", 1},            // reused, but the shift expired meanwhile
		{DefaultMaxAge, "", 2},               // read again
		{DefaultMaxAge + time.Second, "", 2}, // reused
	} {
		clock = now.Add(step.at)
		got, err := r.Read(ctx)
		if err != nil || got.String() != step.want || len(api.asked) != step.calls {
			t.Errorf("at +%v: %q %v after %d calls, want %q after %d", step.at, got.String(), err, len(api.asked), step.want, step.calls)
		}
	}
}

func TestReadWhenARCDoesNotAnswer(t *testing.T) {
	now := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	throttled := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}
	shifted := &arczonalshift.GetManagedResourceOutput{ZonalShifts: []arctypes.ZonalShiftInResource{
		{AwayFrom: aws.String("usw2-az1"), ExpiryTime: aws.Time(now.Add(time.Hour)), AppliedStatus: arctypes.AppliedStatusApplied},
	}}
	lastKnown := func(z zonalshift.Zones, err error) func(context.Context) (zonalshift.Zones, error) {
		return func(context.Context) (zonalshift.Zones, error) { return z, err }
	}
	ctx := context.Background()
	t.Run("this reader's last read stands in", func(t *testing.T) {
		api := &fakeARC{out: shifted}
		clock := now
		r := &Reader{API: api, ClusterARN: "arn", Now: func() time.Time { return clock }, MaxAge: DefaultMaxAge,
			LastKnown: lastKnown(zonalshift.Zones{"usw2-az3": true}, nil)}
		if _, err := r.Read(ctx); err != nil {
			t.Fatal(err)
		}
		api.out, api.err = nil, throttled
		clock = now.Add(time.Minute)
		if got, err := r.Read(ctx); err != nil || got.String() != "usw2-az1" || len(api.asked) != 2 {
			t.Errorf("after a failed read: %q %v (%d calls), want the earlier read's usw2-az1", got.String(), err, len(api.asked))
		}
	})
	t.Run("else the last known shifts", func(t *testing.T) {
		r := &Reader{API: &fakeARC{err: throttled}, ClusterARN: "arn", Now: func() time.Time { return now },
			LastKnown: lastKnown(zonalshift.Zones{"usw2-az3": true}, nil)}
		if got, err := r.Read(ctx); err != nil || got.String() != "usw2-az3" {
			t.Errorf("%q %v, want the last known usw2-az3", got.String(), err)
		}
	})
	t.Run("neither: the error", func(t *testing.T) {
		for _, lk := range []func(context.Context) (zonalshift.Zones, error){nil, lastKnown(nil, errors.New("configmap unreadable"))} {
			r := &Reader{API: &fakeARC{err: throttled}, ClusterARN: "arn", Now: func() time.Time { return now }, LastKnown: lk}
			if _, err := r.Read(ctx); err == nil || !strings.Contains(err.Error(), "Rate exceeded") {
				t.Errorf("error %v, want ARC's", err)
			}
		}
	})
	t.Run("a refusal is not stood in for", func(t *testing.T) {
		for _, refusal := range []error{
			&arctypes.ResourceNotFoundException{Message: aws.String("not found")},
			&smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized"},
		} {
			r := &Reader{API: &fakeARC{err: refusal}, ClusterARN: "arn", Now: func() time.Time { return now },
				LastKnown: lastKnown(zonalshift.Zones{"usw2-az3": true}, nil)}
			if got, err := r.Read(ctx); err == nil || got != nil {
				t.Errorf("%v: read %v %v, want the error", refusal, got, err)
			}
		}
	})
}
