// Command bootstrap is the Lambda function behind Karpless's CloudFormation custom
// resource: it wires config and clients to bootstrap.Handler inside cfn.LambdaWrap.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/karpless/karpless/shared/aws/awsconfig"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/eksauth"
	"github.com/karpless/karpless/shared/ticks/bootstrap"
)

// responseTimeout bounds the PUT of the answer to CloudFormation's S3 URL,
// which cfn.LambdaWrap sends with http.DefaultClient; it is shorter than
// timing.BootstrapMargin, so a hung PUT fails (and Lambda retries the
// idempotent request) before the function times out.
const responseTimeout = 15 * time.Second

func main() {
	http.DefaultClient.Timeout = responseTimeout

	cfg, cfgErr := config.FromEnv()
	if cfgErr == nil {
		cfgErr = cfg.Validate()
	}
	log := record.NewLogger(os.Stderr, cfg.LogLevel)

	// A broken setup must still answer CloudFormation (FAILED on Create and
	// Update, SUCCESS on Delete), so it is reported through connect rather
	// than by exiting, which would leave the stack waiting.
	connect := func(context.Context) (*kube.Clients, error) {
		return nil, fmt.Errorf("function configuration: %w", cfgErr)
	}
	if cfgErr == nil {
		connect = connector(cfg)
	} else {
		log.Error("invalid configuration", "error", cfgErr.Error())
	}

	lambda.Start(cfn.LambdaWrap(bootstrap.Handler(bootstrap.HandlerConfig{
		ClusterName: cfg.ClusterName,
		Namespace:   cfg.Namespace,
		Connect:     connect,
		Log:         log,
		LogStream:   lambdacontext.LogStreamName,
	})))
}

// connector builds the Kubernetes clients on first use and reuses them in
// a warm container. The REST config comes from eksauth: EKS tokens for the
// function's role, whose access entry has cluster-admin.
func connector(cfg config.Config) func(context.Context) (*kube.Clients, error) {
	var cluster *eksauth.Cluster
	var clients *kube.Clients
	return func(ctx context.Context) (*kube.Clients, error) {
		if clients != nil {
			return clients, nil
		}
		if cluster == nil {
			aws, err := awsconfig.LoadClients(ctx, cfg.Region)
			if err != nil {
				return nil, err
			}
			src := eksauth.SourceFromEnv(os.LookupEnv)
			src.EKS = aws.EKS
			src.STS = eksauth.NewPresigner(aws.STS)
			cluster = eksauth.New(src)
		}
		rc, err := cluster.RESTConfig(ctx)
		if err != nil {
			return nil, err
		}
		c, err := kube.NewClients(rc)
		if err != nil {
			return nil, err
		}
		clients = c
		return c, nil
	}
}
