// Package awserr classifies AWS API errors once, by code, so callers ask
// "not found?", "out of capacity?", "throttled?" instead of matching strings.
package awserr

import (
	"errors"
	"strings"

	"github.com/aws/smithy-go"
)

// Code returns the AWS error code of err, or "" when it carries none.
func Code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// Capacity error codes: the offering (type, zone, capacity type) cannot be
// had right now, so it is marked unavailable and others are tried.
var capacityCodes = map[string]bool{
	"InsufficientInstanceCapacity":      true,
	"MaxSpotInstanceCountExceeded":      true,
	"VcpuLimitExceeded":                 true,
	"UnfulfillableCapacity":             true,
	"Unsupported":                       true,
	"InsufficientFreeAddressesInSubnet": true,
	"MaxFleetCountExceeded":             true,
	"ReservationCapacityExceeded":       true,
	"InsufficientCapacityOnHost":        true,
}

// SubnetOutOfAddresses is the CreateFleet error of an override whose
// subnet has too few free IP addresses left: a capacity error of the
// offering, and of the subnet for every offering in it (as Karpenter's
// IsInsufficientFreeAddressesInSubnet).
const SubnetOutOfAddresses = "InsufficientFreeAddressesInSubnet"

// IsCapacityCode reports whether a CreateFleet error code means "no capacity
// for this offering".
func IsCapacityCode(code string) bool { return capacityCodes[code] }

// SpotServiceLinkedRoleMissing is the errorSet code of every spot override
// when the account has no EC2 Spot service-linked role and the caller may
// not create it: no spot offering can launch until someone creates the role.
const SpotServiceLinkedRoleMissing = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"

// IsSpotServiceLinkedRoleMissing reports that code (a CreateFleet errorSet
// item) means spot cannot launch at all in this account.
func IsSpotServiceLinkedRoleMissing(code string) bool { return code == SpotServiceLinkedRoleMissing }

// IsNotFound reports whether the resource does not exist (any service).
func IsNotFound(err error) bool {
	c := Code(err)
	switch {
	case c == "":
		return false
	case strings.HasSuffix(c, ".NotFound"), strings.HasSuffix(c, "NotFoundException"), strings.HasSuffix(c, ".Malformed") && strings.HasPrefix(c, "InvalidInstanceID"):
		return true
	}
	switch c {
	case "NoSuchEntity", "ParameterNotFound", "ResourceNotFoundException", "InvalidLaunchTemplateName.NotFoundException",
		"InvalidLaunchTemplateId.NotFound", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist":
		return true
	}
	return false
}

// IsAlreadyExists reports whether a create failed because the resource exists.
func IsAlreadyExists(err error) bool {
	switch Code(err) {
	case "EntityAlreadyExists", "InvalidLaunchTemplateName.AlreadyExistsException", "AlreadyExistsException", "ResourceAlreadyExistsException":
		return true
	}
	return false
}

// IsThrottle reports whether the call was rate limited.
func IsThrottle(err error) bool {
	switch Code(err) {
	case "RequestLimitExceeded", "Throttling", "ThrottlingException", "EC2ThrottledException", "TooManyRequestsException", "RequestThrottled":
		return true
	}
	return false
}

// IsUnauthorized reports whether IAM denied the call.
func IsUnauthorized(err error) bool {
	switch Code(err) {
	case "UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "AuthFailure":
		return true
	}
	return false
}

// LaunchFailureReason is the reason Karpenter gives a failed launch
// (awserrors.ToReasonMessage, the reason label of
// karpenter_cloudprovider_instance_launch_failures_total): a well-known
// class read from the error's code and message, in Karpenter's order (the
// first that matches wins), else "LaunchFailed". Karpenter matches the text
// "<code>: <message>" by substring, and so does this, so that a dashboard
// built on its reasons sees the same ones: capacity errors such as
// InsufficientInstanceCapacity have no class of their own there, and are
// LaunchFailed too.
func LaunchFailureReason(code, message string) string {
	text := code + ": " + message
	has := func(s string) bool { return strings.Contains(text, s) }
	switch {
	case has("AuthFailure.ServiceLinkedRoleCreationNotPermitted"):
		return "SpotSLRCreationFailed"
	case has("UnauthorizedOperation") || has("AccessDenied") || has("AuthFailure"):
		if has("Not authorized for images") && !has("with an explicit deny in a permissions boundary") && !has("with an explicit deny in a service control policy") {
			return "AMIAuthorizationFailure"
		}
		return "Unauthorized"
	case has("InvalidParameter") && has("belong to different networks"):
		return "SecurityGroupSubnetVPCMismatch"
	case has("iamInstanceProfile.name is invalid"):
		return "InstanceProfileNameInvalid"
	case has("InvalidLaunchTemplateId.NotFound"):
		return "LaunchTemplateNotFound"
	case has("User data is limited to"):
		return "UserDataSizeLimitExceeded"
	case has("InvalidAMIID.Malformed"):
		return "InvalidAMIID"
	case has("InvalidAMIID.NotFound"):
		return "AMINotFound"
	case has("RequestLimitExceeded"):
		return "RequestLimitExceeded"
	case has("InternalError"):
		return "InternalError"
	case has("not eligible for Free Tier"):
		return "FreeTierIneligible"
	case has("MaxFleetCountExceeded"):
		return "FleetQuotaExceeded"
	case has("PendingVerification"):
		return "AccountPendingVerification"
	case has("MaxSpotInstanceCountExceeded"):
		return "SpotQuotaExceeded"
	case has("VcpuLimitExceeded"):
		return "VCPULimitExceeded"
	case has("InsufficientFreeAddressesInSubnet"):
		return "InsufficientFreeAddressesInSubnet"
	}
	return "LaunchFailed"
}
