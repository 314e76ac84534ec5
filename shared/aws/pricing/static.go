package pricing

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"strconv"
	"strings"
)

// staticFiles are the on-demand prices Karpenter v1.14.1 compiles in,
// one file per partition, in the partition's currency. They are written
// by hack/staticprices from a checkout of aws/karpenter-provider-aws:
//
//	go run ./hack/staticprices -git <its git dir> -ref v1.14.1
//
//go:embed static/*.txt
var staticFiles embed.FS

// partitionOf is the partition of a region, and the region whose static
// prices stand in for one its file lacks.
func partitionOf(region string) (partition, home string) {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn", "cn-north-1"
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov", "us-gov-west-1"
	}
	return "aws", "us-east-1"
}

// StaticOnDemand is the static on-demand prices that stand in for the
// region's price list while it cannot be read: the region's own, as
// Karpenter prices a region it has a static table for. A region the
// tables lack takes its partition's home region's (from): Karpenter
// takes us-east-1's for every such region, but in a China region that
// would mix us-east-1's dollars with the yuan EC2 quotes spot prices in
// there. Partitions without a table (ISO regions) take us-east-1's, as
// Karpenter does.
func StaticOnDemand(region string) (prices map[string]float64, from string, err error) {
	partition, home := partitionOf(region)
	data, err := staticFiles.ReadFile("static/" + partition + ".txt")
	if err != nil {
		partition, home = "aws", "us-east-1"
		if data, err = staticFiles.ReadFile("static/aws.txt"); err != nil {
			return nil, "", fmt.Errorf("static on-demand prices: %w", err)
		}
	}
	for _, r := range []string{region, home} {
		prices, err := staticRegion(data, r)
		if err != nil {
			return nil, "", fmt.Errorf("static on-demand prices of %s (%s): %w", r, partition, err)
		}
		if prices != nil {
			return prices, r, nil
		}
	}
	return nil, "", fmt.Errorf("static on-demand prices: %s has none for %s", partition, home)
}

// staticRegion reads one region's section of a partition's file (nil:
// the file has none). A section is "region NAME" followed by a line per
// family: "FAMILY SIZE=PRICE ...".
func staticRegion(data []byte, region string) (map[string]float64, error) {
	var prices map[string]float64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if name, ok := strings.CutPrefix(line, "region "); ok {
			if prices != nil {
				break
			}
			if name == region {
				prices = map[string]float64{}
			}
			continue
		}
		if prices == nil {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			return nil, fmt.Errorf("line %d: a family without sizes", n)
		}
		for _, f := range fields[1:] {
			size, p, ok := strings.Cut(f, "=")
			v, err := strconv.ParseFloat(p, 64)
			if !ok || err != nil || !(v > 0) {
				return nil, fmt.Errorf("line %d: %q is not SIZE=PRICE", n, f)
			}
			prices[fields[0]+"."+size] = v
		}
	}
	return prices, sc.Err()
}
