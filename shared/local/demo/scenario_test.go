package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultScenarioParses(t *testing.T) {
	s, err := DefaultScenario()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Steps) != 4 || s.Steps[1].Interrupt == nil || s.Steps[3].AMIRelease == "" {
		t.Fatalf("bundled scenario changed shape: %+v", s.Steps)
	}
	if s.Expect == nil || s.Expect.PodsPending == nil || *s.Expect.PodsPending != 0 {
		t.Fatalf("bundled scenario must promise no pending pods: %+v", s.Expect)
	}
}

func TestScenarioValidation(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, wantErr string
	}{
		{"missing name and cluster", "steps: [{name: a}]", "name is required"},
		{"no steps", "name: x\ncluster: c", "at least one step"},
		{"two actions", "name: x\ncluster: c\nsteps: [{name: a, apply: 'x', amiRelease: v1}]", "one action per step"},
		{"bad until", "name: x\ncluster: c\nsteps: [{name: a, until: forever}]", `until "forever"`},
		{"bad interrupt", "name: x\ncluster: c\nsteps: [{name: a, interrupt: {kind: meteor}}]", `interrupt kind "meteor"`},
		{"bad scale", "name: x\ncluster: c\nsteps: [{name: a, scale: {replicas: 2}}]", "scale needs a deployment"},
		{"bad duration", "name: x\ncluster: c\nsteps: [{name: a, timeout: soon}]", `duration "soon"`},
		{"unknown field", "name: x\ncluster: c\nstep: []", "unknown field"},
		{"not yaml", "{", "scenario.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "scenario.yaml")
			if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadScenario(p)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestScenarioDefaults(t *testing.T) {
	s, err := parse([]byte("name: x\ncluster: c\nsteps: [{name: a, interrupt: {kind: rebalance}}]"), "t")
	if err != nil {
		t.Fatal(err)
	}
	st := s.Steps[0]
	if s.Namespace != "demo" || st.Until != UntilSettled || st.Timeout.Duration != 5*time.Minute || st.Interrupt.Count != 1 {
		t.Fatalf("defaults not applied: ns=%q step=%+v interrupt=%+v", s.Namespace, st, st.Interrupt)
	}
}

func TestLoadScenarioMissingFile(t *testing.T) {
	if _, err := LoadScenario(filepath.Join(t.TempDir(), "nope.yaml")); err == nil || !strings.Contains(err.Error(), "reading scenario") {
		t.Fatalf("error %v", err)
	}
}
