package record

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/karpless/karpless/shared/function/config"
)

// What each level extracts as a CloudWatch metric, and what stays a log
// field only: every figure is written at every level.
func TestMetricsLevels(t *testing.T) {
	emit := func(m *Metrics) {
		m.Gauge("karpenter_scheduler_queue_depth", 3, map[string]string{"controller": "provisioner"})
		m.Count("karpenter_cloudprovider_instance_launch_failures_total", 1, map[string]string{"zone": "us-east-1a", "capacity_type": "spot", "reason": "InsufficientInstanceCapacity"})
		m.Count("karpenter_nodeclaims_created_total", 2, map[string]string{"nodepool": "default", "reason": "provisioning"})
		m.Gauge("karpenter_nodepools_allowed_disruptions", 1, map[string]string{"nodepool": "default", "reason": "empty"})
		m.Observe("karpenter_scheduler_scheduling_duration_seconds", "Seconds", 0.25, map[string]string{"controller": "provisioner"})
		// Issue 16 item 9's: at Full only.
		m.Gauge("karpenter_nodepools_usage", 4, map[string]string{"nodepool": "default", "resource_type": "cpu"})
		m.Gauge("karpenter_nodepools_limit", 1000, map[string]string{"nodepool": "default", "resource_type": "cpu"})
		m.Observe("karpenter_pods_startup_duration_seconds", "Seconds", 42, nil)
		m.Observe("karpenter_pods_bound_duration_seconds", "Seconds", 30, nil)
		m.Count("karpenter_cloudprovider_errors_total", 1, map[string]string{"controller": "nodeclaim.lifecycle", "method": "Create", "provider": "aws", "error": ""})
		m.Count("karpenter_interruption_received_messages_total", 1, map[string]string{"message_type": "no_op"})
		m.Count("karpenter_interruption_deleted_messages_total", 1, nil)
		m.Observe("karpenter_interruption_message_queue_duration_seconds", "Seconds", 3, nil)
		m.Gauge("karpless_paused", 1, nil)
	}
	all := []string{
		"karpenter_cloudprovider_errors_total",
		"karpenter_cloudprovider_instance_launch_failures_total",
		"karpenter_interruption_deleted_messages_total",
		"karpenter_interruption_message_queue_duration_seconds",
		"karpenter_interruption_received_messages_total",
		"karpenter_nodeclaims_created_total",
		"karpenter_nodepools_allowed_disruptions",
		"karpenter_nodepools_limit",
		"karpenter_nodepools_usage",
		"karpenter_pods_bound_duration_seconds",
		"karpenter_pods_startup_duration_seconds",
		"karpenter_scheduler_queue_depth",
		"karpenter_scheduler_scheduling_duration_seconds",
		"karpless_paused",
	}
	for _, tc := range []struct {
		level     Level
		extracted []string
	}{
		{Minimal, []string{"karpenter_cloudprovider_instance_launch_failures_total", "karpenter_scheduler_queue_depth", "karpless_paused"}},
		{"", []string{"karpenter_cloudprovider_instance_launch_failures_total", "karpenter_scheduler_queue_depth", "karpless_paused"}}, // the default
		{Full, all},
	} {
		m := NewMetricsAt("Karpless", tc.level)
		emit(m)
		var b bytes.Buffer
		if err := m.Flush(&b, 1700000000000); err != nil {
			t.Fatal(err)
		}
		var written, extracted []string
		for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			var doc map[string]any
			if err := json.Unmarshal([]byte(line), &doc); err != nil {
				t.Fatalf("%q: line %s is not JSON: %v", tc.level, line, err)
			}
			name, _ := doc["metric"].(string)
			if _, ok := doc[name]; !ok {
				t.Errorf("%q: line %s lacks its value under %q", tc.level, line, name)
			}
			written = append(written, name)
			if aws, ok := doc["_aws"].(map[string]any); ok {
				extracted = append(extracted, name)
				cw := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
				if cw["Metrics"].([]any)[0].(map[string]any)["Name"] != name {
					t.Errorf("%q: EMF block of %s names another metric: %s", tc.level, name, line)
				}
			}
			if name == "karpenter_nodeclaims_created_total" && (doc["nodepool"] != "default" || doc[name] != 2.0) {
				t.Errorf("%q: dimensions or value lost in %s", tc.level, line)
			}
		}
		if strings.Join(written, ",") != strings.Join(all, ",") {
			t.Errorf("%q: lines written for %v, want every figure %v", tc.level, written, all)
		}
		if strings.Join(extracted, ",") != strings.Join(tc.extracted, ",") {
			t.Errorf("%q: extracted %v, want %v", tc.level, extracted, tc.extracted)
		}
	}
}

// The settings' values are the levels' names.
func TestLevelsMatchTheSetting(t *testing.T) {
	if Level(config.MetricsMinimal) != Minimal || Level(config.MetricsFull) != Full {
		t.Errorf("config's METRICS_LEVEL values %q, %q differ from %q, %q", config.MetricsMinimal, config.MetricsFull, Minimal, Full)
	}
}
