package cloud

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/function/record"
)

// TestErrorsCount: karpenter_cloudprovider_errors_total takes Karpenter's
// labels (controller, method, provider "aws", error) and its well-known
// error values, "" for any other failure; no error, no line.
func TestErrorsCount(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want string // the error label; "-" for no line
	}{
		"no error":           {nil, "-"},
		"throttled":          {errors.New("api error RequestLimitExceeded: Request limit exceeded."), ""},
		"no capacity":        {fmt.Errorf("launching nodeclaim a: %w", instance.ErrNoCapacity), InsufficientCapacityError},
		"launched nothing":   {fmt.Errorf("launching nodeclaim a: %w: InvalidParameter", instance.ErrNothingLaunched), ""},
		"no offering":        {errNoOffering, InsufficientCapacityError},
		"instance not found": {fmt.Errorf("instance i-1: %w", instance.ErrNotFound), NodeClaimNotFoundError},
		"class not ready":    {errNodeClassNotReady, NodeClassNotReadyError},
	} {
		t.Run(name, func(t *testing.T) {
			m := record.NewMetrics("Karpless")
			if got := (Errors{Metrics: m, Controller: ControllerLifecycle}).Count(MethodCreate, tc.err); got != tc.err {
				t.Errorf("Count returned %v, want its argument %v", got, tc.err)
			}
			var out strings.Builder
			if err := m.Flush(&out, 0); err != nil {
				t.Fatal(err)
			}
			if tc.want == "-" {
				if out.Len() > 0 {
					t.Fatalf("a nil error wrote %s", out.String())
				}
				return
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(out.String()), &doc); err != nil {
				t.Fatalf("%v: %s", err, out.String())
			}
			if doc["metric"] != ErrorsMetric || doc[ErrorsMetric] != 1.0 || doc["controller"] != "nodeclaim.lifecycle" ||
				doc["method"] != "Create" || doc["provider"] != "aws" || doc["error"] != tc.want || doc["_aws"] == nil {
				t.Errorf("EMF line %s, want error %q", out.String(), tc.want)
			}
		})
	}
	// The zero value counts nothing, and does not fail.
	if err := (Errors{}).Count(MethodDelete, errors.New("x")); err == nil {
		t.Error("the zero Errors lost the error")
	}
}
