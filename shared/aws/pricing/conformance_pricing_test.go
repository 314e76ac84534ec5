package pricing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1's pricing controller suite (aws/karpenter-provider-aws
// pkg/controllers/providers/pricing/suite_test.go), through Source.Get:
// the book's on-demand prices (Live.OnDemand, read on a tick of its own)
// and spot prices (SpotPrice), and the build's prices where none are read.
func pricingCase(spec string) conformance.Case {
	return conformance.Case{Suite: "aws/providers/pricing", File: "pkg/controllers/providers/pricing/suite_test.go", Spec: "Pricing > " + spec}
}

// priceWorld is EC2 and the Price List API as one pricing case sets them:
// pages of spot quotes and of on-demand prices (the shared-tenancy query;
// the bare metal one has none), or failures.
type priceWorld struct {
	// types, when set, are the instance types EC2 lists (all alike but
	// for their names).
	types        []string
	spotPages    [][]ec2types.SpotPrice
	spotErr      error
	spotInputs   []*ec2.DescribeSpotPriceHistoryInput
	odPages      [][]string
	odErr        error
	productCalls int
}

func (w *priceWorld) DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	return &ec2.DescribeInstanceTypeOfferingsOutput{}, nil
}

// DescribeInstanceTypes lists w.types, in one page; without them it
// fails: the build's types stand in, priced by what the price list says.
func (w *priceWorld) DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	if w.types == nil {
		return nil, errors.New("UnauthorizedOperation: not in this test")
	}
	out := &ec2.DescribeInstanceTypesOutput{}
	for _, name := range w.types {
		out.InstanceTypes = append(out.InstanceTypes, ec2types.InstanceTypeInfo{
			InstanceType:  ec2types.InstanceType(name),
			ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664}},
			VCpuInfo:      &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(2)},
			MemoryInfo:    &ec2types.MemoryInfo{SizeInMiB: aws.Int64(4096)},
			NetworkInfo:   &ec2types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(3), Ipv4AddressesPerInterface: aws.Int32(10)},
		})
	}
	return out, nil
}

func pageOf[T any](pages [][]T, token *string) ([]T, *string) {
	i := 0
	if token != nil {
		fmt.Sscan(*token, &i)
	}
	if i >= len(pages) {
		return nil, nil
	}
	var next *string
	if i+1 < len(pages) {
		next = aws.String(fmt.Sprint(i + 1))
	}
	return pages[i], next
}

func (w *priceWorld) DescribeSpotPriceHistory(_ context.Context, in *ec2.DescribeSpotPriceHistoryInput, _ ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	w.spotInputs = append(w.spotInputs, in)
	if w.spotErr != nil {
		return nil, w.spotErr
	}
	items, next := pageOf(w.spotPages, in.NextToken)
	return &ec2.DescribeSpotPriceHistoryOutput{SpotPriceHistory: items, NextToken: next}, nil
}

func (w *priceWorld) GetProducts(_ context.Context, in *pricing.GetProductsInput, _ ...func(*pricing.Options)) (*pricing.GetProductsOutput, error) {
	w.productCalls++
	if w.odErr != nil {
		return nil, w.odErr
	}
	for _, f := range in.Filters {
		if aws.ToString(f.Field) == "tenancy" && aws.ToString(f.Value) != "Shared" {
			return &pricing.GetProductsOutput{}, nil
		}
	}
	items, next := pageOf(w.odPages, in.NextToken)
	return &pricing.GetProductsOutput{PriceList: items, NextToken: next}, nil
}

func quote(zone, itype, price string, at time.Time) ec2types.SpotPrice {
	return ec2types.SpotPrice{AvailabilityZone: aws.String(zone), InstanceType: ec2types.InstanceType(itype), SpotPrice: aws.String(price), Timestamp: aws.Time(at)}
}

func priceItemIn(name, currency, price string) string {
	return fmt.Sprintf(`{"product":{"attributes":{"instanceType":%q}},"terms":{"OnDemand":{"T":{"priceDimensions":{"D":{"unit":"Hrs","pricePerUnit":{%q:%q}}}}}}}`, name, currency, price)
}

// pricingSource reads w for region; spot prices are read on one tick and
// on-demand prices on the next (readBoth), as the functions do.
type pricingSource struct {
	*Source
	clk *clocktesting.FakeClock
}

func newPricingSource(w *priceWorld, region string, priceList bool) pricingSource {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	s := &Source{EC2: w, Region: region, ConfigMap: fake.NewClientset().CoreV1(), Namespace: "kube-system", Clock: clk, PagesPerTick: 100}
	if priceList {
		s.PriceList = w
	}
	return pricingSource{s, clk}
}

func (s pricingSource) readBoth(t *testing.T) *Book {
	t.Helper()
	if _, err := s.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := s.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformancePricing(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	embedded, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	// Karpenter's static tables (InitialOnDemandPricesAWS, ...USGov,
	// ...CN): per region, how many prices and a digest of them ("type=price"
	// lines, sorted, the price as the shortest decimal), taken from its
	// zz_generated.pricing_*.go apart from hack/staticprices, and a few
	// prices read off them. Each region's book, before its price list is
	// read, prices every type of its table at the table's price.
	partitions := []struct {
		entry   string
		regions map[string]staticTable
	}{
		{"aws", map[string]staticTable{
			"us-east-1": {1361, "cf7cb2350e9da2ccb212b20fed32e7173e448e77c6d43b063c4d1429e6a6c15d", map[string]float64{"c5.large": 0.085, "m7g.xlarge": 0.1632, "c3.2xlarge": 0.42}},
		}},
		{"aws-us-gov", map[string]staticTable{
			"us-gov-east-1": {503, "89368653e620131136a3015d7943aff222f288d81478e52b7cba0a098ea22122", map[string]float64{"c5.large": 0.102, "m7g.xlarge": 0.2056}},
			"us-gov-west-1": {724, "7f0cbcc1385d675a53eaec0739921d6646bd0646bf8ca12f3c738f398c7359b6", map[string]float64{"m5.large": 0.121, "m7g.xlarge": 0.2057}},
		}},
		{"aws-cn", map[string]staticTable{
			"cn-north-1": {316, "ff500297dfd18a30eb21c47b73f450d8557968df2840c0d55aeda19a73069c16", map[string]float64{"c3.2xlarge": 4.217, "c5.large": 0.739}},
		}},
	}
	for _, p := range partitions {
		conformance.Run(t, pricingCase("On-Demand > should return correct static data for all partitions > "+p.entry), func(t *testing.T) {
			for region, want := range p.regions {
				table, from, err := StaticOnDemand(region)
				if err != nil || from != region {
					t.Fatalf("%s: static prices of %q, %v", region, from, err)
				}
				want.check(t, region, table)
				// The region's book before its prices are read: EC2 lists
				// every type of the table, the Price List API cannot be
				// read (GovCloud has none; elsewhere it fails).
				w := &priceWorld{types: slices.Sorted(maps.Keys(table))}
				priceList := !strings.HasPrefix(region, "us-gov-")
				w.odErr = errors.New("AccessDeniedException: not in this test")
				b := newPricingSource(w, region, priceList).readBoth(t)
				cat, fallback := b.Catalog(embedded)
				if cat.Region != region || !slices.ContainsFunc(fallback, func(f string) bool { return strings.HasPrefix(f, "on-demand prices from the build ("+region+")") }) {
					t.Errorf("%s: catalog of %s, fallback %q", region, cat.Region, fallback)
				}
				for name, price := range table {
					if it, ok := cat.Get(name); !ok || it.OnDemandPrice != price {
						t.Errorf("%s %s: %v %v, want the static %v", region, name, it, ok, price)
					}
				}
			}
		})
	}
	odWorld := func() *priceWorld {
		return &priceWorld{spotPages: [][]ec2types.SpotPrice{{quote("test-zone-1a", "c99.large", "1.23", now)}}}
	}
	conformance.Run(t, pricingCase("On-Demand > should return static on-demand data if pricing API fails"), func(t *testing.T) {
		w := odWorld()
		w.odErr = errors.New("failed")
		b := newPricingSource(w, "us-east-1", true).readBoth(t)
		cat, _ := b.Catalog(embedded)
		if it, ok := cat.Get("c5.large"); !ok || !(it.OnDemandPrice > 0) || !b.ReadFailed() {
			t.Errorf("c5.large %v %v, read failed %t", it, ok, b.ReadFailed())
		}
	})
	conformance.Run(t, pricingCase("On-Demand > should update on-demand pricing with response from the pricing API"), func(t *testing.T) {
		w := odWorld()
		w.odPages = [][]string{{priceItemIn("c98.large", "USD", "1.20"), priceItemIn("c99.large", "USD", "1.23")}}
		b := newPricingSource(w, "us-east-1", true).readBoth(t)
		if b.Live.OnDemand["c98.large"] != 1.20 || b.Live.OnDemand["c99.large"] != 1.23 {
			t.Errorf("on-demand %v", b.Live.OnDemand)
		}
	})
	conformance.Run(t, pricingCase("On-Demand > should query for both `Linux/UNIX` and `Linux/UNIX (Amazon VPC)`"), func(t *testing.T) {
		w := odWorld()
		newPricingSource(w, "us-east-1", true).readBoth(t)
		if len(w.spotInputs) == 0 {
			t.Fatal("no spot price query")
		}
		if d := w.spotInputs[len(w.spotInputs)-1].ProductDescriptions; !slices.Contains(d, "Linux/UNIX") || !slices.Contains(d, "Linux/UNIX (Amazon VPC)") {
			t.Errorf("product descriptions %v", d)
		}
	})
	conformance.Run(t, pricingCase("On-Demand > should update on-demand pricing with response from the pricing API when in the CN partition"), func(t *testing.T) {
		w := odWorld()
		w.odPages = [][]string{{priceItemIn("c98.large", "CNY", "1.20"), priceItemIn("c99.large", "CNY", "1.23")}}
		b := newPricingSource(w, "cn-north-1", true).readBoth(t)
		if b.Live.OnDemand["c98.large"] != 1.20 || b.Live.OnDemand["c99.large"] != 1.23 {
			t.Errorf("on-demand %v", b.Live.OnDemand)
		}
	})
	conformance.Run(t, pricingCase("On-Demand > should update pricing when we make multiple paginated calls to the on-demand pricing API"), func(t *testing.T) {
		w := odWorld()
		w.odPages = [][]string{
			{priceItemIn("c94.large", "USD", "1.10"), priceItemIn("c95.large", "USD", "1.20")},
			{priceItemIn("c96.large", "USD", "1.30"), priceItemIn("c97.large", "USD", "1.40")},
			{priceItemIn("c98.large", "USD", "1.50"), priceItemIn("c99.large", "USD", "1.60")},
		}
		b := newPricingSource(w, "us-east-1", true).readBoth(t)
		for name, want := range map[string]float64{"c94.large": 1.10, "c95.large": 1.20, "c96.large": 1.30, "c97.large": 1.40, "c98.large": 1.50, "c99.large": 1.60} {
			if got := b.Live.OnDemand[name]; got != want {
				t.Errorf("%s: %v, want %v", name, got, want)
			}
		}
	})
	conformance.Run(t, pricingCase("On-Demand > should maintain previous data when pricing API returns partial data"), func(t *testing.T) {
		w := odWorld()
		w.odPages = [][]string{{priceItemIn("c98.large", "USD", "1.10"), priceItemIn("c99.large", "USD", "1.20")}}
		s := newPricingSource(w, "us-east-1", true)
		s.MaxAge, s.CatalogMaxAge = 100*time.Hour, time.Hour
		b := s.readBoth(t)
		if b.Live.OnDemand["c98.large"] != 1.10 || b.Live.OnDemand["c99.large"] != 1.20 {
			t.Fatalf("on-demand %v", b.Live.OnDemand)
		}
		w.odPages = [][]string{{priceItemIn("c98.large", "USD", "1.10")}}
		s.clk.Step(2 * time.Hour)
		b, err := s.Get(context.Background())
		if err != nil || b.Live.OnDemandAt != s.clk.Now() {
			t.Fatalf("no second reading: %v %v", b.Live.OnDemandAt, err)
		}
		if b.Live.OnDemand["c98.large"] != 1.10 || b.Live.OnDemand["c99.large"] != 1.20 {
			t.Errorf("on-demand after a partial answer %v", b.Live.OnDemand)
		}
	})

	spotWorld := func() *priceWorld {
		return &priceWorld{odPages: [][]string{{priceItemIn("c98.large", "USD", "1.10")}}}
	}
	conformance.Run(t, pricingCase("Spot > should return static spot data if EC2 describeSpotPriceHistory API fails"), func(t *testing.T) {
		// No quote at all: every spot offering carries an estimate and
		// stays launchable (instancetype.Prices with Spot nil).
		w := spotWorld()
		w.spotErr = errors.New("failed")
		b, err := newPricingSource(w, "us-east-1", true).Get(context.Background())
		if err != nil || b.Spot != nil || !b.ReadFailed() {
			t.Errorf("book %+v, %v: want one without spot quotes that says why", b, err)
		}
	})
	spotCases := []struct {
		spec  string
		pages [][]ec2types.SpotPrice
		want  map[string]float64 // type/zone -> price; 0: no quote
	}{
		{"should update spot pricing with response from the pricing API", [][]ec2types.SpotPrice{{
			quote("test-zone-1a", "c99.large", "1.23", now), quote("test-zone-1a", "c98.large", "1.20", now),
			quote("test-zone-1b", "c99.large", "1.50", now), quote("test-zone-1b", "c98.large", "1.10", now),
		}}, map[string]float64{"c98.large/test-zone-1b": 1.10, "c99.large/test-zone-1a": 1.23}},
		{"should update zonal pricing with data from the spot pricing API", [][]ec2types.SpotPrice{{
			quote("test-zone-1a", "c99.large", "1.23", now), quote("test-zone-1a", "c98.large", "1.20", now),
		}}, map[string]float64{"c98.large/test-zone-1a": 1.20, "c98.large/test-zone-1b": 0}},
		{"should respond with false if price doesn't exist in zone", [][]ec2types.SpotPrice{{
			quote("test-zone-1a", "c99.large", "1.23", now),
		}}, map[string]float64{"c99.large/test-zone-1b": 0}},
		{"should update zonal pricing when we make multiple paginated calls to the spot pricing API", [][]ec2types.SpotPrice{
			{quote("test-zone-1a", "c99.large", "1.20", now), quote("test-zone-1b", "c98.large", "1.30", now)},
			{quote("test-zone-1b", "c99.large", "1.30", now), quote("test-zone-1c", "c98.large", "1.40", now)},
			{quote("test-zone-1c", "c99.large", "1.40", now), quote("test-zone-1a", "c98.large", "1.20", now)},
		}, map[string]float64{
			"c98.large/test-zone-1a": 1.20, "c98.large/test-zone-1b": 1.30, "c98.large/test-zone-1c": 1.40,
			"c99.large/test-zone-1a": 1.20, "c99.large/test-zone-1b": 1.30, "c99.large/test-zone-1c": 1.40,
		}},
	}
	for _, tc := range spotCases {
		conformance.Run(t, pricingCase("Spot > "+tc.spec), func(t *testing.T) {
			w := spotWorld()
			w.spotPages = tc.pages
			b := newPricingSource(w, "us-east-1", true).readBoth(t)
			for k, want := range tc.want {
				it, zone, _ := strings.Cut(k, "/")
				got, ok := b.SpotPrice(it, zone)
				if ok != (want != 0) || got != want {
					t.Errorf("%s: %v %v, want %v", k, got, ok, want)
				}
			}
		})
	}
	conformance.Run(t, pricingCase("Spot > should return static on-demand data when in isolated-vpc"), func(t *testing.T) {
		// ISOLATED_VPC: no Price List client (shared/app), the build's
		// prices stand in; spot prices are still EC2's.
		w := spotWorld()
		w.spotPages = [][]ec2types.SpotPrice{{quote("test-zone-1b", "c99.large", "1.50", now), quote("test-zone-1b", "c98.large", "1.10", now)}}
		w.odPages = [][]string{{priceItemIn("c98.large", "USD", "1.20"), priceItemIn("c99.large", "USD", "1.23")}}
		b := newPricingSource(w, "us-east-1", false).readBoth(t)
		cat, _ := b.Catalog(embedded)
		if it, ok := cat.Get("c3.2xlarge"); !ok || it.OnDemandPrice != 0.42 || w.productCalls != 0 {
			t.Errorf("c3.2xlarge %v %v, %d price list calls", it, ok, w.productCalls)
		}
		if p, ok := b.SpotPrice("c98.large", "test-zone-1b"); !ok || p != 1.10 {
			t.Errorf("spot %v %v", p, ok)
		}
	})
	conformance.Run(t, pricingCase("Spot > should return static on-demand data when in an AWS GovCloud region"), func(t *testing.T) {
		w := spotWorld()
		b := newPricingSource(w, "us-gov-east-1", false).readBoth(t)
		cat, _ := b.Catalog(embedded)
		if it, ok := cat.Get("c5.12xlarge"); !ok || !(it.OnDemandPrice > 0) || w.productCalls != 0 {
			t.Errorf("c5.12xlarge %v %v, %d price list calls", it, ok, w.productCalls)
		}
	})
	conformance.Run(t, pricingCase("Spot > should maintain previous data when pricing API returns partial data"), func(t *testing.T) {
		w := spotWorld()
		w.spotPages = [][]ec2types.SpotPrice{{quote("test-zone-1a", "c98.large", "1.20", now), quote("test-zone-1a", "c99.large", "1.30", now)}}
		s := newPricingSource(w, "us-east-1", true)
		b := s.readBoth(t)
		w.spotPages = [][]ec2types.SpotPrice{{quote("test-zone-1a", "c99.large", "1.30", now)}}
		s.clk.Step(time.Hour)
		if b, err = s.Get(context.Background()); err != nil || b.UpdatedAt != s.clk.Now() {
			t.Fatalf("no second spot reading: %v %v", b.UpdatedAt, err)
		}
		for it, want := range map[string]float64{"c98.large": 1.20, "c99.large": 1.30} {
			if p, ok := b.SpotPrice(it, "test-zone-1a"); !ok || p != want {
				t.Errorf("%s: %v %v, want %v", it, p, ok, want)
			}
		}
	})
}

// staticTable is what a region's static prices must be: how many, their
// digest, and some of them.
type staticTable struct {
	count  int
	digest string
	some   map[string]float64
}

func (want staticTable) check(t *testing.T, region string, table map[string]float64) {
	t.Helper()
	lines := make([]string, 0, len(table))
	for name, price := range table {
		lines = append(lines, name+"="+strconv.FormatFloat(price, 'f', -1, 64)+"\n")
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "")))
	if len(table) != want.count || hex.EncodeToString(sum[:]) != want.digest {
		t.Errorf("%s: %d static prices, digest %x; want Karpenter's %d, %s", region, len(table), sum, want.count, want.digest)
	}
	for name, price := range want.some {
		if table[name] != price {
			t.Errorf("%s %s: static %v, want %v", region, name, table[name], price)
		}
	}
}
