package emulator

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	testingclock "k8s.io/utils/clock/testing"
)

// t0 is the fake clock's start, near the wall clock so that presigned
// tokens (signed with the real time) are current.
var t0 = time.Now().UTC().Truncate(time.Second)

func newTestEmulator(t testing.TB, mutate ...func(*Config)) (*Emulator, *testingclock.FakeClock) {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	cfg := Config{Clock: clk, Seed: 42}
	// LOCALAWS_TEST_SEED runs the tests under another seed: a test that
	// passes for one seed only is not robust against hostility's random
	// choices (for s in $(seq 1 40); do LOCALAWS_TEST_SEED=$s go test ...).
	if v := os.Getenv("LOCALAWS_TEST_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil || seed == 0 {
			t.Fatalf("LOCALAWS_TEST_SEED=%q: want a positive integer", v)
		}
		cfg.Seed = seed
	}
	for _, m := range mutate {
		m(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, clk
}

// carefulAttempts is how many attempts a careful client makes: enough to
// outlast a throttling burst (up to 4 calls) followed by a server error or
// a lost answer, which the emulator's default hostility produces at random.
const carefulAttempts = 10

// sdkConfig talks to the emulator as the operator, with one attempt unless
// retries are the point. Retries back off for at most 20ms: the standard
// retryer's 20s would make throttled tests crawl, and the emulator does
// not care how fast it is retried.
func sdkConfig(t testing.TB, e *Emulator, attempts int) aws.Config {
	t.Helper()
	cfg, err := e.AWSConfig("operator", attempts)
	if err != nil {
		t.Fatal(err)
	}
	if attempts <= 1 {
		cfg.RetryMaxAttempts = 1
		return cfg
	}
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = attempts
			o.MaxBackoff = 20 * time.Millisecond
			o.RateLimiter = ratelimit.None
		})
	}
	return cfg
}

// ec2Client is a careful client: it retries what the emulator's hostility
// throws at every call (throttles, server errors, lost answers), as any
// production client must.
func ec2Client(t testing.TB, e *Emulator) *ec2.Client {
	return ec2.NewFromConfig(sdkConfig(t, e, carefulAttempts))
}

// calm returns a Config mutation with hostility h, for tests that switch
// behaviours off (and say why).
func calm(h Hostility) func(*Config) {
	return func(c *Config) { c.Hostility = &h }
}

// fakeClock is the emulator's fake clock in tests.
func fakeClock(t testing.TB, e *Emulator) *testingclock.FakeClock {
	t.Helper()
	clk, ok := e.clock.(*testingclock.FakeClock)
	if !ok {
		t.Fatalf("the emulator runs on %T, not a fake clock", e.clock)
	}
	return clk
}

// step moves the fake clock by d and runs the world.
func step(t testing.TB, e *Emulator, d time.Duration) {
	t.Helper()
	fakeClock(t, e).Step(d)
	if err := e.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// longestLag is the longest any eventually consistent answer of the
// emulator's hostility stays stale.
func longestLag(e *Emulator) time.Duration {
	h := e.Config().Hostility
	return max(e.cfg.DescribeLag+h.DescribeLagMax, h.TerminatedStaleMax, h.TagLagMax, h.LaunchTemplateLagMax, h.FleetLagMax)
}

// settle waits, on the fake clock, until every eventually consistent
// answer has caught up with what was done: what a careful client does by
// retrying until it sees its own writes.
func settle(t testing.TB, e *Emulator) {
	t.Helper()
	step(t, e, longestLag(e))
}

// eventually retries f, stepping the fake clock by half a second between
// tries, until it succeeds or the longest lag has passed; it returns f's
// last error.
func eventually(t testing.TB, e *Emulator, f func() error) error {
	t.Helper()
	deadline := fakeClock(t, e).Now().Add(longestLag(e))
	for {
		err := f()
		if err == nil || fakeClock(t, e).Now().After(deadline) {
			return err
		}
		step(t, e, 500*time.Millisecond)
	}
}

// errorCode is the API error code of err, "" if none.
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if got := errorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

// launchTemplate creates an AL2023 launch template for amd64 and returns its name.
func createLT(t testing.TB, c *ec2.Client, e *Emulator, name string, mutate ...func(*ec2types.RequestLaunchTemplateData)) string {
	t.Helper()
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:          aws.String(imageFor(t, e, "AL2023", "x86_64", "standard")),
		SecurityGroupIds: []string{e.SecurityGroups()[0].ID},
		UserData:         aws.String(base64.StdEncoding.EncodeToString([]byte(al2023UserData))),
		TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: aws.String("from-lt"), Value: aws.String("yes")}}},
		},
	}
	for _, m := range mutate {
		m(data)
	}
	_, err := c.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: data,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
			{Key: aws.String("eks:eks-cluster-name"), Value: aws.String(e.ClusterName())},
		}}},
	})
	if err != nil {
		t.Fatalf("CreateLaunchTemplate: %v", err)
	}
	// A new template is not found by name at once: wait until it is, as
	// Karpenter does by retrying the launch.
	err = eventually(t, e, func() error {
		_, err := c.DescribeLaunchTemplates(context.Background(), &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
		return err
	})
	if err != nil {
		t.Fatalf("launch template %s never became visible: %v", name, err)
	}
	return name
}

// imageFor is the current image of a family, arch and variant.
func imageFor(t testing.TB, e *Emulator, family, arch, variant string) string {
	t.Helper()
	var best Image
	for _, im := range e.Images() {
		if im.Family == family && im.Arch == arch && im.Variant == variant && im.CreationDate.After(best.CreationDate) {
			best = im
		}
	}
	if best.ID == "" {
		t.Fatalf("no %s %s %s image", family, arch, variant)
	}
	return best.ID
}

// subnetIn returns the private subnet of a zone.
func subnetIn(t testing.TB, e *Emulator, zone string) string {
	t.Helper()
	for _, s := range e.Subnets() {
		if s.Zone == zone && s.Tags["karpenter.sh/discovery"] != "" {
			return s.ID
		}
	}
	t.Fatalf("no subnet in %s", zone)
	return ""
}

const al2023UserData = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

# Karpenter Generated NodeConfig
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
metadata: {}
spec:
  cluster:
    apiServerEndpoint: https://127.0.0.1:6443
    certificateAuthority: Y2E=
    cidr: 10.100.0.0/16
    name: karpless-local
  containerd: {}
  instance:
    localStorage: {}
  kubelet:
    config:
      clusterDNS:
      - 10.100.0.10
      maxPods: 29
      registerWithTaints:
      - effect: NoExecute
        key: karpenter.sh/unregistered
    flags:
    - --node-labels="karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default"

--//--
`
