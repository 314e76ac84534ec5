package catalog

import (
	"math"
	"testing"
)

func TestCredits(t *testing.T) {
	for _, c := range []struct {
		name          string
		family, size  string
		vcpus, req    int64
		want          float64
		wantBurstable bool
	}{
		{"not burstable", "m5", "large", 2, 2000, 0, false},
		{"t2 is standard by default", "t2", "large", 2, 2000, 0, false},
		{"unknown size", "t3", "huge", 4, 4000, 0, false},
		{"below baseline", "t3", "large", 2, 500, 0, true},
		{"at baseline", "t3a", "large", 2, 600, 0, true},
		// micro: 10% of 2 vCPUs is 200m; 1500m is 1.3 vCPU above it, at
		// T4g's $0.04.
		{"t4g.micro at 75%", "t4g", "micro", 2, 1500, 1.3 * 0.04, true},
		// nano: 5% baseline; requests above the vCPUs count as 100%.
		{"capped at 100%", "t4g", "nano", 2, 4000, 1.9 * 0.04, true},
		{"t3.xlarge 40% baseline", "t3", "xlarge", 4, 2000, 0.4 * 0.05, true},
		{"t3a.small 20% baseline", "t3a", "small", 2, 1400, 1.0 * 0.05, true},
		{"t4g.medium", "t4g", "medium", 2, 1900, 1.5 * 0.04, true},
		{"t4g.2xlarge", "t4g", "2xlarge", 8, 3200, 0, true},
	} {
		got := CreditHourly(c.family, c.size, c.vcpus, c.req)
		if math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: CreditHourly = %v, want %v", c.name, got, c.want)
		}
		if _, ok := Burstable(c.family, c.size); ok != c.wantBurstable {
			t.Errorf("%s: Burstable = %v, want %v", c.name, ok, c.wantBurstable)
		}
	}
	// The baselines of every size, in millicores of the sizes' vCPUs.
	for size, want := range map[string]int64{"nano": 100, "micro": 200, "small": 400, "medium": 400, "large": 600, "xlarge": 1600, "2xlarge": 3200} {
		vcpus := int64(2)
		switch size {
		case "xlarge":
			vcpus = 4
		case "2xlarge":
			vcpus = 8
		}
		c, _ := Burstable("t3", size)
		if got := c.BaselineMilli(vcpus); got != want {
			t.Errorf("t3.%s baseline %dm, want %dm", size, got, want)
		}
	}
}
