package catalog

import (
	"testing"

	"github.com/karpless/karpless/shared/core/wellknown"
)

func TestWindows(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	m5, ok := c.Get("m5.large") // 3 interfaces of 10 addresses
	if !ok {
		t.Fatal("no m5.large")
	}
	for _, tc := range []struct {
		family, build string
		ipv4          int64
	}{
		{FamilyWindows2019, "10.0.17763", 9},
		{FamilyWindows2022, "10.0.20348", 9},
		{FamilyWindows2025, "10.0.26100", 9},
		{FamilyAL2023, "", 0},
		{FamilyBottlerocket, "", 0},
	} {
		if got := WindowsBuild(tc.family); got != tc.build {
			t.Errorf("WindowsBuild(%s) = %q, want %q", tc.family, got, tc.build)
		}
		capacity := m5.Capacity(NodeConfig{Family: tc.family})
		q, has := capacity[wellknown.ResourcePrivateIPv4]
		if has != (tc.ipv4 > 0) || q.Value() != tc.ipv4 {
			t.Errorf("%s: %s = %s (present %v), want %d", tc.family, wellknown.ResourcePrivateIPv4, q.String(), has, tc.ipv4)
		}
		alloc, err := m5.Allocatable(NodeConfig{Family: tc.family})
		if err != nil {
			t.Fatal(err)
		}
		if a := alloc[wellknown.ResourcePrivateIPv4]; a.Value() != tc.ipv4 {
			t.Errorf("%s: allocatable %s = %s, want %d", tc.family, wellknown.ResourcePrivateIPv4, a.String(), tc.ipv4)
		}
	}
}
