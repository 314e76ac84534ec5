package main

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/karpenter/pkg/operator/logging"

	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/local/workload"
)

// TestBoundBelowThePlans checks the LP bound (bench/bound) on the bench's
// own inputs, small: it is never above the $/h of Karpless's plan, of that
// plan after the consolidation pass, or of Karpenter's plan, all priced as
// the bench prices them.
func TestBoundBelowThePlans(t *testing.T) {
	log.SetLogger(logging.NopLogger)
	types, err := workload.CatalogTypes()
	if err != nil {
		t.Fatal(err)
	}
	ktypes := convertTypes(types)
	daemons := workload.DaemonSets()
	for _, c := range []workload.Case{workload.GettingStarted, workload.Burstable} {
		for _, mix := range workload.Mixes {
			withKarpenter := mix == workload.KarpenterMix || mix == workload.BatchMix
			t.Run(string(c)+"/"+string(mix), func(t *testing.T) {
				const n = 60
				w, err := workload.Build(mix, n, 7)
				if err != nil {
					t.Fatal(err)
				}
				pools := workload.NodePools(c, w.ExtraNodePools)
				lb := lowerBound(c, mix, n, w.Pods, pools, types, daemons)
				if lb <= 0 {
					t.Fatalf("no bound: %v", lb)
				}
				kl := &karplessWorld{pools: pools, daemons: daemons, classes: map[string]*scheduling.NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: types}}}
				o, _, r := kl.runKarpless(w.Pods)
				if o.failed > 0 {
					t.Fatalf("Karpless left %d pods unplaced", o.failed)
				}
				after := kl.consolidate(r, w.PDBs, o.cost)
				plans := map[string]float64{"karpless": o.cost.total(), "karpless after consolidation": after.cost.total()}
				if withKarpenter {
					kw := newKarpenterWorld(types, ktypes, pools, daemons)
					ko, _ := kw.runKarpenter(w.Pods, true)
					if ko.failed > 0 || ko.unplaced > 0 || ko.timedOut {
						t.Fatalf("Karpenter left pods unplaced: %+v", ko)
					}
					plans["karpenter"] = ko.cost.total()
				}
				for who, cost := range plans {
					if lb > cost+1e-9 {
						t.Errorf("bound $%.4f/h above %s's $%.4f/h", lb, who, cost)
					}
					t.Logf("%s $%.4f/h, bound $%.4f/h, gap %.3f", who, cost, lb, cost/lb)
				}
			})
		}
	}
}
