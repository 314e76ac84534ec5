// Package demo runs a scenario end to end on this machine: a real API
// server, the AWS emulator and the functions' real engines on a virtual clock.
package demo

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/yaml"
)

//go:embed scenarios/default.yaml
var defaultScenario []byte

// Scenario is a demo script: manifests applied first, then steps.
type Scenario struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Cluster is the emulated EKS cluster's name (manifests refer to it in
	// discovery tags and the node role).
	Cluster string `json:"cluster"`
	// Namespace holds the workloads.
	Namespace string `json:"namespace"`
	// Manifests are applied before the first step (NodePools, EC2NodeClasses).
	Manifests string `json:"manifests"`
	Steps     []Step `json:"steps"`
	// Expect is checked at the end (the CI test reads it too).
	Expect *Expect `json:"expect,omitempty"`
}

// Step is one thing that happens, then a condition to wait for.
type Step struct {
	Name string `json:"name"`
	// Apply creates or updates the manifests (multi-document YAML).
	Apply string `json:"apply,omitempty"`
	// Scale sets a Deployment's replicas.
	Scale *Scale `json:"scale,omitempty"`
	// Interrupt puts an interruption event for running nodes in the queue.
	Interrupt *Interrupt `json:"interrupt,omitempty"`
	// AMIRelease publishes a new EKS AMI release; "@latest" aliases move.
	AMIRelease string `json:"amiRelease,omitempty"`
	// Until is what the step waits for: settled (every pod runs, no
	// NodeClaim in motion), consolidated (settled and disruption has
	// nothing more to do) or driftless (settled, no NodeClaim drifted, and
	// disruption quiet for driftQuiet: what the roll left behind is gone).
	Until string `json:"until"`
	// Timeout bounds the wait (virtual time).
	Timeout Duration `json:"timeout,omitempty"`
}

// Scale sets a Deployment's replicas.
type Scale struct {
	Deployment string `json:"deployment"`
	Replicas   int32  `json:"replicas"`
}

// Interrupt chooses nodes to interrupt.
type Interrupt struct {
	// Kind is spot-interruption, rebalance, state-change or scheduled-change.
	Kind string `json:"kind"`
	// CapacityType narrows the choice (spot, on-demand); empty is any.
	CapacityType string `json:"capacityType,omitempty"`
	// Count is how many nodes (default 1), busiest first.
	Count int `json:"count,omitempty"`
}

// Expect is the end state a scenario promises.
type Expect struct {
	Nodes       *int `json:"nodes,omitempty"`
	PodsRunning *int `json:"podsRunning,omitempty"`
	PodsPending *int `json:"podsPending,omitempty"`
}

// Duration is a time.Duration written as "90s" or "3m" in YAML.
type Duration struct{ time.Duration }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"3m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	d.Duration = v
	return nil
}

// Until conditions.
const (
	UntilSettled      = "settled"
	UntilConsolidated = "consolidated"
	UntilDriftless    = "driftless"
)

// DefaultScenario is the bundled scenario (also at shared/local/demo/scenarios/default.yaml).
func DefaultScenario() (*Scenario, error) { return parse(defaultScenario, "bundled scenario") }

// LoadScenario reads a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scenario: %w", err)
	}
	return parse(b, path)
}

func parse(b []byte, what string) (*Scenario, error) {
	s := &Scenario{}
	if err := yaml.UnmarshalStrict(b, s); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return s, nil
}

func (s *Scenario) validate() error {
	var errs []error
	if s.Name == "" {
		errs = append(errs, errors.New("name is required"))
	}
	if s.Cluster == "" {
		errs = append(errs, errors.New("cluster is required"))
	}
	if s.Namespace == "" {
		s.Namespace = "demo"
	}
	if len(s.Steps) == 0 {
		errs = append(errs, errors.New("at least one step is required"))
	}
	for i := range s.Steps {
		st := &s.Steps[i]
		actions := 0
		for _, set := range []bool{st.Apply != "", st.Scale != nil, st.Interrupt != nil, st.AMIRelease != ""} {
			if set {
				actions++
			}
		}
		if actions > 1 {
			errs = append(errs, fmt.Errorf("step %d (%s): one action per step (apply, scale, interrupt or amiRelease)", i+1, st.Name))
		}
		switch st.Until {
		case UntilSettled, UntilConsolidated, UntilDriftless:
		case "":
			st.Until = UntilSettled
		default:
			errs = append(errs, fmt.Errorf("step %d (%s): until %q is not settled, consolidated or driftless", i+1, st.Name, st.Until))
		}
		if st.Timeout.Duration == 0 {
			st.Timeout.Duration = 5 * time.Minute
		}
		if st.Interrupt != nil {
			switch st.Interrupt.Kind {
			case "spot-interruption", "rebalance", "state-change", "scheduled-change":
			default:
				errs = append(errs, fmt.Errorf("step %d (%s): interrupt kind %q is not spot-interruption, rebalance, state-change or scheduled-change", i+1, st.Name, st.Interrupt.Kind))
			}
			if st.Interrupt.Count == 0 {
				st.Interrupt.Count = 1
			}
		}
		if st.Scale != nil && (st.Scale.Deployment == "" || st.Scale.Replicas < 0) {
			errs = append(errs, fmt.Errorf("step %d (%s): scale needs a deployment and replicas >= 0", i+1, st.Name))
		}
	}
	return errors.Join(errs...)
}
