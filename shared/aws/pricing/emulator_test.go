package pricing

import (
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/pricing"

	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/emulator/emulatortest"
)

// TestLiveReadThroughTheEmulator reads the emulated eu-central-1 through
// the real SDK clients, with the emulator's default hostility (throttles,
// server errors) retried as the functions retry: every type the build
// knows comes back with the same labels and allocatable, a type the build
// does not know comes back too, and every price is the region's, not the
// build's. It logs what one refresh costs.
func TestLiveReadThroughTheEmulator(t *testing.T) {
	ctx := context.Background()
	emu := emulatortest.New(t, nil, nil, func(c *emulator.Config) { c.Region = "eu-central-1" })
	cfg := emulatortest.CarefulAWSConfig(t, emu, "provisioner")
	read := &kube.ByteCounter{}
	cfg.HTTPClient = &http.Client{Transport: kube.CountBytes(http.DefaultTransport, read)}
	build, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	facts, _, typesTraffic, err := typePages(ctx, ec2.NewFromConfig(cfg), "", 0)
	typesTook := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	typeBytes := read.Total()
	start = time.Now()
	prices := map[string]float64{}
	_, _, priceTraffic, err := pricePages(ctx, pricing.NewFromConfig(cfg), "eu-central-1", 0, "", 0, prices)
	pricesTook := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	priceBytes := read.Total() - typeBytes
	t.Logf("one refresh: DescribeInstanceTypes %d pages, %d KiB, %s; GetProducts %d pages, %d KiB (price documents %d KiB), %s",
		typesTraffic.Calls, typeBytes>>10, typesTook.Round(time.Millisecond), priceTraffic.Calls, priceBytes>>10, priceTraffic.Bytes>>10, pricesTook.Round(time.Millisecond))

	// The book keeps both in its ConfigMap, which holds 1 MiB at most.
	data, err := encode(&Book{Live: Live{Region: "eu-central-1", Types: facts, OnDemand: prices}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the book's live part, gzip-compressed: %d KiB", len(data)>>10)
	if len(data) > 256<<10 {
		t.Fatalf("the book's live part takes %d KiB of the ConfigMap's 1 MiB", len(data)>>10)
	}

	live, skipped := build.Live("eu-central-1", facts, prices)
	if len(skipped) > 0 {
		t.Fatalf("skipped: %v", skipped)
	}
	if live.Len() != build.Len()+len(emulator.NewTypes()) {
		t.Fatalf("%d live types, want the build's %d and %d new ones", live.Len(), build.Len(), len(emulator.NewTypes()))
	}
	cfgs := []catalog.NodeConfig{{}, {Family: catalog.FamilyBottlerocket}, {ReservedENIs: 1}}
	differ := 0
	for _, want := range build.All() {
		got, ok := live.Get(want.Name)
		if !ok {
			t.Fatalf("%s missing", want.Name)
		}
		if !reflect.DeepEqual(got.Labels(), want.Labels()) {
			t.Errorf("%s labels\n got %v\nwant %v", want.Name, got.Labels(), want.Labels())
		}
		for _, c := range cfgs {
			if c.ReservedENIs > 0 && want.Facts().Interfaces == 0 {
				// The build has only a pod count for these (hpc*,
				// trn2.48xlarge): EC2's ENI limits are the better figure
				// once interfaces are reserved.
				continue
			}
			a, _ := got.Allocatable(c)
			b, _ := want.Allocatable(c)
			if !equalLists(a, b) {
				t.Errorf("%s %+v: allocatable from EC2's answer %v, from the build %v", want.Name, c, a, b)
			}
		}
		if want.OnDemandPrice > 0 {
			if got.OnDemandPrice != emulator.RegionalPrice("eu-central-1", want.Name, want.OnDemandPrice) {
				t.Errorf("%s: price %v, want the region's %v", want.Name, got.OnDemandPrice, emulator.RegionalPrice("eu-central-1", want.Name, want.OnDemandPrice))
			}
			if got.OnDemandPrice != want.OnDemandPrice {
				differ++
			}
		}
	}
	if differ < build.Len()/2 {
		t.Fatalf("only %d prices differ from us-east-1's", differ)
	}
	r9g, ok := live.Get("r9g.large")
	if !ok || r9g.OnDemandPrice <= 0 {
		t.Fatalf("new type r9g.large: %v %v", ok, r9g)
	}
	if v, _ := r9g.Label(wellknown.InstanceGenerationLabel); v != "9" {
		t.Fatalf("r9g.large generation label %q", v)
	}
	if pods := r9g.ENILimitedPods(0); pods != 29 {
		t.Fatalf("r9g.large pods %d, want 29 from its ENI limits", pods)
	}
}
