// Command bootstrap is the Lambda function behind Karpless's CloudFormation custom
// resource: it wires config and clients to bootstrap.Handler.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"

	"github.com/karpless/karpless/shared/aws/awsconfig"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/eksauth"
	"github.com/karpless/karpless/shared/ticks/bootstrap"
)

// responseTimeout bounds the PUT of the answer to CloudFormation's S3 URL;
// it is shorter than timing.BootstrapMargin, so a hung PUT fails (and Lambda
// retries the idempotent request) before the function times out.
const responseTimeout = 15 * time.Second

func main() {
	ctx := context.Background()
	cfg, cfgErr := config.FromEnv()
	if cfgErr == nil {
		cfgErr = errors.Join(cfg.Validate(), cfg.ValidateBootstrap())
	}
	log := record.NewLogger(os.Stderr, cfg.LogLevel)
	aws, awsErr := awsconfig.Load(ctx, cfg.Region)

	// A broken setup must still answer CloudFormation (FAILED on Create and
	// Update, SUCCESS on Delete), so it is reported through connect rather
	// than by exiting, which would leave the stack waiting. Without its
	// stack's ID the handler answers nothing at all.
	setupErr := errors.Join(cfgErr, awsErr)
	connect := func(context.Context) (*kube.Clients, error) {
		return nil, fmt.Errorf("function configuration: %w", setupErr)
	}
	var stacks bootstrap.StackReader
	if setupErr == nil {
		connect = connector(cfg, aws)
		stacks = cloudformation.NewFromConfig(aws)
	} else {
		log.Error("invalid configuration", "error", setupErr.Error())
	}

	lambda.Start(bootstrap.Handler(bootstrap.HandlerConfig{
		Options:   bootstrap.OptionsFrom(cfg),
		StackID:   cfg.StackID,
		Region:    cfg.Region,
		Stacks:    stacks,
		HTTP:      &http.Client{Timeout: responseTimeout},
		Connect:   connect,
		Log:       log,
		LogStream: lambdacontext.LogStreamName,
	}))
}

// connector builds the Kubernetes clients on first use and reuses them in
// a warm container. The REST config comes from eksauth: EKS tokens for the
// function's role, whose access entry has cluster-admin.
func connector(cfg config.Config, aws sdkaws.Config) func(context.Context) (*kube.Clients, error) {
	clients := awsconfig.NewClients(aws)
	src := eksauth.SourceFromEnv(os.LookupEnv)
	src.EKS = clients.EKS
	src.STS = eksauth.NewPresigner(clients.STS)
	src.QPS, src.Burst = float32(cfg.KubeClientQPS), cfg.KubeClientBurst
	cluster := eksauth.New(src)
	var kc *kube.Clients
	return func(ctx context.Context) (*kube.Clients, error) {
		if kc != nil {
			return kc, nil
		}
		rc, err := cluster.RESTConfig(ctx)
		if err != nil {
			return nil, err
		}
		c, err := kube.NewClients(rc)
		if err != nil {
			return nil, err
		}
		kc = c
		return c, nil
	}
}
