package v1

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Hash fingerprints the static part of the NodePool's template, the fields
// whose change makes existing nodes drifted: labels, annotations, taints,
// startup taints, node class reference, expireAfter and
// terminationGracePeriod. Requirements (checked separately), budgets and
// weights are left out, as in Karpenter. Taint order does not matter. The
// value is our own (not Karpenter's number) but changes under the same edits.
func (in *NodePool) Hash() string {
	t := in.Spec.Template
	sortTaints := func(ts []corev1.Taint) []string {
		out := make([]string, 0, len(ts))
		for _, x := range ts {
			out = append(out, x.Key+"="+x.Value+":"+string(x.Effect))
		}
		slices.Sort(out)
		return out
	}
	doc := struct {
		Labels, Annotations   map[string]string
		Taints, StartupTaints []string
		NodeClass             *NodeClassReference
		ExpireAfter           string
		TerminationGrace      string
	}{
		Labels: t.Labels, Annotations: t.Annotations,
		Taints: sortTaints(t.Spec.Taints), StartupTaints: sortTaints(t.Spec.StartupTaints),
		NodeClass: t.Spec.NodeClassRef, ExpireAfter: t.Spec.ExpireAfter.String(),
	}
	if t.Spec.TerminationGracePeriod != nil {
		doc.TerminationGrace = t.Spec.TerminationGracePeriod.Duration.String()
	}
	// encoding/json sorts map keys, so the encoding is canonical.
	b, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("hashing nodepool %s: %v", in.Name, err)) // plain data always encodes
	}
	sum := sha256.Sum256(b)
	return fmt.Sprint(binary.BigEndian.Uint64(sum[:8]))
}

// ExpireAfterOrDefault is the template's expireAfter, or Karpenter's 720h when unset.
func (t NodeClaimTemplateSpec) ExpireAfterOrDefault() NillableDuration {
	if t.ExpireAfter.IsZero() {
		return MustParseNillableDuration("720h")
	}
	return t.ExpireAfter
}
