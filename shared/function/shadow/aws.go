package shadow

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/middleware"
)

// GuardAWS makes every client built from cfg afterwards unable to change
// anything in AWS: each call's operation is checked before it is
// serialized, signed or sent, and one that is not AllowedAWS fails with
// ErrRefused (not retried). It sits in the SDK's middleware stack, where
// the operation's name is known, rather than in the HTTP transport, where
// it would have to be guessed from each protocol's body.
func GuardAWS(cfg *aws.Config) { cfg.APIOptions = append(cfg.APIOptions, APIOption) }

// APIOption is GuardAWS's option, for config.LoadOptions.APIOptions.
func APIOption(s *middleware.Stack) error {
	return s.Initialize.Add(middleware.InitializeMiddlewareFunc("KarplessShadowGuard", guard), middleware.Before)
}

func guard(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	service, op := middleware.GetServiceID(ctx), middleware.GetOperationName(ctx)
	if !AllowedAWS(service, op) {
		return middleware.InitializeOutput{}, middleware.Metadata{}, fmt.Errorf("%w: %s %s (shadow mode only reads AWS)", ErrRefused, service, op)
	}
	return next.HandleInitialize(ctx, in)
}

// AllowedAWS reports whether shadow mode may call the operation of the
// service (the SDK's service ID, e.g. EC2, SQS, Lambda): reads
// (Describe*, Get*, List*), the STS calls that fetch credentials, and
// Lambda's Invoke (the watcher starts the provisioner, in shadow mode too).
// Everything else (CreateFleet, RunInstances, TerminateInstances,
// CreateTags, launch templates, instance profiles, SQS's DeleteMessage and
// ChangeMessageVisibility, ...) is refused.
func AllowedAWS(service, op string) bool {
	for _, p := range []string{"Describe", "Get", "List"} {
		if strings.HasPrefix(op, p) {
			return true
		}
	}
	switch {
	case service == "STS" && strings.HasPrefix(op, "AssumeRole"):
		return true
	case service == "Lambda" && op == "Invoke":
		return true
	}
	return false
}
