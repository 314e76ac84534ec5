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
