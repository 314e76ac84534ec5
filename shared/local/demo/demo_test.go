package demo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/karpless/karpless/shared/local/controlplane"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// TestDefaultScenario runs `make demo`'s bundled scenario and checks what
// its summary claims, step by step.
func TestDefaultScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the demo needs a kube-apiserver and takes minutes")
	}
	s, err := DefaultScenario()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	var out bytes.Buffer
	dir := t.TempDir()
	sum, err := Run(ctx, Options{Scenario: s, Out: &out, ReportDir: dir})
	if errors.Is(err, controlplane.ErrNotBuilt) && os.Getenv(kubetest.RequireEnv) != "1" {
		t.Skip(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("demo output:\n%s", out.String())
		}
	}()
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	if sum.Leaked != 0 || sum.PodsPending != 0 {
		t.Errorf("leaked=%d pending=%d, want 0 and 0", sum.Leaked, sum.PodsPending)
	}
	// web 3 + api 6, plus the node-agent DaemonSet's pod on every node.
	if want := 9 + sum.Nodes; sum.PodsRunning != want {
		t.Errorf("pods running %d, want %d (9 + one agent per node, %d nodes)", sum.PodsRunning, want, sum.Nodes)
	}
	if sum.Nodes < 2 || sum.Nodes > 9 {
		t.Errorf("%d nodes for 9 pods", sum.Nodes)
	}
	if len(sum.Steps) != len(s.Steps) {
		t.Fatalf("%d step results for %d steps", len(sum.Steps), len(s.Steps))
	}
	for _, st := range sum.Steps {
		t.Logf("step %q: $/hour %.3f -> %.3f: %s", st.Name, st.CostFrom, st.CostTo, strings.Join(st.CostCauses, "; "))
		if st.Failed != "" {
			t.Errorf("step %q failed: %s", st.Name, st.Failed)
		}
	}
	if note := sum.Steps[1].Note; !strings.Contains(note, "before the instance's two-minute deadline") {
		t.Errorf("interruption step note %q: pods did not move before the deadline", note)
	}
	if shrink := sum.Steps[2]; shrink.CostTo >= shrink.CostFrom {
		t.Errorf("consolidation did not lower the cost: $%.3f/h -> $%.3f/h", shrink.CostFrom, shrink.CostTo)
	}
	// The AMI release's step loses the GPU node (its Job's pod is evicted
	// by the drift and not retried): its $/hour drop is put down to that
	// node leaving, not to the roll.
	if ami := sum.Steps[3]; len(ami.CostCauses) == 0 || !strings.Contains(ami.CostCauses[0], "the gpu node") || !strings.Contains(ami.CostCauses[0], " left") {
		t.Errorf("AMI step $/hour %.3f -> %.3f put down to %q, want the gpu node leaving first", ami.CostFrom, ami.CostTo, ami.CostCauses)
	}
	if sum.CostPerHour <= 0 {
		t.Errorf("cost per hour %.3f", sum.CostPerHour)
	}
	html, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	// The timeline: labelled ticks, and the drift's replacements shaded
	// and explained (TestTimelineChart checks the layout).
	for _, want := range []string{`name="viewport"`, "<svg", s.Steps[0].Name, "what changed $/hour", "the gpu node", "leaked-instances=0", `class="tick"`, ">00:00<", `class="band"`, "drift: replacements run beside the old nodes", "ran beside the nodes they replace until those drained"} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
}
