package disruption

import (
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// ClaimStatus is a change to one NodeClaim's disruption bookkeeping.
type ClaimStatus struct {
	NodeClaim *karpv1.NodeClaim
	// Set are conditions to set (status True); Clear are condition types to
	// remove.
	Set   []metav1.Condition
	Clear []string
	// LastPodEventTime, when not zero, is the new status.lastPodEventTime.
	LastPodEventTime time.Time
	// Annotations are metadata annotations to write (pod fingerprint,
	// re-stamped drift hashes).
	Annotations map[string]string
}

// StatusChanges is the bookkeeping Karpenter's NodeClaim disruption
// controllers keep, recomputed from the snapshot: status.lastPodEventTime
// (pods bound to the node, going, gone), the Consolidatable condition
// (initialized and consolidateAfter elapsed since the last pod event), the
// Drifted condition (with the drift reason), the Empty condition, and the
// drift hashes of claims stamped with another hash version. Only claims
// that change are returned. A claim of another provider's NodeClass is
// left as it is (Karpenter's disruption controllers ignore it).
func StatusChanges(in *Input) []ClaimStatus {
	c := newCluster(in)
	var out []ClaimStatus
	for _, nc := range in.Cluster.NodeClaims {
		if nc.DeletionTimestamp != nil || !nc.IsManaged() {
			continue
		}
		if ch := c.statusOf(nc); ch != nil {
			out = append(out, *ch)
		}
	}
	return out
}

func (c *view) statusOf(nc *karpv1.NodeClaim) *ClaimStatus {
	now := c.in.Now
	ch := &ClaimStatus{NodeClaim: nc, Annotations: map[string]string{}}
	np := c.pool(nc)
	node := c.nodeOf[nc.Name]
	initialized := nc.IsTrue(karpv1.ConditionTypeInitialized)

	// Pod events: bound pods give their own time; a pod that left shows as
	// a changed fingerprint, dated now.
	lastPodEvent := nc.Status.LastPodEventTime.Time
	if node != nil {
		latest, fp := podEvents(c.podsOn[node.Name])
		if latest.After(now) {
			latest = now
		}
		switch old, seen := nc.Annotations[PodFingerprintAnnotation]; {
		case latest.After(lastPodEvent):
			lastPodEvent = latest
		case seen && old != fp:
			lastPodEvent = now
		}
		if nc.Annotations[PodFingerprintAnnotation] != fp {
			ch.Annotations[PodFingerprintAnnotation] = fp
		}
		if !lastPodEvent.Equal(nc.Status.LastPodEventTime.Time) {
			ch.LastPodEventTime = lastPodEvent
		}
	}

	// Consolidatable. A static NodePool (spec.replicas) ignores
	// consolidateAfter: its nodes are never consolidated.
	consolidatable := false
	if np != nil && initialized && np.Spec.Replicas == nil {
		if after := consolidateAfter(np); after != nil {
			since := lastPodEvent
			if since.IsZero() {
				since = meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeInitialized).LastTransitionTime.Time
			}
			consolidatable = now.Sub(since) >= *after
		}
	}
	c.want(ch, karpv1.ConditionTypeConsolidatable, consolidatable, "Consolidatable", "")

	// Empty: initialized with no pod that must move.
	empty := false
	if initialized && node != nil {
		empty = true
		for _, p := range c.podsOn[node.Name] {
			if reschedulable(p) && podutil.EvictionCost(p) > 0 {
				empty = false
				break
			}
		}
	}
	c.want(ch, karpv1.ConditionTypeEmpty, empty, "Empty", "")

	// Drifted. A NodePool hash stamped under another hash version cannot
	// be compared: it is replaced, not drift. But a claim already drifted
	// keeps its old hash (only the version is re-stamped) and so stays
	// drifted, as Karpenter's hash controller leaves it: whether it still
	// differs from its NodePool can no longer be told.
	reason := c.driftReason(nc)
	staleHash := false
	if np != nil {
		v, ok := nc.Annotations[wellknown.NodePoolHashVersionAnnotation]
		staleHash = ok && v != wellknown.NodePoolHashVersion
	}
	wasDrifted := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDrifted) != nil
	if reason != "" || !staleHash || !wasDrifted {
		c.want(ch, karpv1.ConditionTypeDrifted, reason != "", reason, reason)
	}
	if staleHash {
		if !wasDrifted {
			ch.Annotations[wellknown.NodePoolHashAnnotation] = np.Hash()
		}
		ch.Annotations[wellknown.NodePoolHashVersionAnnotation] = wellknown.NodePoolHashVersion
	}
	if nc.Spec.NodeClassRef != nil {
		if class := c.classes[nc.Spec.NodeClassRef.Name]; class != nil {
			cv, ch2 := class.Annotations[wellknown.EC2NodeClassHashVersionAnnotation], class.Annotations[wellknown.EC2NodeClassHashAnnotation]
			if v := nc.Annotations[wellknown.EC2NodeClassHashVersionAnnotation]; cv != "" && ch2 != "" && v != cv {
				// As the NodePool hash above: a drifted claim keeps its
				// old hash and so stays drifted.
				if !wasDrifted {
					ch.Annotations[wellknown.EC2NodeClassHashAnnotation] = ch2
				}
				ch.Annotations[wellknown.EC2NodeClassHashVersionAnnotation] = cv
			}
		}
	}
	if len(ch.Set) == 0 && len(ch.Clear) == 0 && ch.LastPodEventTime.IsZero() && len(ch.Annotations) == 0 {
		return nil
	}
	return ch
}

// want records that condition t should be True (with reason and message)
// or absent, if that is not already so.
func (c *view) want(ch *ClaimStatus, t string, on bool, reason, msg string) {
	cur := meta.FindStatusCondition(ch.NodeClaim.Status.Conditions, t)
	switch {
	case on && (cur == nil || cur.Status != metav1.ConditionTrue || cur.Reason != reason || cur.Message != msg):
		ch.Set = append(ch.Set, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: msg})
	case !on && cur != nil:
		ch.Clear = append(ch.Clear, t)
	}
}

// consolidateAfter is the NodePool's consolidateAfter, nil for Never. An
// unset value (an object that bypassed defaulting) counts as 0s, the CRD
// default.
func consolidateAfter(np *karpv1.NodePool) *time.Duration {
	ca := np.Spec.Disruption.ConsolidateAfter
	if ca.IsZero() {
		return new(time.Duration(0))
	}
	return ca.Duration
}

// podEvents returns the latest time a pod (not a DaemonSet's) was bound to
// the node or started leaving it, and a fingerprint of the pods staying.
func podEvents(pods []*corev1.Pod) (time.Time, string) {
	var latest time.Time
	var uids []string
	for _, p := range pods {
		if podutil.IsOwnedByDaemonSet(p) {
			continue
		}
		t := p.CreationTimestamp.Time
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue && !cond.LastTransitionTime.IsZero() {
				t = cond.LastTransitionTime.Time
			}
		}
		if p.DeletionTimestamp != nil {
			start := p.DeletionTimestamp.Time
			if p.DeletionGracePeriodSeconds != nil {
				start = start.Add(-time.Duration(*p.DeletionGracePeriodSeconds) * time.Second)
			}
			if start.After(t) {
				t = start
			}
		} else {
			uids = append(uids, string(p.UID))
		}
		if t.After(latest) {
			latest = t
		}
	}
	sort.Strings(uids)
	h := fnv.New64a()
	for _, u := range uids {
		h.Write([]byte(u))
		h.Write([]byte{0})
	}
	return latest, fmt.Sprintf("%d-%016x", len(uids), h.Sum64())
}

// Expiration is a NodeClaim past its expireAfter.
type Expiration struct {
	NodeClaim *karpv1.NodeClaim
	ExpiredAt time.Time
}

// Expirations are the claims to delete because they lived longer than
// their expireAfter. Expiration is forceful: no budget, no do-not-disrupt,
// no PDB stops it (the drain still honours PDBs until the
// terminationGracePeriod runs out). A claim of another provider's
// NodeClass is its to expire.
func Expirations(in *Input) []Expiration {
	var out []Expiration
	for _, nc := range in.Cluster.NodeClaims {
		d := nc.Spec.ExpireAfter.Duration
		if nc.DeletionTimestamp != nil || d == nil || nc.Labels[wellknown.NodePoolLabel] == "" || !nc.IsManaged() {
			continue
		}
		at := nc.CreationTimestamp.Add(*d)
		if !in.Now.Before(at) {
			out = append(out, Expiration{NodeClaim: nc, ExpiredAt: at})
		}
	}
	return out
}

// PoolHashes are the NodePools whose karpenter.sh/nodepool-hash annotation
// (and version) is missing or stale, with the value to write. A NodePool of
// another provider's NodeClass is not stamped.
func PoolHashes(in *Input) map[string]string {
	out := map[string]string{}
	for _, np := range in.Cluster.NodePools {
		if !np.Spec.Template.Spec.NodeClassRef.IsManaged() {
			continue // another provider's NodePool: its Karpenter stamps it
		}
		h := np.Hash()
		if np.Annotations[wellknown.NodePoolHashAnnotation] != h || np.Annotations[wellknown.NodePoolHashVersionAnnotation] != wellknown.NodePoolHashVersion {
			out[np.Name] = h
		}
	}
	return out
}
