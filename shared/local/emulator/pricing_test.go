package emulator

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
)

// TestGetProducts is GetProducts' contract through the real client: the
// filters select among the Linux, Windows, SQL Server and unused-reservation
// products of a type, prices are the region's, pages chain, bad input gets
// the Price List API's codes.
func TestGetProducts(t *testing.T) {
	ctx := context.Background()
	e, _ := newTestEmulator(t, func(c *Config) { c.Region = "eu-central-1" })
	c := pricing.NewFromConfig(sdkConfig(t, e, carefulAttempts))
	term := func(f, v string) pricingtypes.Filter {
		return pricingtypes.Filter{Field: aws.String(f), Value: aws.String(v), Type: pricingtypes.FilterTypeTermMatch}
	}
	priceOf := func(item string) (string, string) {
		var doc struct {
			Product struct {
				Attributes map[string]string `json:"attributes"`
			} `json:"product"`
			Terms struct {
				OnDemand map[string]struct {
					PriceDimensions map[string]struct {
						PricePerUnit map[string]string `json:"pricePerUnit"`
					} `json:"priceDimensions"`
				} `json:"OnDemand"`
			} `json:"terms"`
		}
		if err := json.Unmarshal([]byte(item), &doc); err != nil {
			t.Fatalf("price list entry is not JSON: %v", err)
		}
		for _, term := range doc.Terms.OnDemand {
			for _, d := range term.PriceDimensions {
				return doc.Product.Attributes["operatingSystem"], d.PricePerUnit["USD"]
			}
		}
		return "", ""
	}
	m5 := func(os string) []string {
		out, err := c.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: []pricingtypes.Filter{
			term("instanceType", "m5.large"), term("operatingSystem", os), term("capacitystatus", "Used"), term("preInstalledSw", "NA"),
		}})
		if err != nil {
			t.Fatal(err)
		}
		return out.PriceList
	}
	linux, windows := m5("Linux"), m5("Windows")
	if len(linux) != 1 || len(windows) != 1 {
		t.Fatalf("%d Linux and %d Windows products for m5.large", len(linux), len(windows))
	}
	os, usd := priceOf(linux[0])
	want, _ := e.OnDemandPrice("m5.large")
	if os != "Linux" || usd == "" || usd == "0.0960000000" {
		t.Fatalf("m5.large %s at %s: want eu-central-1's price, not us-east-1's", os, usd)
	}
	if got := RegionalPrice("eu-central-1", "m5.large", 0.096); got != want {
		t.Fatalf("OnDemandPrice %v, RegionalPrice %v", want, got)
	}
	if _, wusd := priceOf(windows[0]); wusd <= usd {
		t.Fatalf("Windows %s not dearer than Linux %s", wusd, usd)
	}

	pages := pricing.NewGetProductsPaginator(c, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(100), Filters: []pricingtypes.Filter{
		term("operatingSystem", "Linux"), term("preInstalledSw", "NA"), term("capacitystatus", "Used"), term("tenancy", "Shared"),
	}})
	n, calls := 0, 0
	for pages.HasMorePages() {
		p, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(p.PriceList)
		calls++
	}
	if n < 1000 || calls < 10 {
		t.Fatalf("%d products in %d pages", n, calls)
	}

	for name, in := range map[string]*pricing.GetProductsInput{
		"NotFoundException":          {ServiceCode: aws.String("AmazonS3")},
		"InvalidParameterException":  {ServiceCode: aws.String("AmazonEC2"), Filters: []pricingtypes.Filter{{Field: aws.String("x"), Value: aws.String("y"), Type: "PREFIX"}}},
		"InvalidNextTokenException":  {ServiceCode: aws.String("AmazonEC2"), NextToken: aws.String("bogus")},
		"InvalidParameterException ": {ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(500)},
	} {
		_, err := c.GetProducts(ctx, in)
		if got := errorCode(err); got != trimSpace(name) {
			t.Errorf("%s: got %q (%v)", name, got, err)
		}
	}
}

func trimSpace(s string) string {
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}
