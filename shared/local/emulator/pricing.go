package emulator

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// The emulated world's prices and types beyond the build's catalog: a
// region prices its instance families differently from us-east-1 (the
// build's region), and EC2 sells a family released after the build.

// regionFactor is the emulated region's on-demand price of a family
// relative to us-east-1: 1 in us-east-1, us-east-2 and us-west-2, where
// AWS prices most types alike; elsewhere 1.08 to 1.30 by a hash of region
// and family, so that families reorder between regions as they do on AWS
// (eu-central-1 is about 12-25% dearer, by family).
func regionFactor(region, family string) float64 {
	switch region {
	case "us-east-1", "us-east-2", "us-west-2":
		return 1
	}
	return 1.08 + 0.22*unitHash("region-price", region, family)
}

// RegionalPrice is the emulated on-demand price in region of a type
// priced usEast1 in us-east-1 (rounded as AWS publishes, to 5 decimals).
func RegionalPrice(region, instanceType string, usEast1 float64) float64 {
	family, _, _ := strings.Cut(instanceType, ".")
	return math.Round(usEast1*regionFactor(region, family)*1e5) / 1e5
}

// NewTypes are instance types EC2 sells in the emulated world that the
// build's catalog does not know: a memory-optimised Graviton family,
// priced 3% above the family it follows so that it wins no default
// choice. A NodePool must ask for it (instance-family In [r9g]).
func NewTypes() []catalog.Facts {
	mk := func(size string, vcpu, ifaces, ipv4 int64) catalog.Facts {
		name := "r9g." + size
		mem := vcpu * 8192
		return catalog.Facts{
			Name: name, VCPU: vcpu, MemoryMiB: mem, Arch: "arm64",
			Interfaces: ifaces, IPv4PerInterface: ipv4,
			Labels: map[string]string{
				wellknown.InstanceFamilyLabel: "r9g", wellknown.InstanceSizeLabel: size,
				wellknown.InstanceCPULabel: strconv.FormatInt(vcpu, 10), wellknown.InstanceMemoryLabel: strconv.FormatInt(mem, 10),
				wellknown.InstanceCategoryLabel: "r", wellknown.InstanceGenerationLabel: "9", wellknown.InstanceHypervisorLabel: "nitro",
				wellknown.InstanceCPUManufacturerLabel: "aws", wellknown.InstanceCPUSustainedClockSpeedMhzLabel: "3300",
				wellknown.InstanceEBSBandwidthLabel: "10000", wellknown.InstanceEncryptionInTransitSupportedLabel: "true",
				wellknown.InstanceCapabilityFlexLabel: "false",
			},
		}
	}
	return []catalog.Facts{mk("medium", 1, 2, 4), mk("large", 2, 3, 10), mk("xlarge", 4, 4, 15), mk("2xlarge", 8, 4, 15)}
}

// newTypePrice is the us-east-1 price of a NewTypes type: 3% above the
// r8g type of the same size.
func newTypePrice(build *catalog.Catalog, name string) float64 {
	_, size, _ := strings.Cut(name, ".")
	if t, ok := build.Get("r8g." + size); ok {
		return math.Round(t.OnDemandPrice*1.03*1e5) / 1e5
	}
	return 0
}

// worldCatalog is the emulated region's catalog: the build's types and
// NewTypes, at the region's prices.
func worldCatalog(build *catalog.Catalog, region string) (*catalog.Catalog, error) {
	facts := make([]catalog.Facts, 0, build.Len()+4)
	prices := make(map[string]float64, build.Len()+4)
	for _, t := range build.All() {
		facts = append(facts, t.Facts())
		if t.OnDemandPrice > 0 {
			prices[t.Name] = RegionalPrice(region, t.Name, t.OnDemandPrice)
		}
	}
	for _, f := range NewTypes() {
		facts = append(facts, f)
		prices[f.Name] = RegionalPrice(region, f.Name, newTypePrice(build, f.Name))
	}
	cat, skipped := build.Live(region, facts, prices)
	if len(skipped) > 0 {
		return nil, fmt.Errorf("emulator catalog: %s", strings.Join(skipped, "; "))
	}
	return cat, nil
}

// --- the AWS Price List Query API (pricing) ---

var pricingHandlers = map[string]handlerFunc{
	"GetProducts": (*Emulator).getProducts,
}

type pricingFilter struct {
	Type  string `json:"Type"`
	Field string `json:"Field"`
	Value string `json:"Value"`
}

// priceProduct is one product of the EC2 price list, before rendering.
type priceProduct struct {
	attrs map[string]string
	price float64
}

// regionNames are the price list's location names of some regions.
var regionNames = map[string]string{
	"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)", "us-west-2": "US West (Oregon)",
	"eu-central-1": "EU (Frankfurt)", "eu-west-1": "EU (Ireland)", "ap-south-1": "Asia Pacific (Mumbai)",
}

// products lists the price list's products for one instance type: the
// Linux on-demand one the filters are after, and the Windows, SQL Server
// and unused-reservation products beside it that wrong filters would
// pick up, at other prices.
func (e *Emulator) products(t *catalog.InstanceType) []priceProduct {
	family, _, _ := strings.Cut(t.Name, ".")
	tenancy, productFamily := "Shared", "Compute Instance"
	if t.IsMetal() {
		tenancy, productFamily = "Dedicated", "Compute Instance (bare metal)"
	}
	region := e.cfg.Region
	base := map[string]string{
		"servicecode": "AmazonEC2", "servicename": "Amazon Elastic Compute Cloud", "productFamily": productFamily,
		"instanceType": t.Name, "instanceFamily": family, "vcpu": strconv.FormatInt(t.VCPU, 10),
		"memory":     strconv.FormatFloat(float64(t.MemoryMiB)/1024, 'f', -1, 64) + " GiB",
		"regionCode": region, "location": regionNames[region], "locationType": "AWS Region",
		"tenancy": tenancy, "operatingSystem": "Linux", "preInstalledSw": "NA", "licenseModel": "No License required",
		"capacitystatus": "Used", "marketoption": "OnDemand", "operation": "RunInstances",
		"usagetype": strings.ToUpper(regionShort(region)) + "-BoxUsage:" + t.Name, "currentGeneration": "Yes",
		"processorArchitecture": "64-bit", "storage": "EBS only", "networkPerformance": "Up to 10 Gigabit",
	}
	variant := func(price float64, set ...string) priceProduct {
		a := make(map[string]string, len(base))
		for k, v := range base {
			a[k] = v
		}
		for i := 0; i+1 < len(set); i += 2 {
			a[set[i]] = set[i+1]
		}
		return priceProduct{attrs: a, price: math.Round(price*1e6) / 1e6}
	}
	p := t.OnDemandPrice
	return []priceProduct{
		variant(p),
		variant(p+0.046*float64(t.VCPU), "operatingSystem", "Windows", "operation", "RunInstances:0002", "licenseModel", "License Included"),
		variant(p*1.6+0.2, "preInstalledSw", "SQL Web", "operation", "RunInstances:0200"),
		variant(0, "capacitystatus", "UnusedCapacityReservation"),
	}
}

// allProducts are the region's priced products, every type's.
func (e *Emulator) allProducts() []priceProduct {
	var all []priceProduct
	for _, t := range e.cfg.Catalog.All() {
		if t.OnDemandPrice <= 0 {
			continue
		}
		for _, p := range e.products(t) {
			if p.price > 0 {
				all = append(all, p)
			}
		}
	}
	return all
}

// getProducts answers GetProducts for ServiceCode AmazonEC2 with TERM_MATCH
// (or EQUALS) filters on any attribute, pages of MaxResults (1..100,
// default 100). Each PriceList entry is a JSON document in a string, as
// AWS sends it.
func (e *Emulator) getProducts(r *request) (any, *apiError) {
	var in struct {
		ServiceCode string          `json:"ServiceCode"`
		Filters     []pricingFilter `json:"Filters"`
		MaxResults  *int            `json:"MaxResults"`
		NextToken   string          `json:"NextToken"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	if in.ServiceCode != "AmazonEC2" {
		return nil, &apiError{Code: "NotFoundException", Message: fmt.Sprintf("Service code %q is not valid (this emulator serves AmazonEC2).", in.ServiceCode), Status: 400}
	}
	for _, f := range in.Filters {
		if f.Type != "TERM_MATCH" && f.Type != "EQUALS" {
			return nil, &apiError{Code: "InvalidParameterException", Message: fmt.Sprintf("Filter type %q is not supported for field %q.", f.Type, f.Field), Status: 400}
		}
	}
	if in.MaxResults != nil && (*in.MaxResults < 1 || *in.MaxResults > 100) {
		return nil, &apiError{Code: "InvalidParameterException", Message: "MaxResults must be between 1 and 100.", Status: 400}
	}
	var matched []priceProduct
	for _, p := range e.priceList() {
		if matchProduct(p.attrs, in.Filters) {
			matched = append(matched, p)
		}
	}
	params := r.params
	params.Del("MaxResults")
	if in.MaxResults != nil {
		params.Set("MaxResults", strconv.Itoa(*in.MaxResults))
	}
	page, next, err := paginate(matched, params, 100, 1, 100)
	if err != nil {
		err.Code = "InvalidNextTokenException"
		return nil, err
	}
	out := struct {
		FormatVersion string   `json:"FormatVersion"`
		PriceList     []string `json:"PriceList"`
		NextToken     string   `json:"NextToken,omitempty"`
	}{FormatVersion: "aws_v1", PriceList: make([]string, 0, len(page)), NextToken: next}
	for _, p := range page {
		out.PriceList = append(out.PriceList, renderProduct(p))
	}
	return out, nil
}

func matchProduct(attrs map[string]string, filters []pricingFilter) bool {
	for _, f := range filters {
		v, ok := attrs[f.Field]
		if !ok {
			// Field names are matched without regard to case, as AWS does.
			for k, av := range attrs {
				if strings.EqualFold(k, f.Field) {
					v, ok = av, true
				}
			}
		}
		if f.Field == "serviceCode" || f.Field == "servicecode" {
			v, ok = "AmazonEC2", true
		}
		if !ok || v != f.Value {
			return false
		}
	}
	return true
}

// renderProduct writes a product as the price list does.
func renderProduct(p priceProduct) string {
	sku := strings.ToUpper(strconv.FormatUint(uint64(unitHash(p.attrs["instanceType"], p.attrs["operatingSystem"], p.attrs["preInstalledSw"], p.attrs["capacitystatus"])*(1<<52)), 36))
	doc := map[string]any{
		"product":         map[string]any{"productFamily": p.attrs["productFamily"], "attributes": p.attrs, "sku": sku},
		"serviceCode":     "AmazonEC2",
		"version":         "20261101000000",
		"publicationDate": "2026-11-01T00:00:00Z",
		"terms": map[string]any{"OnDemand": map[string]any{sku + ".JRTCKXETXF": map[string]any{
			"offerTermCode": "JRTCKXETXF", "sku": sku, "effectiveDate": "2026-11-01T00:00:00Z", "termAttributes": map[string]any{},
			"priceDimensions": map[string]any{sku + ".JRTCKXETXF.6YS6EN2CT7": map[string]any{
				"unit": "Hrs", "beginRange": "0", "endRange": "Inf", "appliesTo": []string{},
				"rateCode":     sku + ".JRTCKXETXF.6YS6EN2CT7",
				"description":  fmt.Sprintf("$%.4f per On Demand %s %s Instance Hour", p.price, p.attrs["operatingSystem"], p.attrs["instanceType"]),
				"pricePerUnit": map[string]string{"USD": strconv.FormatFloat(p.price, 'f', 10, 64)},
			}},
		}}},
	}
	b, err := json.Marshal(doc)
	must(err)
	return string(b)
}
