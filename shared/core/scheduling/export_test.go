package scheduling

// SolveWithoutProbes is Solve with phase one evaluating every candidate
// claim in full, for tests that the probes change no decision.
func SolveWithoutProbes(snap *Snapshot, opts Options) *Results {
	return solveBoth(snap, opts, true)
}

// SolveOneRule is one solve with one growth rule: fill false, a new claim
// unless growing one costs no more than it (the marginal rule); fill true,
// growth when it buys room for the queue more cheaply per pod.
func SolveOneRule(snap *Snapshot, opts Options, fill bool) *Results {
	r, _, _, _ := solveOnce(snap, opts, false, fill)
	return r
}
