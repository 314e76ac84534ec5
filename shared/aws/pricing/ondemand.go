package pricing

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
)

// PriceList is what reading on-demand prices needs (the AWS Price List
// Query API).
type PriceList interface {
	GetProducts(ctx context.Context, in *pricing.GetProductsInput, opts ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

// Traffic counts what a refresh cost: calls made and bytes of price data.
type Traffic struct {
	Calls int
	Bytes int64
}

// readOnDemand reads the Linux on-demand price of every instance type in
// the region: shared-tenancy instances and bare metal (listed as dedicated),
// the two queries the reference provider makes.
func readOnDemand(ctx context.Context, api PriceList, region string) (map[string]float64, Traffic, error) {
	prices := map[string]float64{}
	var tr Traffic
	currency := "USD"
	if strings.HasPrefix(region, "cn-") {
		currency = "CNY"
	}
	for _, q := range [][2]string{{"Shared", "Compute Instance"}, {"Dedicated", "Compute Instance (bare metal)"}} {
		filters := []pricingtypes.Filter{
			term("regionCode", region), term("serviceCode", "AmazonEC2"), term("preInstalledSw", "NA"),
			term("operatingSystem", "Linux"), term("capacitystatus", "Used"), term("marketoption", "OnDemand"),
			term("tenancy", q[0]), term("productFamily", q[1]),
		}
		pages := pricing.NewGetProductsPaginator(api, &pricing.GetProductsInput{
			ServiceCode: aws.String("AmazonEC2"), Filters: filters, MaxResults: aws.Int32(100),
		})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, tr, fmt.Errorf("reading on-demand prices (%s): %w", q[1], err)
			}
			tr.Calls++
			for _, item := range page.PriceList {
				tr.Bytes += int64(len(item))
				name, price, ok := parseProduct(item, currency)
				if ok {
					prices[name] = price
				}
			}
		}
	}
	if len(prices) == 0 {
		return nil, tr, fmt.Errorf("reading on-demand prices: the price list has none for %s", region)
	}
	return prices, tr, nil
}

func term(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Field: aws.String(field), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String(value)}
}

// product is the part of a price list entry that names a price.
type product struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// parseProduct reads one price list entry (a JSON document in a string).
// Entries that are not an hourly price for an instance type, or that do
// not parse, are skipped: one odd entry must not cost the whole list.
func parseProduct(item, currency string) (name string, price float64, ok bool) {
	var p product
	if err := json.Unmarshal([]byte(item), &p); err != nil {
		return "", 0, false
	}
	name = p.Product.Attributes.InstanceType
	if name == "" {
		return "", 0, false
	}
	for _, term := range p.Terms.OnDemand {
		for _, d := range term.PriceDimensions {
			if d.Unit != "" && d.Unit != "Hrs" {
				continue
			}
			v, err := strconv.ParseFloat(d.PricePerUnit[currency], 64)
			if err != nil || !(v > 0) || math.IsInf(v, 0) {
				continue
			}
			price, ok = v, true
		}
	}
	return name, price, ok
}
