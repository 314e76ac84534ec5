package shadow

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// TestGuardAWSEveryOperation calls every operation of every AWS client
// Karpless builds (EC2, IAM, SQS, Lambda, SSM, EKS, STS, Pricing) through a
// guarded config: each one AllowedAWS refuses fails with ErrRefused and
// never reaches the endpoint; every other one is not refused. Then the
// calls shadow mode must never make, and the reads it needs, by name.
func TestGuardAWSEveryOperation(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	cfg := aws.Config{
		Region: "us-west-2", BaseEndpoint: aws.String(srv.URL), HTTPClient: srv.Client(),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
	}
	GuardAWS(&cfg)
	clients := []struct {
		service string
		client  any
	}{
		{ec2.ServiceID, ec2.NewFromConfig(cfg)}, {iam.ServiceID, iam.NewFromConfig(cfg)}, {sqs.ServiceID, sqs.NewFromConfig(cfg)},
		{lambda.ServiceID, lambda.NewFromConfig(cfg)}, {ssm.ServiceID, ssm.NewFromConfig(cfg)}, {eks.ServiceID, eks.NewFromConfig(cfg)},
		{sts.ServiceID, sts.NewFromConfig(cfg)}, {pricing.ServiceID, pricing.NewFromConfig(cfg)},
	}
	ctxType := reflect.TypeFor[context.Context]()
	result := map[string]bool{} // "EC2 CreateFleet" -> refused
	for _, c := range clients {
		v := reflect.ValueOf(c.client)
		ops := 0
		for i := range v.NumMethod() {
			m, mt := v.Method(i), v.Type().Method(i)
			ft := m.Type()
			if ft.NumIn() != 3 || ft.In(0) != ctxType || ft.In(1).Kind() != reflect.Pointer || !ft.IsVariadic() || ft.NumOut() != 2 {
				continue // not an operation (Options)
			}
			ops++
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			before := hits.Load()
			out := m.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.New(ft.In(1).Elem())})
			cancel()
			err, _ := out[1].Interface().(error)
			reached := hits.Load() > before
			refused := errors.Is(err, ErrRefused)
			result[c.service+" "+mt.Name] = refused
			switch allowed := AllowedAWS(c.service, mt.Name); {
			case allowed && refused:
				t.Errorf("%s %s: allowed, but refused: %v", c.service, mt.Name, err)
			case !allowed && (!refused || reached):
				t.Errorf("%s %s: not allowed, but error %v, reached the endpoint %v", c.service, mt.Name, err, reached)
			}
		}
		if ops < 5 {
			t.Errorf("%s: only %d operations found", c.service, ops)
		}
	}
	// The reads did go out (most fail on the empty answer, which is fine).
	if n := hits.Load(); n < 200 {
		t.Errorf("only %d calls reached the endpoint", n)
	}
	for _, op := range []string{
		"EC2 CreateFleet", "EC2 RunInstances", "EC2 TerminateInstances", "EC2 CreateTags", "EC2 DeleteTags",
		"EC2 CreateLaunchTemplate", "EC2 DeleteLaunchTemplate", "EC2 ModifyInstanceAttribute", "EC2 StopInstances",
		"IAM CreateInstanceProfile", "IAM AddRoleToInstanceProfile", "IAM RemoveRoleFromInstanceProfile",
		"IAM DeleteInstanceProfile", "IAM TagInstanceProfile", "IAM PutRolePolicy",
		"SQS DeleteMessage", "SQS DeleteMessageBatch", "SQS ChangeMessageVisibility", "SQS ReceiveMessage", "SQS SendMessage",
		"SSM PutParameter", "Lambda UpdateFunctionConfiguration", "Lambda PutFunctionConcurrency", "EKS CreateAccessEntry",
	} {
		if refused, ok := result[op]; !ok || !refused {
			t.Errorf("%s: refused %v (known %v)", op, refused, ok)
		}
	}
	for _, op := range []string{
		"EC2 DescribeInstances", "EC2 DescribeInstanceTypes", "EC2 DescribeSpotPriceHistory", "EC2 DescribeInstanceStatus",
		"EC2 DescribeLaunchTemplates", "EC2 DescribeCapacityReservations", "IAM GetInstanceProfile", "IAM ListInstanceProfiles",
		"SSM GetParameter", "EKS DescribeCluster", "Pricing GetProducts", "Lambda Invoke", "STS GetCallerIdentity", "STS AssumeRoleWithWebIdentity",
	} {
		if refused, ok := result[op]; !ok || refused {
			t.Errorf("%s: refused %v (known %v)", op, refused, ok)
		}
	}
}
