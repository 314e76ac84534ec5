// Package whatif answers an operator's questions about the decisions
// Karpless makes, from a snapshot of the cluster and without changing it:
//
//   - ExplainPod: where a pending pod goes (an existing node, an in-flight
//     NodeClaim, or a new NodeClaim of some NodePool, with the instance type,
//     zone and capacity type the launch would pick and its $/h), or why it
//     goes nowhere, NodePool by NodePool and instance type by instance type;
//   - ExplainNodeClaim: why a NodeClaim is the type, zone and capacity type it
//     is, what it costs, when it expires, whether it drifted, and what
//     voluntary disruption would do to it and what blocks it (do-not-disrupt,
//     PDBs, budgets, consolidateAfter, consolidation policy);
//   - Simulate: one provisioning pass and one disruption pass over the whole
//     snapshot: the NodeClaims provisioning would create, the nodes
//     disruption would remove or replace, and $/h before and after.
//
// The answers come from the same code the functions run: the snapshot is
// turned into the simulator's input by provisioning.SimulationInput, the
// instance types of each EC2NodeClass are built by instancetype.Build with
// the prices and capacity marks the functions keep in the cluster, pods are
// placed by scheduling.Solve and scheduling.Explain, and disruption decisions
// come from disruption.Compute and disruption.Validate.
//
// Nothing here writes anywhere. Read takes a File from a live cluster (the
// snapshot plus the karpless-pricing and karpless-unavailable-offerings
// ConfigMaps, never a Secret); a File can be saved with Write (redacted:
// container env, commands and images are never kept, and only the
// annotations decisions read survive) and loaded again with ReadFile, so
// every question can also be asked offline.
package whatif
