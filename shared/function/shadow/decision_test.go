package shadow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
)

var at = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

func launchClaim() *scheduling.NewNodeClaim {
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web"}}
	}
	return &scheduling.NewNodeClaim{
		NodePool: "general", NodeClass: "default",
		InstanceTypes: []*scheduling.InstanceType{
			{Name: "c6a.large", Offerings: []scheduling.Offering{{Zone: "us-west-2a", CapacityType: "spot", Price: 0.0341, Available: true}, {Zone: "us-west-2a", CapacityType: "on-demand", Price: 0.0765, Available: true}}},
			{Name: "m5.large", Offerings: []scheduling.Offering{{Zone: "us-west-2a", CapacityType: "spot", Price: 0.041, Available: true}}},
		},
		Pods: []*corev1.Pod{pod("web-2"), pod("web-1")},
	}
}

// TestRecordFormat pins the record's JSON: the log line's key and field
// names are what `karpless shadow report` and people's queries read.
func TestRecordFormat(t *testing.T) {
	d := Launch(launchClaim(), "provisioning")
	d.Function, d.At = "provisioner", at
	want := `{"kind":"launch","function":"provisioner","at":"2026-11-27T10:00:00Z","nodepool":"general","reason":"provisioning",` +
		`"instanceTypes":["c6a.large","m5.large"],"instanceTypeCount":2,` +
		`"offering":{"instanceType":"c6a.large","zone":"us-west-2a","capacityType":"spot","price":0.0341},` +
		`"pods":["web/web-1","web/web-2"],"podCount":2,"priceAfter":0.0341}`
	if got := d.Marshal(); got != want {
		t.Errorf("launch record:\n got %s\nwant %s", got, want)
	}
	c := Decision{
		Kind: KindConsolidate, Function: "disruption", At: at, NodePool: "general", Method: "SingleNodeConsolidation", Reason: "can be replaced by a cheaper node",
		Candidates:   []Node{{NodeClaim: "general-a", Node: "ip-1", NodePool: "general", InstanceType: "m5.xlarge", Zone: "us-west-2a", CapacityType: "on-demand", Price: 0.192, Pods: 3}},
		Replacements: []Decision{Launch(launchClaim(), "")},
		PriceBefore:  0.192, PriceAfter: 0.0341, Savings: 0.1579,
	}
	for _, key := range []string{`"kind":"consolidate"`, `"method":"SingleNodeConsolidation"`, `"candidates":[{"nodeclaim":"general-a","node":"ip-1","nodepool":"general","instanceType":"m5.xlarge","zone":"us-west-2a","capacityType":"on-demand","price":0.192,"pods":3}]`,
		`"replacements":[{"kind":"launch"`, `"priceBefore":0.192`, `"savings":0.1579`} {
		if !strings.Contains(c.Marshal(), key) {
			t.Errorf("consolidation record lacks %s: %s", key, c.Marshal())
		}
	}
	if kind, name := c.Subject(); kind != "Node" || name != "ip-1" {
		t.Errorf("consolidation subject %s %s", kind, name)
	}
	if kind, name := d.Subject(); kind != "NodePool" || name != "general" {
		t.Errorf("launch subject %s %s", kind, name)
	}
	if d.Key() == c.Key() || d.Key() != Launch(launchClaim(), "again").Key() {
		t.Error("keys: a launch must keep its key when made again, and differ from other decisions")
	}
}

// TestLaunchRecordsCredits: a launch onto a burstable type above its
// baseline records the credits beside the offering, and its price after
// is both, as the provisioner decided with them.
func TestLaunchRecordsCredits(t *testing.T) {
	n := &scheduling.NewNodeClaim{
		NodePool: "general", NodeClass: "default",
		InstanceTypes: []*scheduling.InstanceType{{Name: "t4g.small",
			Labels:    map[string]string{wellknown.InstanceFamilyLabel: "t4g", wellknown.InstanceSizeLabel: "small"},
			Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Offerings: []scheduling.Offering{{Zone: "us-west-2a", CapacityType: "on-demand", Price: 0.0168, Available: true}}}},
		// 20% of 2 vCPUs is the baseline: 600m above it at $0.04.
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
	}
	d := Launch(n, "provisioning")
	if d.Offering == nil || d.Offering.Price != 0.0168 || math.Abs(d.Offering.Credits-0.024) > 1e-9 || math.Abs(d.PriceAfter-0.0408) > 1e-9 {
		t.Fatalf("offering %+v, price after %v: want $0.0168/h and $0.024/h of credits", d.Offering, d.PriceAfter)
	}
	if !strings.Contains(d.Text(), "+ $0.0240/h of CPU credits") {
		t.Errorf("text %q does not name the credits", d.Text())
	}
}

// TestRecorder: one log line (with the "decision" key) and one annotated
// Event per decision and invocation, whatever the passes repeat; Flush
// keeps them in the store, where a later invocation's repeat counts.
func TestRecorder(t *testing.T) {
	// NewSimpleClientset: NewClientset builds a type converter, 2 s.
	cs := fake.NewSimpleClientset() //nolint:staticcheck
	clk := clocktesting.NewFakeClock(at)
	var logs bytes.Buffer
	newRecorder := func() *Recorder {
		return &Recorder{Function: "provisioner", Namespace: ns, ConfigMaps: cs.CoreV1(), Clock: clk, Log: record.NewLogger(&logs, "info")}
	}
	ctx := context.Background()
	r := newRecorder()
	events := record.NewRecorder(cs.CoreV1(), clk, slog.New(slog.DiscardHandler))
	for range 3 {
		r.Record(Launch(launchClaim(), "provisioning"), events)
	}
	events.Flush(ctx)
	r.Flush(ctx)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("log lines: %q", lines)
	}
	d, ok := ParseLine(lines[0])
	if !ok || d.Kind != KindLaunch || d.Function != "provisioner" || !d.At.Equal(at) || d.Offering.InstanceType != "c6a.large" {
		t.Errorf("log line %s read back as %+v, %v", lines[0], d, ok)
	}
	evs, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if len(evs.Items) != 1 {
		t.Fatalf("events: %d", len(evs.Items))
	}
	e := evs.Items[0]
	var fromEvent Decision
	if e.Reason != EventReason || e.InvolvedObject.Kind != "NodePool" || e.InvolvedObject.Name != "general" ||
		json.Unmarshal([]byte(e.Annotations[DecisionAnnotation]), &fromEvent) != nil || fromEvent.Key() != d.Key() ||
		!strings.HasPrefix(e.Message, "shadow: would launch 1 nodeclaim(s) of nodepool general for 2 pod(s) (web/web-1, web/web-2): c6a.large spot") {
		t.Errorf("event %s %s/%s %q %q", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message, e.Annotations)
	}
	clk.Step(time.Minute)
	r2 := newRecorder()
	r2.Record(Launch(launchClaim(), "provisioning"), nil)
	r2.Record(Decision{Kind: KindExpire, NodeClaim: "general-x", NodePool: "general", PriceBefore: 0.1}, nil)
	r2.Flush(ctx)
	entries, err := ReadStores(ctx, cs.CoreV1(), ns)
	if err != nil || len(entries) != 2 {
		t.Fatalf("store: %d entries, %v", len(entries), err)
	}
	launch := entries[0]
	if launch.Decision.Kind != KindLaunch || entries[1].Decision.Kind != KindExpire || launch.Seen != 2 || !launch.First.Equal(at) || !launch.Last.Equal(at.Add(time.Minute)) {
		t.Errorf("store entries: %+v", entries)
	}
}

// TestStoreLimits: entries not made again for StoreRetention go, and
// beyond the size limit the ones last made longest ago.
func TestStoreLimits(t *testing.T) {
	old := Decision{Kind: KindExpire, NodeClaim: "old", At: at}
	kept := merge(nil, []Decision{old}, at.Add(StoreRetention+time.Minute))
	if len(kept) != 0 {
		t.Errorf("an entry past retention was kept: %+v", kept)
	}
	var ds []Decision
	for i := range 2000 {
		ds = append(ds, Decision{Kind: KindExpire, NodeClaim: fmt.Sprintf("claim-%04d", i), Reason: strings.Repeat("x", 300), At: at.Add(time.Duration(i) * time.Second)})
	}
	out := merge(nil, ds, at.Add(time.Hour))
	b, _ := json.Marshal(out)
	if len(b) > maxStoreBytes || len(out) == 0 || out[0].Decision.NodeClaim != "claim-1999" {
		t.Errorf("%d entries, %d bytes, newest first %q", len(out), len(b), out[0].Decision.NodeClaim)
	}
}
