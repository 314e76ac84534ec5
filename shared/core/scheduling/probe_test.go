package scheduling_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/local/workload"
)

// TestZoneProbesChangeNothing solves each workload with phase one's zone
// probes and with every candidate evaluated in full: the probes only skip
// evaluations that would fail, so every NodeClaim, its pods and its types
// must be the same.
func TestZoneProbesChangeNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	cases := append([]mixSnapshot{{"bench", workload.Snapshot(workload.Spec{Pods: 3000, Seed: 7, ARM64: true, GPU: true}, benchTypes(t), 50)}}, mixSnapshots(t, 1500)...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := summarize(scheduling.Solve(c.snap, scheduling.Provisioning()))
			want := summarize(scheduling.SolveWithoutProbes(c.snap, scheduling.Provisioning()))
			if len(got) == 0 {
				t.Fatal("no NodeClaims: the case tests nothing")
			}
			if !reflect.DeepEqual(got, want) {
				for i := range min(len(got), len(want)) {
					if got[i] != want[i] {
						t.Fatalf("NodeClaim %d differs:\nwith probes    %s\nwithout probes %s", i, got[i], want[i])
					}
				}
				t.Fatalf("%d NodeClaims with probes, %d without", len(got), len(want))
			}
		})
	}
}

// summarize renders each NodeClaim as one line: pool, requirements, pods.
func summarize(r *scheduling.Results) []string {
	var out []string
	for _, c := range r.NewNodeClaims {
		var pods []string
		for _, p := range c.Pods {
			pods = append(pods, p.Name)
		}
		out = append(out, fmt.Sprintf("%s %v %v", c.NodePool, c.Requirements, pods))
	}
	return out
}

// mixSnapshot is a named batch to solve.
type mixSnapshot struct {
	name string
	snap *scheduling.Snapshot
}

// mixSnapshots are the bench's NodePool cases and pod mixes (bench/) at
// pods pods each, on the whole catalog: "<case>/<mix>".
func mixSnapshots(t *testing.T, pods int) []mixSnapshot {
	t.Helper()
	types, err := workload.CatalogTypes()
	if err != nil {
		t.Fatal(err)
	}
	var out []mixSnapshot
	for _, c := range []workload.Case{workload.GettingStarted, workload.Burstable} {
		for _, mix := range workload.Mixes {
			w, err := workload.Build(mix, pods, 11)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, mixSnapshot{fmt.Sprintf("%s/%s", c, mix), &scheduling.Snapshot{
				Pods:        w.Pods,
				NodePools:   workload.NodePools(c, w.ExtraNodePools),
				NodeClasses: map[string]*scheduling.NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: types}},
				DaemonSets:  workload.DaemonSets(),
			}})
		}
	}
	return out
}
