package overlay

import (
	"fmt"
	"strconv"
	"strings"
)

// change is a parsed price or priceAdjustment.
type change struct {
	absolute bool    // "0.5": the price becomes value
	percent  bool    // "+10%", "-15%": the price moves by value percent
	value    float64 // the new price, the delta or the percentage (signed)
}

// parseChange reads a price ("0.5") or a priceAdjustment ("+0.1", "-0.5",
// "+10%", "-15%") as the CRD's patterns admit them.
func parseChange(s string) (change, error) {
	var c change
	body := s
	switch {
	case strings.HasPrefix(s, "+"), strings.HasPrefix(s, "-"):
		if strings.HasSuffix(s, "%") {
			c.percent, body = true, strings.TrimSuffix(s, "%")
		}
	default:
		c.absolute = true
	}
	v, err := strconv.ParseFloat(body, 64)
	if err != nil {
		return change{}, fmt.Errorf("parsing price change %q: %w", s, err)
	}
	c.value = v
	return c, nil
}

// AdjustedPrice is Karpenter's AdjustedPrice: a price without a sign
// replaces the price, a signed number is added to it, a signed percentage
// scales it; an adjusted price below zero is zero. An empty or unparsable
// change leaves the price as it is (Validate refuses such an overlay first).
func AdjustedPrice(price float64, s string) float64 {
	if s == "" {
		return price
	}
	c, err := parseChange(s)
	if err != nil {
		return price
	}
	var out float64
	switch {
	case c.absolute:
		return c.value
	case c.percent:
		out = price * (1 + c.value/100)
	default:
		out = price + c.value
	}
	return max(out, 0)
}
