package whatif

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// What a static NodePool will do shows in simulate (per pool, as a line)
// and in explain (on each of its claims).
func TestStaticPools(t *testing.T) {
	static := func(f *fixture, replicas int64) {
		np := f.pool("fixed", karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}})
		np.Spec.Replicas = &replicas
	}
	t.Run("scale up", func(t *testing.T) {
		f := newFixture(t)
		static(f, 5)
		for _, n := range []string{"s1", "s2", "s3"} {
			f.node(n, "fixed", "m5.large", zoneA, wellknown.CapacityTypeSpot, time.Hour)
		}
		r := f.world().Simulate()
		if len(r.Provisioning.Static) != 1 || r.Provisioning.Static[0].Create != 2 || r.Provisioning.Static[0].Launch == nil {
			t.Fatalf("static %+v", r.Provisioning.Static)
		}
		// m5.large spot is cheapest in 1b (0.035), twice.
		if !near(r.Provisioning.AddedPerHour, 0.070) {
			t.Errorf("added %v, want two m5.large spot", r.Provisioning.AddedPerHour)
		}
		var b bytes.Buffer
		if err := r.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if want := "static nodepool fixed: 3 of 5 replicas, creating 2, each as m5.large spot in us-east-1b at $0.0350/h"; !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
		// Idle static nodes are never consolidated.
		if r.Disruption.Command != nil {
			t.Errorf("command %+v on static nodes", r.Disruption.Command)
		}
	})
	t.Run("scale down", func(t *testing.T) {
		f := newFixture(t)
		static(f, 1)
		f.node("s1", "fixed", "m5.large", zoneA, wellknown.CapacityTypeSpot, time.Hour)
		f.node("s2", "fixed", "m5.large", zoneA, wellknown.CapacityTypeSpot, time.Hour)
		f.pod("web", "a", "1", "1Gi", "s1")
		w := f.world()
		r := w.Simulate()
		if got := r.Disruption.ScaledDown; len(got) != 1 || got[0] != "claim-s2" {
			t.Errorf("scaled down %v, want the empty claim-s2", got)
		}
		if !near(r.Cost.AfterDisruption, r.Cost.Before-0.040) {
			t.Errorf("cost after disruption %v, before %v", r.Cost.AfterDisruption, r.Cost.Before)
		}
		var b bytes.Buffer
		if err := r.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if want := "delete claim-s2: static nodepool fixed has 2 of 1 replicas (scale-down, no budget)"; !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
		nr, err := w.ExplainNodeClaim("claim-s2")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(nr.Disruption.Static, "deleting 1; the next disruption tick deletes this claim") {
			t.Errorf("explain says %q", nr.Disruption.Static)
		}
		for _, m := range nr.Disruption.Methods {
			if m.Method != "Drift" && !strings.HasPrefix(m.Verdict, "static NodePool") {
				t.Errorf("%s: %s", m.Method, m.Verdict)
			}
		}
	})
}
