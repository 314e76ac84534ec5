package disrupt_test

import (
	"testing"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// TestE2EBudgetOfZeroBlocks is the AWS provider's e2e "Consolidation >
// Budgets > should not allow consolidation if the budget is fully
// blocking" (test/suites/consolidation, v1.14.1): a NodePool whose only
// budget allows 0 nodes keeps nodes consolidation would merge, for as long
// as the budget stays.
func TestE2EBudgetOfZeroBlocks(t *testing.T) {
	blockedScenario(t, func(*world) {}, nil, func(np *karpv1.NodePool) {
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
	})
}
