package config

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultsAndOverrides(t *testing.T) {
	c, err := FromLookup(env(map[string]string{"CLUSTER_NAME": "demo", "AWS_REGION": "us-west-2", "WATCH_WINDOW": "0s", "BATCH_MAX_DURATION": "5s"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "kube-system" || c.BatchIdle != time.Second || c.BatchMax != 5*time.Second || c.WatchWindow != 0 || c.LeaseDuration != 30*time.Second || c.UnavailableOfferingsTTL != 3*time.Minute {
		t.Errorf("unexpected config %+v", c)
	}
}

func TestInvalidSettingsNameTheVariable(t *testing.T) {
	_, err := FromLookup(env(map[string]string{"WATCH_WINDOW": "soon", "RESERVED_ENIS": "-1", "SPOT_TO_SPOT_CONSOLIDATION": "maybe"}))
	for _, want := range []string{"WATCH_WINDOW", "RESERVED_ENIS", "SPOT_TO_SPOT_CONSOLIDATION"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	c, _ := FromLookup(env(map[string]string{"CLUSTER_ENDPOINT": "http://x", "BATCH_IDLE_DURATION": "20s"}))
	err = c.Validate()
	for _, want := range []string{"CLUSTER_NAME", "AWS_REGION", "CLUSTER_CA_DATA", "https://", "BATCH_IDLE_DURATION"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}

func TestMinValuesPolicy(t *testing.T) {
	for _, tc := range []struct {
		value      string
		bestEffort bool
		bad        bool
	}{
		{"", false, false},
		{"Strict", false, false},
		{"BestEffort", true, false},
		{"besteffort", false, true}, // Karpenter's values are case-sensitive
	} {
		c, err := FromLookup(env(map[string]string{"MIN_VALUES_POLICY": tc.value}))
		if (err != nil) != tc.bad || (err != nil && !strings.Contains(err.Error(), "MIN_VALUES_POLICY")) {
			t.Errorf("%q: error %v, want bad=%v naming MIN_VALUES_POLICY", tc.value, err, tc.bad)
		}
		if c.MinValuesBestEffortOn() != tc.bestEffort {
			t.Errorf("%q: BestEffort %v, want %v", tc.value, c.MinValuesBestEffortOn(), tc.bestEffort)
		}
	}
}
