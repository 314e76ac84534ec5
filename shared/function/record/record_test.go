package record

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/local/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env, kubetest.Options{NoCRDs: true})) }

// Against a real API server, which validates where an Event may live.
func TestRecorderFoldsRepeatsAndPlacesClusterScopedEvents(t *testing.T) {
	e := kubetest.Need(t, env)
	client := e.Clients.Core
	ns := e.Namespace(t)
	name := kubetest.Name(t)
	r := NewRecorder(client.CoreV1(), clocktesting.NewFakeClock(time.Now()), nil)
	claim := Object{Kind: "NodeClaim", APIVersion: "karpenter.sh/v1", Name: name, UID: "u1"}
	pod := Object{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: "web-1", UID: "u2"}
	r.Normal(claim, "Launched", "launched %s", "i-1")
	r.Normal(claim, "Launched", "launched %s", "i-1")
	r.Warning(pod, "FailedScheduling", "no NodePool tolerates taint %s", "x")
	r.Flush(context.Background())
	mine := func() []string {
		l, _ := client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		var out []string
		for _, ev := range l.Items {
			out = append(out, ev.Reason)
			if ev.Count != 2 {
				t.Errorf("event count %d, want the repeat folded into 2", ev.Count)
			}
		}
		return out
	}
	if got := mine(); len(got) != 1 {
		t.Fatalf("cluster-scoped events in default: %v", got)
	}
	shop, _ := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if len(shop.Items) != 1 || shop.Items[0].Type != "Warning" || !strings.Contains(shop.Items[0].Message, "taint x") {
		t.Fatalf("pod events: %+v", shop.Items)
	}
	r.Flush(context.Background())
	if got := mine(); len(got) != 1 {
		t.Fatal("flush wrote events twice")
	}
}

func TestMetricsEMF(t *testing.T) {
	m := NewMetrics("Karpless")
	m.Count("karpenter_nodeclaims_created_total", 1, map[string]string{"nodepool": "default"})
	m.Count("karpenter_nodeclaims_created_total", 2, map[string]string{"nodepool": "default"})
	m.Observe("karpenter_provisioner_scheduling_duration_seconds", "Seconds", 0.5, nil)
	m.Observe("karpenter_provisioner_scheduling_duration_seconds", "Seconds", 0.7, nil)
	var b bytes.Buffer
	if err := m.Flush(&b, 1700000000000); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 EMF lines, got %d:\n%s", len(lines), b.String())
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &doc); err != nil {
		t.Fatal(err)
	}
	aws := doc["_aws"].(map[string]any)
	cw := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if doc["karpenter_nodeclaims_created_total"] != 3.0 || doc["nodepool"] != "default" || cw["Namespace"] != "Karpless" {
		t.Fatalf("unexpected EMF document %s", lines[0])
	}
	if !strings.Contains(lines[1], "[0.5,0.7]") {
		t.Fatalf("distribution not kept: %s", lines[1])
	}
}

// A distribution of more values than one EMF document may hold (100, as
// CloudWatch rejects more) is written as several lines, none over the
// limit, together holding every value in order.
func TestMetricsEMFSplitsLongDistributions(t *testing.T) {
	m := NewMetrics("Karpless")
	for i := range 250 {
		m.Observe("karpenter_pods_startup_duration_seconds", "Seconds", float64(i), nil)
	}
	var b bytes.Buffer
	if err := m.Flush(&b, 1700000000000); err != nil {
		t.Fatal(err)
	}
	var all []float64
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	for _, line := range lines {
		var doc struct {
			AWS    map[string]any `json:"_aws"`
			Values []float64      `json:"karpenter_pods_startup_duration_seconds"`
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if len(doc.Values) > MaxValuesPerLine || doc.AWS == nil {
			t.Errorf("a line of %d values (EMF block %v)", len(doc.Values), doc.AWS != nil)
		}
		all = append(all, doc.Values...)
	}
	if len(lines) != 3 || len(all) != 250 || all[0] != 0 || all[249] != 249 || all[100] != 100 {
		t.Fatalf("%d lines holding %d values", len(lines), len(all))
	}
}
