// Package conformance names the cases of Karpenter v1.14.1's own test suites that
// the project ports, so that `make conformance` can tally them per source suite.
package conformance

import (
	"strings"
	"testing"
)

// Case is one It, Entry or DescribeTable entry of a Karpenter v1.14.1
// suite, ported as a test of Karpless's own inputs asserting Karpenter's
// expected outcome.
type Case struct {
	// Suite names the source suite: the repository's package path, such
	// as "core/provisioning/scheduling" (kubernetes-sigs/karpenter
	// pkg/controllers/provisioning/scheduling) or "aws/providers/instancetype"
	// (aws/karpenter-provider-aws pkg/providers/instancetype).
	Suite string
	// File is the source file within the suite's package.
	File string
	// Spec is the case's Describe, Context and It (or Entry) titles, as
	// Karpenter writes them, joined by " > ".
	Spec string
	// Differs, when set, says how Karpless deliberately differs, what a
	// user sees and why (docs/conformance.md lists it); the case then
	// does not run.
	Differs string
}

// DiffersPrefix starts the skip message of a deliberate difference: the
// case's Spec, SpecSep, then its Differs text (hack/conformance lists them
// in docs/conformance.md).
const (
	DiffersPrefix = "conformance differs: "
	SpecSep       = " :: "
)

// SuitePrefix starts the subtest name that carries a case's suite (its
// slashes as dots, since a subtest name's slashes are levels).
const SuitePrefix = "conformance."

// Run runs body as c's subtest, named SuitePrefix+suite, then the spec:
// TestX/conformance.core.provisioning.scheduling/Topology_>_Zonal_>_...
func Run(t *testing.T, c Case, body func(t *testing.T)) {
	t.Helper()
	t.Run(SuitePrefix+strings.ReplaceAll(c.Suite, "/", "."), func(t *testing.T) {
		t.Run(strings.ReplaceAll(c.Spec, "/", "|"), func(t *testing.T) {
			if c.Differs != "" {
				t.Skip(DiffersPrefix + c.Spec + SpecSep + c.Differs)
			}
			body(t)
		})
	})
}
