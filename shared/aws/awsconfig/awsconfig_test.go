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
