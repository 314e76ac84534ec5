package disruption

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// ConsolidationState fingerprints what consolidation's answer depends on
// and the cluster records: which pods exist and where they are bound,
// nodes and NodeClaims coming and going or changing their disruption
// conditions, do-not-disrupt annotations, and NodePool, EC2NodeClass,
// DaemonSet and PDB specs. Karpenter marks its cluster state unconsolidated
// on the same kinds of change (it ignores annotations; people removing a
// do-not-disrupt expect it to count at once).
func ConsolidationState(in *Input) string {
	h := sha256.New()
	snap := in.Cluster
	pods := make([]string, 0, len(snap.Pods))
	for _, p := range snap.Pods {
		pods = append(pods, fmt.Sprintf("%s %s %t %q", p.UID, p.Spec.NodeName, p.DeletionTimestamp != nil, p.Annotations[wellknown.DoNotDisruptAnnotation]))
	}
	write(h, "pods", pods)
	nodes := make([]string, 0, len(snap.Nodes))
	for _, n := range snap.Nodes {
		nodes = append(nodes, fmt.Sprintf("%s %s %t %t %d %q", n.Name, n.UID, n.DeletionTimestamp != nil, n.Spec.Unschedulable, len(n.Spec.Taints), n.Annotations[wellknown.DoNotDisruptAnnotation]))
	}
	write(h, "nodes", nodes)
	claims := make([]string, 0, len(snap.NodeClaims))
	for _, nc := range snap.NodeClaims {
		line := fmt.Sprintf("%s %t", nc.Name, nc.DeletionTimestamp != nil)
		for _, t := range []string{karpv1.ConditionTypeInitialized, karpv1.ConditionTypeConsolidatable, karpv1.ConditionTypeDrifted, karpv1.ConditionTypeDisruptionReason} {
			line += " " + conditionStatus(nc.Status.Conditions, t)
		}
		claims = append(claims, line+" "+nc.Annotations[CommandAnnotation]+" "+nc.Annotations[wellknown.DoNotDisruptAnnotation])
	}
	write(h, "claims", claims)
	var specs []string
	for _, np := range snap.NodePools {
		specs = append(specs, fmt.Sprintf("nodepool %s %d", np.Name, np.Generation))
	}
	for _, nc := range snap.NodeClasses {
		specs = append(specs, fmt.Sprintf("ec2nodeclass %s %d", nc.Name, nc.Generation))
	}
	for _, ds := range snap.DaemonSets {
		specs = append(specs, fmt.Sprintf("daemonset %s/%s %d", ds.Namespace, ds.Name, ds.Generation))
	}
	for _, pdb := range snap.PDBs {
		specs = append(specs, fmt.Sprintf("pdb %s/%s %d", pdb.Namespace, pdb.Name, pdb.Generation))
	}
	write(h, "specs", specs)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func write(h hash.Hash, section string, lines []string) {
	sort.Strings(lines)
	fmt.Fprintf(h, "%s %d\n", section, len(lines))
	for _, l := range lines {
		fmt.Fprintln(h, l)
	}
}

func conditionStatus(cs []metav1.Condition, t string) string {
	for _, c := range cs {
		if c.Type == t {
			return string(c.Status)
		}
	}
	return "-"
}
