package pricing

import (
	"context"
	"strings"
	"testing"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpless/karpless/shared/core/catalog"
)

// TestGovCloudPricesFromItsOwnStaticTable: GovCloud has no Price List
// API, so its on-demand prices are always the static ones, and they are
// its own region's (an m7g.xlarge costs $0.2056 in us-gov-east-1,
// $0.2057 in us-gov-west-1, $0.1632 in us-east-1), from the first tick
// on: the tick that reads only spot prices, before the region's
// instance types are read, prices with them too. The catalog is of the
// region (nodes are labelled with it), and a type the region's table
// does not price is not launched there.
func TestGovCloudPricesFromItsOwnStaticTable(t *testing.T) {
	embedded, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	for region, want := range map[string]float64{"us-gov-east-1": 0.2056, "us-gov-west-1": 0.2057} {
		t.Run(region, func(t *testing.T) {
			// EC2's instance types cannot be read either: the build's
			// types, priced by the region's table.
			w := &priceWorld{spotPages: [][]ec2types.SpotPrice{}}
			s := newPricingSource(w, region, false)
			first, err := s.Get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for tick, b := range map[string]*Book{"spot tick": first, "catalog tick": s.readBoth(t)} {
				cat, fallback := b.Catalog(embedded)
				it, ok := cat.Get("m7g.xlarge")
				if !ok || it.OnDemandPrice != want || cat.Region != region {
					t.Errorf("%s: m7g.xlarge %v %v in a catalog of %s, want $%v in %s", tick, it, ok, cat.Region, want, region)
				}
				if !strings.Contains(strings.Join(fallback, "; "), "on-demand prices from the build ("+region+")") {
					t.Errorf("%s: fallback %q does not name %s's prices", tick, fallback, region)
				}
				// g7 is in the build (us-east-1) but not in GovCloud's table.
				if g7, ok := cat.Get("g7.2xlarge"); !ok || g7.OnDemandPrice != 0 {
					t.Errorf("%s: g7.2xlarge %v %v, want no price in %s", tick, g7, ok, region)
				}
			}
			if w.productCalls != 0 {
				t.Errorf("%d Price List calls in GovCloud", w.productCalls)
			}
		})
	}
}

// TestStaticOnDemandRegions: a region with a static table prices from
// it; one without takes its partition's home region's (China in yuan,
// not us-east-1's dollars); an unknown partition takes us-east-1's.
func TestStaticOnDemandRegions(t *testing.T) {
	for region, want := range map[string]struct {
		from    string
		c5large float64
	}{
		"us-east-1":      {"us-east-1", 0.085},
		"eu-west-1":      {"us-east-1", 0.085},
		"us-gov-east-1":  {"us-gov-east-1", 0.102},
		"cn-north-1":     {"cn-north-1", 0.739},
		"cn-northwest-1": {"cn-north-1", 0.739},
		"us-iso-east-1":  {"us-east-1", 0.085},
	} {
		prices, from, err := StaticOnDemand(region)
		if err != nil || from != want.from || prices["c5.large"] != want.c5large {
			t.Errorf("%s: from %s, c5.large %v, %v; want from %s at %v", region, from, prices["c5.large"], err, want.from, want.c5large)
		}
	}
}

// TestStaticPricesCompletedByTheBuild: where the table is of the build
// catalog's own region (us-east-1), the build prices the types the table
// is older than; elsewhere it does not (its prices are another region's).
func TestStaticPricesCompletedByTheBuild(t *testing.T) {
	embedded, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	g7, ok := embedded.Get("g7.2xlarge")
	if !ok || !(g7.OnDemandPrice > 0) {
		t.Fatalf("the build does not price g7.2xlarge: %v %v", g7, ok)
	}
	for region, want := range map[string]float64{"us-east-1": g7.OnDemandPrice, "eu-west-1": g7.OnDemandPrice, "us-gov-west-1": 0, "cn-north-1": 0} {
		prices, _ := staticPrices(region, embedded)
		if prices["g7.2xlarge"] != want {
			t.Errorf("%s: g7.2xlarge at %v, want %v", region, prices["g7.2xlarge"], want)
		}
	}
}

func TestStaticRegionRefusesBadLines(t *testing.T) {
	for _, data := range []string{
		"region r\nc5\n",
		"region r\nc5 large\n",
		"region r\nc5 large=x\n",
		"region r\nc5 large=0\n",
	} {
		if _, err := staticRegion([]byte(data), "r"); err == nil {
			t.Errorf("%q: no error", data)
		}
	}
	p, err := staticRegion([]byte("# x\nregion a\nc5 large=1\nregion r\nc5 large=0.5 xlarge=1\nregion z\nc5 large=2\n"), "r")
	if err != nil || len(p) != 2 || p["c5.large"] != 0.5 || p["c5.xlarge"] != 1 {
		t.Errorf("%v %v", p, err)
	}
	if p, err := staticRegion([]byte("region a\nc5 large=1\n"), "r"); p != nil || err != nil {
		t.Errorf("a region the file lacks: %v %v", p, err)
	}
}
