package pricing

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/core/catalog"
)

type fakeEC2 struct {
	calls int
	now   time.Time
}

func (f *fakeEC2) DescribeInstanceTypeOfferings(_ context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	f.calls++
	if aws.ToString(in.NextToken) == "" {
		return &ec2.DescribeInstanceTypeOfferingsOutput{NextToken: aws.String("p2"), InstanceTypeOfferings: []ec2types.InstanceTypeOffering{
			{InstanceType: "m5.large", Location: aws.String("us-west-2b")},
			{InstanceType: "m5.large", Location: aws.String("us-west-2a")},
		}}, nil
	}
	return &ec2.DescribeInstanceTypeOfferingsOutput{InstanceTypeOfferings: []ec2types.InstanceTypeOffering{
		{InstanceType: "c5.large", Location: aws.String("us-west-2a")},
	}}, nil
}

func (f *fakeEC2) DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	f.calls++
	return &ec2.DescribeSpotPriceHistoryOutput{SpotPriceHistory: []ec2types.SpotPrice{
		{InstanceType: "m5.large", AvailabilityZone: aws.String("us-west-2a"), SpotPrice: aws.String("0.040"), Timestamp: aws.Time(f.now.Add(-time.Hour))},
		{InstanceType: "m5.large", AvailabilityZone: aws.String("us-west-2a"), SpotPrice: aws.String("0.035"), Timestamp: aws.Time(f.now.Add(-time.Minute))},
		{InstanceType: "m5.large", AvailabilityZone: aws.String("us-west-2b"), SpotPrice: aws.String("bogus"), Timestamp: aws.Time(f.now)},
	}}, nil
}

func (f *fakeEC2) DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	f.calls++
	return &ec2.DescribeInstanceTypesOutput{InstanceTypes: []ec2types.InstanceTypeInfo{m5large}}, nil
}

var m5large = ec2types.InstanceTypeInfo{
	InstanceType:  "m5.large",
	Hypervisor:    ec2types.InstanceTypeHypervisorNitro,
	ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664}, Manufacturer: aws.String("Intel"), SustainedClockSpeedInGhz: aws.Float64(3.1)},
	VCpuInfo:      &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(2)},
	MemoryInfo:    &ec2types.MemoryInfo{SizeInMiB: aws.Int64(8192)},
	NetworkInfo: &ec2types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(3), Ipv4AddressesPerInterface: aws.Int32(10), DefaultNetworkCardIndex: aws.Int32(0),
		NetworkCards: []ec2types.NetworkCardInfo{{NetworkCardIndex: aws.Int32(0), MaximumNetworkInterfaces: aws.Int32(3)}}},
}

func TestBookIsReadFromEC2OnceAndReused(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	api := &fakeEC2{now: clk.Now()}
	cms := fake.NewClientset().CoreV1()
	src := &Source{EC2: api, ConfigMap: cms, Namespace: "kube-system", Clock: clk}
	b, err := src.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Offered("m5.large", "us-west-2a") || !b.Offered("c5.large", "us-west-2a") || b.Offered("c5.large", "us-west-2b") {
		t.Errorf("offerings across pages: %v", b.Zones)
	}
	if p, ok := b.SpotPrice("m5.large", "us-west-2a"); !ok || p != 0.035 {
		t.Errorf("spot price = %v %v, want the newest quote 0.035", p, ok)
	}
	if _, ok := b.SpotPrice("m5.large", "us-west-2b"); ok {
		t.Error("an unparseable price was kept")
	}
	if _, err := src.Get(ctx); err != nil { // the live part, read on the next tick
		t.Fatal(err)
	}
	calls := api.calls
	// A later, cold invocation reads the ConfigMap instead of EC2.
	clk.Step(5 * time.Minute)
	again := &Source{EC2: api, ConfigMap: cms, Namespace: "kube-system", Clock: clk}
	if _, err := again.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if api.calls != calls {
		t.Errorf("a fresh book was fetched from EC2 again (%d calls, want %d)", api.calls, calls)
	}
	clk.Step(6 * time.Minute)
	if _, err := again.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if api.calls == calls {
		t.Error("a stale book was not refreshed")
	}
}

// failingEC2 answers every call with a throttling error.
type failingEC2 struct{ *fakeEC2 }

func (failingEC2) DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	return nil, errors.New("RequestLimitExceeded: Request limit exceeded")
}

// TestStaleBookWhenEC2Fails: a refresh that fails (a throttled call) falls
// back to the last book rather than failing the pass; with no book at all
// the build and estimated spot prices stand in (as Karpenter's static
// prices do), the failure reported and nothing saved.
func TestStaleBookWhenEC2Fails(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	cms := fake.NewClientset().CoreV1()
	cold, err := (&Source{EC2: failingEC2{&fakeEC2{}}, ConfigMap: cms, Namespace: "kube-system", Clock: clk}).Get(ctx)
	if err != nil || cold.Spot != nil || cold.Zones != nil || !cold.ReadFailed() {
		t.Fatalf("no book and EC2 failing: %+v %v, want an empty book that says it failed", cold, err)
	}
	embedded, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	if cat, fallback := cold.Catalog(embedded); cat != embedded || len(fallback) == 0 || !strings.Contains(fallback[0], "RequestLimitExceeded") {
		t.Fatalf("fallback %v", fallback)
	}
	if _, err := (&Source{EC2: &fakeEC2{now: clk.Now()}, ConfigMap: cms, Namespace: "kube-system", Clock: clk}).Get(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour)
	b, err := (&Source{EC2: failingEC2{&fakeEC2{}}, ConfigMap: cms, Namespace: "kube-system", Clock: clk}).Get(ctx)
	if err != nil {
		t.Fatalf("a stale book should stand in while EC2 fails: %v", err)
	}
	if p, ok := b.SpotPrice("m5.large", "us-west-2a"); !ok || p != 0.035 {
		t.Errorf("stale book spot price = %v %v", p, ok)
	}
}

// TestSourcesShareACache: Sources built afresh for each invocation of one
// warm container decode a saved book once when they share a Cache, and a
// Source without one decodes it again.
func TestSourcesShareACache(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	api := &fakeEC2{now: clk.Now()}
	cms := fake.NewClientset().CoreV1()
	writer := &Source{EC2: api, ConfigMap: cms, Namespace: "kube-system", Clock: clk}
	for range 2 { // offerings and spot prices, then the live part
		if _, err := writer.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	warm := &Cache{}
	get := func(c *Cache) *Book {
		t.Helper()
		b, err := (&Source{EC2: api, ConfigMap: cms, Namespace: "kube-system", Clock: clk, Cache: c}).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	get(warm) // the container's first invocation decodes the book
	first, second := get(warm), get(warm)
	if first != second {
		t.Error("two Sources sharing a Cache decoded the same ConfigMap version twice")
	}
	if cold := get(nil); cold == first {
		t.Error("a Source without a Cache reused another container's book")
	}
}
