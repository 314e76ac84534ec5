// Package invoke is the Lambda edge: it starts a function asynchronously,
// as the watcher starts the provisioner.
package invoke

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// Lambda is the part of the Lambda API this package calls.
type Lambda interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Function invokes one function by name.
type Function struct {
	Lambda Lambda
	Name   string
}

// InvokeAsync queues an invocation (InvocationType Event): Lambda answers
// 202 once the event is queued and runs the function at least once. The
// SDK retries throttling (TooManyRequestsException) and server errors.
func (f Function) InvokeAsync(ctx context.Context, payload []byte) error {
	out, err := f.Lambda.Invoke(ctx, &lambda.InvokeInput{
		FunctionName: aws.String(f.Name), InvocationType: lambdatypes.InvocationTypeEvent, Payload: payload,
	})
	if err != nil {
		return fmt.Errorf("invoking %s: %w", f.Name, err)
	}
	if out.StatusCode != 202 {
		return fmt.Errorf("invoking %s: status %d, want 202", f.Name, out.StatusCode)
	}
	return nil
}
