package awsconfig

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/karpless/karpless/shared/aws/awserr"
)

// TestLoadHonoursEndpointAndBoundsRetries checks that AWS_ENDPOINT_URL reaches
// the clients and that a throttled call stops after MaxAttempts.
func TestLoadHonoursEndpointAndBoundsRetries(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>r1</RequestId></ErrorResponse>`))
	}))
	defer srv.Close()
	t.Setenv("AWS_ENDPOINT_URL", srv.URL)
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")

	c, err := LoadClients(context.Background(), "us-west-2",
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")))
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.Region != "us-west-2" {
		t.Fatalf("region = %q", c.Config.Region)
	}
	_, err = c.STS.GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	if !awserr.IsThrottle(err) {
		t.Fatalf("want a throttling error, got %v", err)
	}
	if got := calls.Load(); got != MaxAttempts {
		t.Fatalf("attempts = %d, want %d", got, MaxAttempts)
	}
}

func TestLoadNeedsRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	if _, err := Load(context.Background(), ""); err == nil {
		t.Fatal("want an error without a region")
	}
	cfg, err := Load(context.Background(), "eu-west-1", config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	if err != nil || cfg.Region != "eu-west-1" {
		t.Fatalf("cfg.Region=%q err=%v", cfg.Region, err)
	}
}

// TestFromLookup: a caller's environment reaches the SDK's configuration
// without passing through the process's.
func TestFromLookup(t *testing.T) {
	env := map[string]string{
		"AWS_ENDPOINT_URL": "http://127.0.0.1:4566", "AWS_ACCESS_KEY_ID": "AKIDLOOKUP",
		"AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token", "AWS_EC2_METADATA_DISABLED": "true",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDPROCESS")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "other")
	cfg, err := Load(context.Background(), "us-west-2", FromLookup(lookup)...)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != env["AWS_ENDPOINT_URL"] {
		t.Errorf("endpoint %v; want %s", cfg.BaseEndpoint, env["AWS_ENDPOINT_URL"])
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if creds.AccessKeyID != "AKIDLOOKUP" || creds.SessionToken != "token" {
		t.Errorf("credentials %s/%s; want the lookup's, not the process's", creds.AccessKeyID, creds.SessionToken)
	}
	if none := FromLookup(func(string) (string, bool) { return "", false }); len(none) != 0 {
		t.Errorf("%d options from an empty environment; want none (the SDK's default chain)", len(none))
	}
}

func TestPriceListRegion(t *testing.T) {
	for region, want := range map[string]string{
		"us-east-1": "us-east-1", "us-west-2": "us-east-1", "eu-west-3": "eu-central-1", "ap-northeast-1": "ap-south-1",
		"cn-north-1": "cn-northwest-1", "us-gov-west-1": "", "sa-east-1": "us-east-1", "me-central-1": "us-east-1",
	} {
		if got := PriceListRegion(region); got != want {
			t.Errorf("%s: %q, want %q", region, got, want)
		}
	}
}
