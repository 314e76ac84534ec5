package scheduling

// SolveWithoutProbes is Solve with phase one evaluating every candidate
// claim in full, for tests that the probes change no decision.
func SolveWithoutProbes(snap *Snapshot, opts Options) *Results {
	s := newSolver(snap, opts)
	s.noProbes = true
	s.run()
	return s.results()
}
