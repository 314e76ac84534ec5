package emulator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// TestLambdaInvoke: the real SDK client invokes registered functions
// synchronously and asynchronously, by name or ARN, and gets Lambda's
// answers for an unknown function and a function error.
func TestLambdaInvoke(t *testing.T) {
	h := DefaultHostility()
	// One run per event, and no random throttle: the counts below are exact.
	h.AsyncDuplicateRate, h.ThrottleRate, h.ServerErrorRate = 0, 0, 0
	e, _ := newTestEmulator(t, calm(h))
	c := lambda.NewFromConfig(sdkConfig(t, e, carefulAttempts))
	ctx := context.Background()
	var mu sync.Mutex
	var got []string
	ran := make(chan struct{}, 4)
	e.RegisterFunction("provisioner", func(ctx context.Context, payload []byte) ([]byte, error) {
		mu.Lock()
		got = append(got, string(payload))
		mu.Unlock()
		ran <- struct{}{}
		if string(payload) == `"fail"` {
			return nil, errors.New("boom")
		}
		return []byte(`{"ok":true}`), nil
	})

	out, err := c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(e.FunctionARN("provisioner")), InvocationType: lambdatypes.InvocationTypeEvent, Payload: []byte(`{"source":"test"}`)})
	if err != nil || out.StatusCode != 202 || len(out.Payload) != 0 {
		t.Fatalf("Event: %+v %v", out, err)
	}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the asynchronous invocation did not run")
	}

	out, err = c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("provisioner"), Payload: []byte(`{}`)})
	if err != nil || out.StatusCode != 200 || string(out.Payload) != `{"ok":true}` || out.FunctionError != nil {
		t.Fatalf("RequestResponse: %+v %v", out, err)
	}
	<-ran
	out, err = c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("provisioner"), Payload: []byte(`"fail"`)})
	if err != nil || aws.ToString(out.FunctionError) != "Unhandled" {
		t.Fatalf("function error: %+v %v", out, err)
	}
	<-ran
	mu.Lock()
	if len(got) != 3 || got[0] != `{"source":"test"}` {
		t.Errorf("payloads %q", got)
	}
	mu.Unlock()

	_, err = c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("nope"), InvocationType: lambdatypes.InvocationTypeEvent})
	var nf *lambdatypes.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Errorf("unknown function: %v, want ResourceNotFoundException", err)
	}
	out, err = c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("provisioner"), InvocationType: lambdatypes.InvocationTypeDryRun})
	if err != nil || out.StatusCode != 204 {
		t.Errorf("DryRun: %+v %v", out, err)
	}
	if calls := e.Calls(); calls[len(calls)-1].Service != "lambda" || calls[len(calls)-1].Action != "Invoke" {
		t.Errorf("last call %+v", calls[len(calls)-1])
	}
}

// TestLambdaAsyncAtLeastOnce: with duplicates on, an event may run twice,
// as Lambda's at-least-once delivery does.
func TestLambdaAsyncAtLeastOnce(t *testing.T) {
	h := DefaultHostility()
	h.AsyncDuplicateRate, h.ThrottleRate, h.ServerErrorRate = 1, 0, 0
	e, _ := newTestEmulator(t, calm(h))
	c := lambda.NewFromConfig(sdkConfig(t, e, carefulAttempts))
	var mu sync.Mutex
	runs := 0
	e.RegisterFunction("provisioner", func(context.Context, []byte) ([]byte, error) {
		mu.Lock()
		runs++
		mu.Unlock()
		return nil, nil
	})
	if _, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("provisioner"), InvocationType: lambdatypes.InvocationTypeEvent}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := runs
		mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs, want 2", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if e.HostileEvents()[EventAsyncDuplicate] != 1 {
		t.Errorf("hostile events %v", e.HostileEvents())
	}
}
