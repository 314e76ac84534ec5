// Package soak runs Karpless's three functions on their real triggers for
// virtual hours in a hostile world, and checks the invariants users rely on.
//
// Each seed gets its own control plane (etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager) and AWS emulator, both on one virtual clock. The
// provisioner and disruption functions are invoked once a virtual minute,
// with Lambda's deadlines and real leases; the interruption function is fed
// batches from the emulated queue as they arrive, concurrently. A seeded
// chaos schedule churns the workload, interrupts spot instances, releases
// AMIs, edits NodePools, takes capacity away and kills invocations at any
// external call; the emulator's and the Kubernetes API's hostility
// (eventual consistency, throttling, lost answers, conflicts) stays on
// throughout. Violations are reported with the seed and the events that led
// to them.
package soak

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Options describe a soak.
type Options struct {
	// Seeds to run, one world each.
	Seeds []uint64
	// Duration of virtual time each seed runs before it settles.
	Duration time.Duration
	// KubeBin holds the control plane binaries (empty: controlplane's default).
	KubeBin string
	// Dir keeps each seed's control plane logs and the functions' logs
	// (empty: a temporary directory, removed unless a seed failed).
	Dir string
	// Out receives a line per seed and per violation, and the summary line.
	Out io.Writer
	// Log receives the functions' logs (nil: a file per seed under Dir).
	Log *slog.Logger
	// Quick shortens the settling phase (CI).
	Quick bool
	// FailFast ends a seed at its first violation (no settling) and runs
	// no further seed: the mutation check asks only whether a planted
	// fault is caught.
	FailFast bool
}

// Report is what a soak saw.
type Report struct {
	Seeds        int
	VirtualHours float64
	Invocations  int
	Kills        int
	// Faults counts every fault the world injected: the emulator's hostile
	// events, the Kubernetes API's, and the chaos schedule's own (spot
	// interruptions, capacity taken away, NodePool edits, world moves).
	Faults     int
	Violations []Violation
	// Coverage sums, per path the scenarios and chaos drive, how often
	// the seeds drove it (orphans, kills after CreateFleet, non-capacity
	// launch failures, PDB refusals, pods terminating before eviction).
	Coverage map[string]int64
}

// Line is the soak's last line.
func (r Report) Line() string {
	return fmt.Sprintf("soak: seeds=%d virtual-hours=%s invocations=%d kills=%d faults=%d violations=%d",
		r.Seeds, strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", r.VirtualHours), "0"), "."), r.Invocations, r.Kills, r.Faults, len(r.Violations))
}

// Violation is an invariant that did not hold.
type Violation struct {
	Seed      uint64
	At        time.Duration // virtual time since the seed began
	Invariant string
	Detail    string
	// Events are the last things that happened before it.
	Events []string
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "VIOLATION seed=%d at=%s invariant=%q: %s\n  events leading to it:\n", v.Seed, v.At.Round(time.Second), v.Invariant, v.Detail)
	for _, e := range v.Events {
		fmt.Fprintf(&b, "    %s\n", e)
	}
	return b.String()
}

// Run soaks every seed in turn and returns the combined report; the error
// is for a world that could not be built, not for violations.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	var r Report
	for _, seed := range o.Seeds {
		s, err := runSeed(ctx, o, seed)
		r.Seeds++
		r.VirtualHours += s.virtual.Hours()
		r.Invocations += s.invocations
		r.Kills += s.kills
		r.Faults += s.faults
		r.Violations = append(r.Violations, s.violations...)
		if r.Coverage == nil {
			r.Coverage = map[string]int64{}
		}
		for k, n := range s.coverage {
			r.Coverage[k] += n
		}
		for _, v := range s.violations {
			fmt.Fprint(o.Out, v.String())
		}
		if s.dir != "" && len(s.violations) > 0 {
			var b strings.Builder
			for _, v := range s.violations {
				b.WriteString(v.String())
			}
			_ = os.WriteFile(filepath.Join(s.dir, "violations.txt"), []byte(b.String()), 0o644)
		}
		fmt.Fprintf(o.Out, "seed %d: virtual %s in %s real; invocations=%d kills=%d faults=%d violations=%d; %s\n",
			seed, s.virtual.Round(time.Second), s.real.Round(time.Second), s.invocations, s.kills, s.faults, len(s.violations), s.summary)
		fmt.Fprintf(o.Out, "seed %d drove: %s\n", seed, s.coverageLine)
		if err != nil {
			return r, fmt.Errorf("seed %d: %w", seed, err)
		}
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		if o.FailFast && len(r.Violations) > 0 {
			return r, nil
		}
	}
	return r, nil
}
