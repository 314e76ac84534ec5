package localaws

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
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

// sdkConfig talks to the emulator as the operator, with one attempt
// unless retries are the point.
func sdkConfig(t testing.TB, e *Emulator, attempts int) aws.Config {
	t.Helper()
	cfg, err := e.AWSConfig("operator", attempts)
	if err != nil {
		t.Fatal(err)
	}
	if attempts <= 1 {
		cfg.RetryMaxAttempts = 1
	}
	return cfg
}

func ec2Client(t testing.TB, e *Emulator) *ec2.Client {
	return ec2.NewFromConfig(sdkConfig(t, e, 1))
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
