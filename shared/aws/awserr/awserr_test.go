package awserr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/smithy-go"
)

func TestClassify(t *testing.T) {
	api := func(code string) error {
		return fmt.Errorf("calling: %w", &smithy.GenericAPIError{Code: code, Message: "m"})
	}
	for _, tc := range []struct {
		err                                      error
		notFound, exists, throttle, unauthorized bool
	}{
		{err: api("InvalidInstanceID.NotFound"), notFound: true},
		{err: api("InvalidLaunchTemplateName.NotFoundException"), notFound: true},
		{err: api("NoSuchEntity"), notFound: true},
		{err: api("ParameterNotFound"), notFound: true},
		{err: api("InvalidLaunchTemplateName.AlreadyExistsException"), exists: true},
		{err: api("EntityAlreadyExists"), exists: true},
		{err: api("RequestLimitExceeded"), throttle: true},
		{err: api("UnauthorizedOperation"), unauthorized: true},
		{err: errors.New("plain")},
		{err: nil},
	} {
		if IsNotFound(tc.err) != tc.notFound || IsAlreadyExists(tc.err) != tc.exists || IsThrottle(tc.err) != tc.throttle || IsUnauthorized(tc.err) != tc.unauthorized {
			t.Errorf("%v: classified wrongly", tc.err)
		}
	}
	if !IsCapacityCode("InsufficientInstanceCapacity") || IsCapacityCode("InvalidParameterValue") {
		t.Error("IsCapacityCode")
	}
	if Code(api("X")) != "X" || Code(errors.New("y")) != "" {
		t.Error("Code")
	}
}

// TestLaunchFailureReason: the reasons Karpenter v1.14.1's
// awserrors.ToReasonMessage gives CreateFleet errors, first match winning.
func TestLaunchFailureReason(t *testing.T) {
	for _, tc := range []struct{ code, message, want string }{
		{"RequestLimitExceeded", "Request limit exceeded.", "RequestLimitExceeded"},
		{"SomeBrandNewEC2ErrorCode", "unexpected.", "LaunchFailed"},
		{"InsufficientInstanceCapacity", "We currently do not have sufficient capacity", "LaunchFailed"},
		{"UnfulfillableCapacity", "Unable to fulfill capacity", "LaunchFailed"},
		{"ReservationCapacityExceeded", "full", "LaunchFailed"},
		{SpotServiceLinkedRoleMissing, "not permitted", "SpotSLRCreationFailed"},
		{"UnauthorizedOperation", "You are not authorized", "Unauthorized"},
		{"UnauthorizedOperation", "Not authorized for images: [ami-1]", "AMIAuthorizationFailure"},
		{"UnauthorizedOperation", "Not authorized for images with an explicit deny in a service control policy", "Unauthorized"},
		{"InvalidParameter", "Security group sg-1 and subnet subnet-1 belong to different networks.", "SecurityGroupSubnetVPCMismatch"},
		{"InvalidParameterValue", "Value (x) for parameter iamInstanceProfile.name is invalid", "InstanceProfileNameInvalid"},
		{"InvalidLaunchTemplateId.NotFound", "gone", "LaunchTemplateNotFound"},
		{"InvalidParameterValue", "User data is limited to 16384 bytes", "UserDataSizeLimitExceeded"},
		{"InvalidAMIID.Malformed", "bad", "InvalidAMIID"},
		{"InvalidAMIID.NotFound", "gone", "AMINotFound"},
		{"InternalError", "oops", "InternalError"},
		{"InvalidParameterCombination", "The specified instance type is not eligible for Free Tier.", "FreeTierIneligible"},
		{"MaxFleetCountExceeded", "quota", "FleetQuotaExceeded"},
		{"PendingVerification", "verifying", "AccountPendingVerification"},
		{"MaxSpotInstanceCountExceeded", "quota", "SpotQuotaExceeded"},
		{"VcpuLimitExceeded", "quota", "VCPULimitExceeded"},
		{SubnetOutOfAddresses, "no addresses", "InsufficientFreeAddressesInSubnet"},
		// Karpenter reads the message too: the first class it names wins.
		{"InsufficientInstanceCapacity", "RequestLimitExceeded upstream", "RequestLimitExceeded"},
	} {
		if got := LaunchFailureReason(tc.code, tc.message); got != tc.want {
			t.Errorf("%s: %s: reason %q, want %q", tc.code, tc.message, got, tc.want)
		}
	}
}
