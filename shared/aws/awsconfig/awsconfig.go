// Package awsconfig loads the AWS SDK configuration every function shares and
// builds the service clients from it, with retries bounded for short Lambda runs.
package awsconfig

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/arczonalshift"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// Retry policy. A tick has about a minute; a call that is still throttled
// after MaxAttempts is better left to the next tick than allowed to eat the
// deadline. The client-side retry quota is off: in a short-lived container it
// only turns a burst of throttles into immediate "quota exceeded" failures.
const (
	MaxAttempts = 4
	MaxBackoff  = 3 * time.Second
	// HTTPTimeout bounds one HTTP attempt (connect to last byte); the
	// caller's context bounds the whole call.
	HTTPTimeout = 20 * time.Second
)

// NewRetryer is the retryer Load installs: standard retry classification
// (throttles, 5xx, transient network errors), bounded attempts and backoff.
func NewRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = MaxAttempts
		o.MaxBackoff = MaxBackoff
		o.RateLimiter = ratelimit.None
	})
}

// Load builds the shared aws.Config for region ("" keeps whatever the
// environment says, e.g. AWS_REGION). It reads the usual sources through
// config.LoadDefaultConfig: Lambda's environment credentials, shared config
// files, and AWS_ENDPOINT_URL (or per-service AWS_ENDPOINT_URL_EC2, ..._SSM,
// ...), which points every client at the local emulator in tests and in
// `karpless local`. Extra options are applied after the defaults, so tests can
// pass static credentials or a retryer of their own.
//
// Build the Config and Clients once per warm container and share them across
// invocations: the clients are safe for concurrent use and keep no per-call data.
func Load(ctx context.Context, region string, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(NewRetryer),
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(HTTPTimeout)),
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, append(opts, optFns...)...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: no region (set AWS_REGION)")
	}
	return cfg, nil
}

// FromLookup turns what a function's environment says of AWS into explicit
// options, so that a caller whose environment is not the process's (the
// CLI's local ticks) need not write it into the process: the endpoint
// (AWS_ENDPOINT_URL), static credentials (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) and AWS_EC2_METADATA_DISABLED.
// What lookup does not set is left to the SDK's default chain.
func FromLookup(lookup func(string) (string, bool)) []func(*config.LoadOptions) error {
	get := func(k string) string { v, _ := lookup(k); return v }
	var opts []func(*config.LoadOptions) error
	if url := get("AWS_ENDPOINT_URL"); url != "" {
		opts = append(opts, config.WithBaseEndpoint(url))
	}
	if id, secret := get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, get("AWS_SESSION_TOKEN"))))
	}
	if get("AWS_EC2_METADATA_DISABLED") == "true" {
		opts = append(opts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	return opts
}

// Clients are the service clients Karpless uses, built from one aws.Config.
type Clients struct {
	Config aws.Config
	EC2    *ec2.Client
	SSM    *ssm.Client
	IAM    *iam.Client
	EKS    *eks.Client
	STS    *sts.Client
	SQS    *sqs.Client
	// Lambda starts the provisioner from the watcher.
	Lambda *lambda.Client
	// PriceList reads on-demand prices; nil where the partition has no
	// Price List API (GovCloud).
	PriceList *pricing.Client
	// ARCZonalShift reads the cluster's zonal shifts (ENABLE_ZONAL_SHIFT).
	ARCZonalShift *arczonalshift.Client
}

// NewClients builds every client from cfg.
func NewClients(cfg aws.Config) *Clients {
	c := &Clients{
		Config: cfg,
		EC2:    ec2.NewFromConfig(cfg),
		SSM:    ssm.NewFromConfig(cfg),
		IAM:    iam.NewFromConfig(cfg),
		EKS:    eks.NewFromConfig(cfg),
		STS:    sts.NewFromConfig(cfg),
		SQS:    sqs.NewFromConfig(cfg),
		Lambda: lambda.NewFromConfig(cfg),

		ARCZonalShift: arczonalshift.NewFromConfig(cfg),
	}
	if r := PriceListRegion(cfg.Region); r != "" {
		c.PriceList = pricing.NewFromConfig(cfg, func(o *pricing.Options) { o.Region = r })
	}
	return c
}

// PriceListRegion is where a region's prices are asked for: the Price List
// API answers in a few regions only (the reference provider's choice).
// GovCloud has none: "" there, and the build's prices stand in.
func PriceListRegion(region string) string {
	switch {
	case strings.HasPrefix(region, "us-gov-"):
		return ""
	case strings.HasPrefix(region, "cn-"):
		return "cn-northwest-1"
	case strings.HasPrefix(region, "ap-"):
		return "ap-south-1"
	case strings.HasPrefix(region, "eu-"):
		return "eu-central-1"
	}
	return "us-east-1"
}

// LoadClients is Load followed by NewClients.
func LoadClients(ctx context.Context, region string, optFns ...func(*config.LoadOptions) error) (*Clients, error) {
	cfg, err := Load(ctx, region, optFns...)
	if err != nil {
		return nil, err
	}
	return NewClients(cfg), nil
}
