package emulator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/arczonalshift"
	arctypes "github.com/aws/aws-sdk-go-v2/service/arczonalshift/types"
)

// TestARCZonalShift drives the emulated ARC with the SDK's client: a
// cluster ARC does not know, its registration, a shift started, extended,
// cancelled, and one that expires and stays listed a while.
func TestARCZonalShift(t *testing.T) {
	e, clk := newTestEmulator(t)
	c := arczonalshift.NewFromConfig(sdkConfig(t, e, carefulAttempts))
	ctx := context.Background()
	arn := e.ClusterARN(e.ClusterName())
	get := func() []arctypes.ZonalShiftInResource {
		t.Helper()
		out, err := c.GetManagedResource(ctx, &arczonalshift.GetManagedResourceInput{ResourceIdentifier: aws.String(arn)})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(out.Arn) != arn || aws.ToString(out.Name) != e.ClusterName() || len(out.AppliedWeights) != 3 {
			t.Errorf("managed resource decoded wrong: %+v", out)
		}
		return out.ZonalShifts
	}

	_, err := c.GetManagedResource(ctx, &arczonalshift.GetManagedResourceInput{ResourceIdentifier: aws.String(arn)})
	var rnf *arctypes.ResourceNotFoundException
	if !errors.As(err, &rnf) {
		t.Fatalf("an unregistered cluster: %T %v, want *types.ResourceNotFoundException", err, err)
	}
	if _, err := e.StartZonalShift(arn, "usw2-az1", time.Hour); err == nil {
		t.Error("a shift of an unregistered cluster started")
	}
	if err := e.RegisterZonalShift(e.ClusterName()); err != nil {
		t.Fatal(err)
	}
	if s := get(); len(s) != 0 {
		t.Fatalf("a registered cluster lists %d shifts, want none", len(s))
	}

	started, err := c.StartZonalShift(ctx, &arczonalshift.StartZonalShiftInput{
		ResourceIdentifier: aws.String(arn), AwayFrom: aws.String("usw2-az1"), ExpiresIn: aws.String("30m"), Comment: aws.String("test"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if started.Status != arctypes.ZonalShiftStatusActive || aws.ToString(started.AwayFrom) != "usw2-az1" {
		t.Errorf("start decoded wrong: %+v", started)
	}
	s := get()
	if len(s) != 1 || aws.ToString(s[0].AwayFrom) != "usw2-az1" || s[0].AppliedStatus != arctypes.AppliedStatusApplied ||
		!aws.ToTime(s[0].ExpiryTime).Equal(t0.Add(30*time.Minute)) || aws.ToString(s[0].ZonalShiftId) != aws.ToString(started.ZonalShiftId) {
		t.Fatalf("shifts %+v, want the one started, applied, expiring in 30m", s)
	}
	if _, err := c.StartZonalShift(ctx, &arczonalshift.StartZonalShiftInput{
		ResourceIdentifier: aws.String(arn), AwayFrom: aws.String("usw2-az2"), ExpiresIn: aws.String("30m"), Comment: aws.String("second"),
	}); err == nil {
		t.Error("a second shift started while one holds")
	}
	if _, err := c.UpdateZonalShift(ctx, &arczonalshift.UpdateZonalShiftInput{ZonalShiftId: started.ZonalShiftId, ExpiresIn: aws.String("2h")}); err != nil {
		t.Fatal(err)
	}
	if s := get(); !aws.ToTime(s[0].ExpiryTime).Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("expiry after the update %v, want %v", aws.ToTime(s[0].ExpiryTime), t0.Add(2*time.Hour))
	}
	if _, err := c.CancelZonalShift(ctx, &arczonalshift.CancelZonalShiftInput{ZonalShiftId: started.ZonalShiftId}); err != nil {
		t.Fatal(err)
	}
	if s := get(); len(s) != 0 {
		t.Fatalf("a cancelled shift is listed: %+v", s)
	}

	id, err := e.StartZonalShift(arn, "usw2-az3", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(6 * time.Minute)
	s = get()
	if len(s) != 1 || aws.ToString(s[0].ZonalShiftId) != id || s[0].AppliedStatus != arctypes.AppliedStatusApplied || aws.ToTime(s[0].ExpiryTime).After(clk.Now()) {
		t.Fatalf("an expired shift: %+v, want it listed, APPLIED, with its past expiry", s)
	}
	if err := e.CancelZonalShift(id); err == nil {
		t.Error("an expired shift was cancelled")
	}
	clk.Step(ExpiredShiftListed)
	if s := get(); len(s) != 0 {
		t.Errorf("a shift expired %v ago is still listed", ExpiredShiftListed+time.Minute)
	}
}
