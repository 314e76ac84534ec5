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

// priceQueries are the two queries the reference provider makes for
// Linux on-demand prices: shared-tenancy instances, and bare metal, which
// the price list files as dedicated. Dedicated Instances (instance-tenancy
// dedicated) are priced as shared ones, as Karpenter v1.14.1 prices them:
// it reads no other tenancy's prices.
var priceQueries = [][2]string{{"Shared", "Compute Instance"}, {"Dedicated", "Compute Instance (bare metal)"}}

// pricePages reads up to max pages (0: all) of the region's Linux
// on-demand prices into prices, from query q's page token on; it returns
// where to go on (q == len(priceQueries) when every query is done).
func pricePages(ctx context.Context, api PriceList, region string, q int, token string, max int, prices map[string]float64) (int, string, Traffic, error) {
	var tr Traffic
	currency := "USD"
	if strings.HasPrefix(region, "cn-") {
		currency = "CNY"
	}
	for q < len(priceQueries) && (max == 0 || tr.Calls < max) {
		query := priceQueries[q]
		in := &pricing.GetProductsInput{
			ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(100),
			Filters: []pricingtypes.Filter{
				term("regionCode", region), term("serviceCode", "AmazonEC2"), term("preInstalledSw", "NA"),
				term("operatingSystem", "Linux"), term("capacitystatus", "Used"), term("marketoption", "OnDemand"),
				term("tenancy", query[0]), term("productFamily", query[1]),
			},
		}
		if token != "" {
			in.NextToken = aws.String(token)
		}
		page, err := api.GetProducts(ctx, in)
		if err != nil {
			return q, token, tr, fmt.Errorf("reading on-demand prices (%s): %w", query[1], err)
		}
		tr.Calls++
		for _, item := range page.PriceList {
			tr.Bytes += int64(len(item))
			if name, price, ok := parseProduct(item, currency); ok {
				prices[name] = price
			}
		}
		if token = aws.ToString(page.NextToken); token == "" {
			q++
		}
	}
	return q, token, tr, nil
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
