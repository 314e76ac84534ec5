// Package emulatortest holds test helpers around the AWS emulator: a fresh
// emulator joined to a kubetest cluster, and the leak check every scenario should end with.
package emulatortest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/aws/awsconfig"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/emulator"
)

// New starts an emulator for one test, joined to clients' cluster when
// clients is not nil, and closes it when the test ends. With a fake clock
// (clk not nil) the test drives time with clk.Step and e.Step.
func New(t testing.TB, clients *kube.Clients, clk clock.PassiveClock, mutate ...func(*emulator.Config)) *emulator.Emulator {
	t.Helper()
	cfg := emulator.Config{Clock: clk, Kube: clients}
	for _, m := range mutate {
		m(&cfg)
	}
	e, err := emulator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if clients != nil {
		if err := e.ConnectCluster(clients, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// FakeClock is a fake clock at the current wall time (whole seconds), the
// start that keeps presigned EKS tokens valid.
func FakeClock() *testingclock.FakeClock {
	return testingclock.NewFakeClock(time.Now().UTC().Truncate(time.Second))
}

// AWSConfig is an SDK configuration for the emulator as a named identity
// (operator if empty), with one attempt unless attempts says otherwise.
func AWSConfig(t testing.TB, e *emulator.Emulator, identity string, attempts int) aws.Config {
	t.Helper()
	if identity == "" {
		identity = "operator"
	}
	if attempts <= 0 {
		attempts = 1
	}
	cfg, err := e.AWSConfig(identity, attempts)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// CarefulAttempts is how many attempts CarefulAWSConfig makes: enough to
// outlast a throttling burst (up to 4 calls) followed by a server error or
// a lost answer, which the emulator's default hostility produces at random.
const CarefulAttempts = 10

// CarefulAWSConfig is an SDK configuration for the emulator as a named
// identity (operator if empty) that retries what default hostility throws
// at any call (throttles, server errors, lost answers), as production
// clients must, with backoffs of at most 20ms: the standard retryer's
// 20s would make tests crawl, and the emulator does not care how fast it
// is retried.
func CarefulAWSConfig(t testing.TB, e *emulator.Emulator, identity string) aws.Config {
	t.Helper()
	cfg := AWSConfig(t, e, identity, CarefulAttempts)
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = CarefulAttempts
			o.MaxBackoff = 20 * time.Millisecond
			o.RateLimiter = ratelimit.None
		})
	}
	return cfg
}

// Settle moves a fake clock past the longest eventual-consistency window
// of the emulator's hostility (new instances, templates and fleets
// unknown, stale states and tags) and runs the world step: from then on
// Describe answers show everything done before. It is what a careful
// client's "retry until I see my own write" amounts to on a fake clock.
func Settle(t testing.TB, e *emulator.Emulator, clk *testingclock.FakeClock) {
	t.Helper()
	cfg := e.Config()
	h := cfg.Hostility
	Step(t, e, clk, max(cfg.DescribeLag+h.DescribeLagMax, h.TerminatedStaleMax, h.TagLagMax, h.LaunchTemplateLagMax, h.FleetLagMax))
}

// AssertNoLeaks fails the test if an instance that is neither terminated
// nor shutting down is referenced by no NodeClaim, listing each with its tags.
func AssertNoLeaks(t testing.TB, e *emulator.Emulator, clients *kube.Clients) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leaks, err := e.Leaks(ctx, clients)
	if err != nil {
		t.Fatalf("checking for leaked instances: %v", err)
	}
	if len(leaks) == 0 {
		return
	}
	var b strings.Builder
	for _, i := range leaks {
		fmt.Fprintf(&b, "\n  %s %s %s %s %s tags=%v", i.ID, i.InstanceType, i.Zone, i.CapacityType, i.State, i.Tags)
	}
	t.Errorf("%d leaked instance(s), referenced by no NodeClaim:%s", len(leaks), b.String())
}

// Step moves a fake clock by d and runs the emulator's world step.
func Step(t testing.TB, e *emulator.Emulator, clk *testingclock.FakeClock, d time.Duration) {
	t.Helper()
	clk.Step(d)
	if err := e.Step(context.Background()); err != nil {
		t.Fatalf("emulator step: %v", err)
	}
}

// SDKClients starts an emulator of its own (no cluster) and loads the
// functions' real SDK clients against it through AWS_ENDPOINT_URL, as in
// local mode, signed as identity. configure, if any, changes the
// emulator's config first (a test that calms a hostility says why).
func SDKClients(t *testing.T, seed uint64, identity string, configure ...func(*emulator.Config)) (*emulator.Emulator, *awsconfig.Clients) {
	t.Helper()
	cfg := emulator.Config{Seed: seed}
	for _, f := range configure {
		f(&cfg)
	}
	emu, err := emulator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	id, _ := emu.Identity(identity)
	t.Setenv("AWS_ENDPOINT_URL", emu.URL())
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_CA_BUNDLE", "") // the emulator speaks plain HTTP
	clients, err := awsconfig.LoadClients(context.Background(), emu.Region(),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id.AccessKeyID, id.SecretAccessKey, "")),
		config.WithHTTPClient(emulator.HTTPClient()))
	if err != nil {
		t.Fatal(err)
	}
	return emu, clients
}
