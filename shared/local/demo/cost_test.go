package demo

import (
	"math"
	"strings"
	"testing"
)

// world is a made-up account for the ledger: instances by NodeClaim.
type world map[string]paidInstance

func (w world) launch(claim, pool, it, ct string, price float64) {
	w[claim] = paidInstance{ID: "i-" + claim, Claim: claim, NodePool: pool, InstanceType: it, CapacityType: ct, Price: price}
}

func (w world) list() []paidInstance {
	var out []paidInstance
	for _, p := range w {
		out = append(out, p)
	}
	return out
}

// TestCostCauses replays what the demo's steps do to the bill, as a
// recorded run did them, and checks each step's $/hour change is put down
// to what made it.
func TestCostCauses(t *testing.T) {
	cases := []struct {
		name string
		// before sets up the account at t=0, step acts within (0, 100].
		before, step func(c *costs, w world)
		// first is what the largest cause must say; delta its change.
		first string
		delta float64
		also  []string
	}{{
		// The recorded run: the AMI release drifts every node. The GPU
		// node's replacement comes up beside it; the old one drains, its
		// Job's pod is not retried, so the replacement is left empty and
		// removed. The roll itself is about even.
		name: "AMI roll: the GPU node leaving, not the roll",
		before: func(c *costs, w world) {
			w.launch("general-2kfn8", "general", "c6g.large", "spot", 0.022)
			w.launch("general-8f48q", "general", "m6a.large", "spot", 0.033)
			w.launch("gpu-dfwfj", "gpu", "g4dn.xlarge", "on-demand", 0.526)
		},
		step: func(c *costs, w world) {
			c.replaced("drift", []string{"general-2kfn8"}, []string{"general-w6vn8"})
			w.launch("general-w6vn8", "general", "c7g.large", "spot", 0.021)
			c.observe(10, w.list())
			c.replaced("drift", []string{"gpu-dfwfj"}, []string{"gpu-krmjg"})
			w.launch("gpu-krmjg", "gpu", "g4dn.xlarge", "on-demand", 0.526)
			c.replaced("drift", []string{"general-8f48q"}, []string{"general-qzl6x"})
			w.launch("general-qzl6x", "general", "m7g.large", "spot", 0.026)
			c.observe(20, w.list())
			c.retiring("general-2kfn8", "Drifted")
			c.retiring("gpu-dfwfj", "Drifted")
			delete(w, "general-2kfn8")
			delete(w, "gpu-dfwfj")
			c.observe(40, w.list())
			c.retiring("gpu-krmjg", "Empty")
			delete(w, "gpu-krmjg")
			delete(w, "general-8f48q")
			c.observe(70, w.list())
		},
		first: "−0.526: the gpu node gpu-krmjg (g4dn.xlarge on-demand, $0.526/h) left, empty",
		delta: -0.526,
		also:  []string{"−0.008: drift replaced 3 nodes with 3"},
	}, {
		name:   "a workload arrives: launches by NodePool",
		before: func(c *costs, w world) {},
		step: func(c *costs, w world) {
			w.launch("general-a", "general", "c5ad.xlarge", "spot", 0.0588)
			w.launch("general-b", "general", "c6g.large", "spot", 0.022)
			c.observe(5, w.list())
			w.launch("gpu-a", "gpu", "g4dn.xlarge", "on-demand", 0.526)
			c.observe(9, w.list())
		},
		first: "+0.526: the gpu node gpu-a (g4dn.xlarge on-demand, $0.526/h) launched",
		delta: 0.526,
		also:  []string{"+0.081: 2 general nodes launched"},
	}, {
		// Consolidation deletes without replacement: each reason its own
		// cause; an interrupted node from an earlier step leaves here.
		name: "the workload shrinks: nodes leave, and why",
		before: func(c *costs, w world) {
			w.launch("general-a", "general", "m6a.large", "spot", 0.033)
			w.launch("general-b", "general", "m6a.large", "spot", 0.030)
			w.launch("general-c", "general", "c5ad.xlarge", "spot", 0.0588)
			c.retiring("general-c", "interrupted")
		},
		step: func(c *costs, w world) {
			c.replaced("emptiness", []string{"general-a", "general-b"}, nil)
			c.retiring("general-a", "Empty")
			c.retiring("general-b", "Empty")
			delete(w, "general-a")
			delete(w, "general-b")
			delete(w, "general-c")
			c.observe(30, w.list())
		},
		first: "−0.063: 2 general nodes left, empty",
		delta: -0.063,
		also:  []string{"−0.059: the general node general-c (c5ad.xlarge spot, $0.059/h) left, interrupted by EC2"},
	}, {
		name: "spot prices move",
		before: func(c *costs, w world) {
			w.launch("general-a", "general", "m6a.large", "spot", 0.033)
		},
		step: func(c *costs, w world) {
			w.launch("general-a", "general", "m6a.large", "spot", 0.036)
			c.observe(50, w.list())
		},
		first: "+0.003: spot prices moved",
		delta: 0.003,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, w := newCosts(), world{}
			tc.before(c, w)
			c.observe(0, w.list())
			from := c.total()
			tc.step(c, w)
			c.observe(100, w.list())
			causes := c.causes(0, 100)
			if len(causes) == 0 {
				t.Fatal("no cause")
			}
			sum := 0.0
			for _, x := range causes {
				sum += x.Delta
			}
			if math.Abs(sum-(c.total()-from)) > 1e-9 {
				t.Errorf("causes add up to %+.4f, the step changed $/hour by %+.4f", sum, c.total()-from)
			}
			if math.Abs(causes[0].Delta-tc.delta) > 1e-9 {
				t.Errorf("largest cause %+.4f (%s), want %+.4f", causes[0].Delta, causes[0], tc.delta)
			}
			got := c.explain(0, 100)
			if got[0] != tc.first {
				t.Errorf("first cause %q, want %q (all: %q)", got[0], tc.first, got)
			}
			for _, want := range tc.also {
				if !strings.Contains(strings.Join(got, "\n"), want) {
					t.Errorf("causes %q lack %q", got, want)
				}
			}
		})
	}
}

// TestCostExplainCaps: past three causes the rest are one line; changes
// under a tenth of a cent are left out.
func TestCostExplainCaps(t *testing.T) {
	c, w := newCosts(), world{}
	c.observe(0, nil)
	for i, pool := range []string{"a", "b", "c", "d", "e"} {
		w.launch(pool+"-1", pool, "m6a.large", "spot", 0.01*float64(i+1))
	}
	w.launch("f-1", "f", "t4g.nano", "spot", 0.0001)
	c.observe(1, w.list())
	got := c.explain(0, 1)
	want := []string{
		"+0.050: the e node e-1 (m6a.large spot, $0.050/h) launched",
		"+0.040: the d node d-1 (m6a.large spot, $0.040/h) launched",
		"+0.030: the c node c-1 (m6a.large spot, $0.030/h) launched",
		"+0.030: 2 smaller changes",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("explain:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
