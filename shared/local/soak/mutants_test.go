package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mutant is a fault planted in the functions' code that the soak must
// catch, by the invariant it names, within the CI seeds. A soak that
// stops catching one has lost an invariant's teeth.
type mutant struct {
	name string
	// file, relative to the repository, and the one text in it the fault
	// replaces.
	file, old, new string
	// invariants are the ones that may catch it (the first that does
	// stops the run).
	invariants []string
}

// mutants are the faults a reviewer planted against the soak (issue 28):
// the garbage collector, the launch's existing-instance lookup and its
// token, the provisioner's topology spread, the consolidation policy and
// the spot-to-spot rule.
var mutants = []mutant{
	{
		name:       "garbage collection spares orphaned instances",
		file:       "shared/ticks/garbagecollection/garbagecollection.go",
		old:        "\t\torphaned = append(orphaned, i)\n\t}\n",
		new:        "\t\t_ = i\n\t}\n",
		invariants: []string{"no instance without a NodeClaim after the GC grace"},
	},
	{
		name:       "a launch ignores the claim's existing instance",
		file:       "shared/cloud/launch.go",
		old:        "\tif len(existing) > 0 {\n\t\t// A tick died between CreateFleet and recording its result.",
		new:        "\tif false && len(existing) > 0 {\n\t\t// A tick died between CreateFleet and recording its result.",
		invariants: []string{"never two instances for one NodeClaim"},
	},
	{
		name: "a launch failure not for capacity keeps its token",
		file: "shared/cloud/launch.go",
		old:  "\t\tcase errors.Is(err, instance.ErrNothingLaunched):\n\t\t\tcalls++\n\t\t\tattempt++\n",
		new:  "\t\tcase errors.Is(err, instance.ErrNothingLaunched):\n\t\t\tcalls++\n\t\t\tif errors.Is(err, instance.ErrNoCapacity) {\n\t\t\t\tattempt++\n\t\t\t}\n",
		// The claim never launches: its own clock runs out, or its pods'.
		invariants: []string{"no NodeClaim left unlaunched longer than 3 ticks while an offering is available", "every pod Running within 5 virtual minutes of capacity being available to it"},
	},
	{
		name:       "the provisioner drops topology spread",
		file:       "shared/core/scheduling/topology.go",
		old:        "\tfor _, tsc := range p.Spec.TopologySpreadConstraints {",
		new:        "\tfor _, tsc := range p.Spec.TopologySpreadConstraints[:0] {",
		invariants: []string{"every pod Running within 5 virtual minutes of capacity being available to it"},
	},
	{
		name:       "the consolidation policy is inverted",
		file:       "shared/core/disruption/methods.go",
		old:        "case np.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyWhenEmpty:",
		new:        "case np.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmpty:",
		invariants: []string{"at quiescence the $/h is within 10% of a fresh simulation"},
	},
	{
		name:       "spot-to-spot needs 150 cheaper types instead of 15",
		file:       "shared/core/disruption/types.go",
		old:        "minSpotToSpotOptions = 15",
		new:        "minSpotToSpotOptions = 150",
		invariants: []string{"at quiescence the $/h is within 10% of a fresh simulation"},
	},
}

// TestMutantsCaught plants each mutant (go build -overlay, the source
// left untouched), runs the CI seeds on it with the soak stopping at the
// first violation, and requires the mutant's invariant among them. It
// runs with `make soak-mutants` (KARPLESS_SOAK_MUTANTS=1), which CI runs
// after `make test`; KARPLESS_SOAK_MUTANT=<part of a name> picks one.
// TestMutantsApply keeps the planted faults in step with the code: each
// one's text must occur exactly once in its file, or make soak-mutants
// (run by CI after make test) would fail on a stale table, not a fault.
func TestMutantsApply(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	for _, m := range mutants {
		b, err := os.ReadFile(filepath.Join(root, m.file))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), m.old); n != 1 {
			t.Errorf("%s: %s holds the text to replace %d times, want once", m.name, m.file, n)
		}
	}
}

func TestMutantsCaught(t *testing.T) {
	if os.Getenv("KARPLESS_SOAK_MUTANTS") != "1" {
		t.Skip("KARPLESS_SOAK_MUTANTS=1 (make soak-mutants) runs the soak once per planted fault")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	seeds := fmt.Sprint(len(ciSeeds))
	hours := fmt.Sprintf("%.4f", ciDuration.Hours())
	caught, ran := 0, 0
	for _, m := range mutants {
		if pick := os.Getenv("KARPLESS_SOAK_MUTANT"); pick != "" && !strings.Contains(m.name, pick) {
			continue
		}
		ran++
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(root, m.file)
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(b), m.old); n != 1 {
				t.Fatalf("%s holds the text to replace %d times, want once: the mutant is out of date", m.file, n)
			}
			mutated := filepath.Join(dir, filepath.Base(m.file))
			if err := os.WriteFile(mutated, []byte(strings.Replace(string(b), m.old, m.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {src: mutated}})
			if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			bin := filepath.Join(dir, "karpless")
			build := exec.Command("go", "build", "-overlay", filepath.Join(dir, "overlay.json"), "-o", bin, "./cmd/karpless")
			build.Dir = root
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("building the mutant: %v\n%s", err, out)
			}
			// The seeds replay the same schedule, but the real-time parts
			// (kube-scheduler, watches, goroutines) make each run take its
			// own path; a fault that only consolidation at rest shows
			// (spot-to-spot) needs a node the rule decides about, which a
			// run may not leave. A missed fault gets two more runs.
			var text, last, by string
			for run := 1; run <= 3 && by == ""; run++ {
				text, last = soakOnce(t, root, bin, seeds, hours)
				for _, inv := range m.invariants {
					if strings.Contains(text, "invariant=\""+inv+"\"") {
						by = fmt.Sprintf("%s (run %d)", inv, run)
						break
					}
				}
			}
			if by == "" {
				t.Errorf("missed: no violation of %q in the CI seeds in 3 runs (%s); the last run's output:\n%s", m.invariants, strings.TrimSpace(last), text)
				return
			}
			caught++
			t.Logf("caught by %s in %s: %s", by, time.Since(start).Round(time.Second), strings.TrimSpace(last))
		})
	}
	t.Logf("soak-mutants: caught=%d of %d", caught, ran)
}

// soakOnce runs the CI seeds on the mutant's binary, stopping at the first
// violation, and returns the output and its last line.
func soakOnce(t *testing.T, root, bin, seeds, hours string) (text, last string) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, bin, "soak", "--first-seed", fmt.Sprint(ciSeeds[0]), "--seeds", seeds, "--hours", hours, "--quick", "--fail-fast")
	run.Dir = root
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	_ = run.Run() // violations exit non-zero
	text = out.String()
	last = text
	if i := strings.LastIndex(strings.TrimRight(text, "\n"), "\n"); i >= 0 {
		last = text[i+1:]
	}
	return text, last
}
