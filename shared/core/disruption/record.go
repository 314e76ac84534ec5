package disruption

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
)

// Annotations Karpless writes for disruption. They are the only memory a
// command has between ticks.
const (
	// CommandAnnotation on a candidate NodeClaim holds the command's Record
	// (JSON), the same on every candidate of the command.
	CommandAnnotation = "karpless.dev/disruption"
	// ReplacementAnnotation on a replacement NodeClaim names the command
	// (Record.ID) it was launched for.
	ReplacementAnnotation = "karpless.dev/disruption-command"
	// PodFingerprintAnnotation on a NodeClaim is a digest of the pods on its
	// node as last seen, so that a pod leaving can be noticed (it bumps
	// status.lastPodEventTime) without memory between ticks.
	PodFingerprintAnnotation = "karpless.dev/pod-fingerprint"
	// NominatedUntilAnnotation on a NodeClaim is when the nomination a
	// provisioning pass made ends (RFC 3339): the pass expected pending
	// pods to land on its node, which disruption therefore leaves alone
	// until then (Karpenter's StateNode.Nominate, kept on the object).
	NominatedUntilAnnotation = "karpless.dev/nominated-until"
)

// NominationWindow is Karpenter's nominationWindow: twice the batch's
// maximum duration, at least 10 s.
func NominationWindow(batchMax time.Duration) time.Duration {
	return max(2*batchMax, 10*time.Second)
}

// Nomination is the NominatedUntilAnnotation value for a nomination made
// at now (the window's end, rounded up to the second), or "" when the
// claim already carries one ending at most a quarter of the window
// earlier: Karpenter extends the window at every pass, and this keeps a
// provisioning pass every few seconds from writing each time.
func Nomination(nc *karpv1.NodeClaim, now time.Time, window time.Duration) string {
	if cur, err := time.Parse(time.RFC3339, nc.Annotations[NominatedUntilAnnotation]); err == nil && cur.After(now.Add(window*3/4)) {
		return ""
	}
	return now.Add(window).UTC().Truncate(time.Second).Add(time.Second).Format(time.RFC3339)
}

// NominatedAt reports whether a provisioning pass's nomination of the
// claim still holds at now.
func NominatedAt(nc *karpv1.NodeClaim, now time.Time) bool {
	v, ok := nc.Annotations[NominatedUntilAnnotation]
	if !ok {
		return false
	}
	until, err := time.Parse(time.RFC3339, v)
	return err == nil && now.Before(until)
}

// Phase is where a command is.
type Phase string

// Phases of a command.
const (
	// Proposed: decided, waiting for ValidationDelay before being checked
	// again against a fresh snapshot. Nothing on the cluster changed yet.
	Proposed Phase = "Proposed"
	// Executing: validated; candidates are (being) tainted, replacements
	// (being) launched; candidates are deleted once every replacement is
	// initialized.
	Executing Phase = "Executing"
)

// Record is a command as written on its candidates.
type Record struct {
	ID     string                  `json:"id"`
	Method Method                  `json:"method"`
	Reason karpv1.DisruptionReason `json:"reason"`
	Phase  Phase                   `json:"phase"`
	// Decision is "delete" or "replace"; validation insists on the same.
	Decision   string    `json:"decision"`
	ProposedAt time.Time `json:"proposedAt"`
	// StartedAt is when execution began (Executing only).
	StartedAt *time.Time `json:"startedAt,omitempty"`
	// Candidates are the NodeClaims to take away, sorted.
	Candidates []string `json:"candidates"`
	// Replacements are the names of the replacement NodeClaims (Executing
	// only), fixed before any is created so creation is idempotent.
	Replacements []string `json:"replacements,omitempty"`
	PriceBefore  float64  `json:"priceBefore"`
	PriceAfter   float64  `json:"priceAfter"`
	// ReplacementTypes are the instance types of a proposed consolidation's
	// one replacement: validation insists they are all still options, and
	// launches those.
	ReplacementTypes []string `json:"replacementTypes,omitempty"`
}

// Encode is the annotation value.
func (r *Record) Encode() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("encoding disruption record: %v", err)) // plain data always encodes
	}
	return string(b)
}

// DecodeRecord parses an annotation value.
func DecodeRecord(s string) (*Record, error) {
	var r Record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("decoding disruption record: %w", err)
	}
	if r.ID == "" || len(r.Candidates) == 0 {
		return nil, fmt.Errorf("decoding disruption record: missing id or candidates")
	}
	return &r, nil
}

// Due reports whether a proposal has waited long enough to be validated.
func (r *Record) Due(now time.Time) bool {
	return !now.Before(r.ProposedAt.Add(r.Method.ValidationDelay()))
}

// NewRecord is the proposal for a command decided at now. The ID is derived
// from the candidates and the time, so it is stable for the same decision.
func NewRecord(c *Command, now time.Time) *Record {
	names := c.CandidateNames()
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	h.Write([]byte(now.UTC().Format(time.RFC3339Nano)))
	sum := h.Sum(nil)
	r := &Record{
		ID:          fmt.Sprintf("%010x", binary.BigEndian.Uint64(sum[:8])>>24),
		Method:      c.Method,
		Reason:      c.Reason(),
		Phase:       Proposed,
		Decision:    c.Decision(),
		ProposedAt:  now.UTC().Truncate(time.Second),
		Candidates:  names,
		PriceBefore: c.PriceBefore,
		PriceAfter:  c.PriceAfter,
	}
	if c.Method.consolidation() && len(c.Replacements) == 1 {
		for _, it := range c.Replacements[0].InstanceTypes {
			r.ReplacementTypes = append(r.ReplacementTypes, it.Name)
		}
	}
	return r
}

// nameAlphabet is what the API server's generateName draws from.
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// ReplacementName is the deterministic name of the i-th replacement of a
// command, shaped like generated NodeClaim names (<nodepool>-xxxxx) so that
// creating it twice is refused instead of launching two nodes.
func ReplacementName(nodePool, commandID string, i int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", commandID, i))
	b := make([]byte, 5)
	for j := range b {
		b[j] = nameAlphabet[int(sum[j])%len(nameAlphabet)]
	}
	return nodePool + "-" + string(b)
}

// Pending is a command found on the cluster.
type Pending struct {
	Record *Record
	// Claims are the candidates that exist, by name.
	Claims map[string]*karpv1.NodeClaim
	// Unmarked are candidates that exist but do not carry the record (a
	// tick died while writing it).
	Unmarked []string
	// Gone are candidates that no longer exist or are being deleted.
	Gone []string
}

// Live reports whether some candidate is still there and not deleting.
func (p *Pending) Live() bool { return len(p.Gone) < len(p.Record.Candidates) }

// Commands reads the commands recorded on the snapshot's NodeClaims. When
// the candidates of one command disagree (a tick died between writes), the
// most advanced record wins.
func Commands(snap *cluster.Snapshot) []*Pending {
	claims := map[string]*karpv1.NodeClaim{}
	byID := map[string]*Pending{}
	for _, nc := range snap.NodeClaims {
		claims[nc.Name] = nc
		v, ok := nc.Annotations[CommandAnnotation]
		if !ok {
			continue
		}
		r, err := DecodeRecord(v)
		if err != nil {
			continue
		}
		if p, ok := byID[r.ID]; !ok || advanced(r, p.Record) {
			byID[r.ID] = &Pending{Record: r}
		}
	}
	var out []*Pending
	for _, p := range byID {
		p.Claims = map[string]*karpv1.NodeClaim{}
		for _, name := range p.Record.Candidates {
			nc := claims[name]
			if nc == nil || nc.DeletionTimestamp != nil {
				p.Gone = append(p.Gone, name)
				if nc != nil {
					p.Claims[name] = nc
				}
				continue
			}
			p.Claims[name] = nc
			if r, err := DecodeRecord(nc.Annotations[CommandAnnotation]); err != nil || r.ID != p.Record.ID {
				p.Unmarked = append(p.Unmarked, name)
			}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Record.ID < out[j].Record.ID })
	return out
}

func advanced(a, b *Record) bool {
	if a.Phase != b.Phase {
		return a.Phase == Executing
	}
	return len(a.Replacements) > len(b.Replacements)
}

// Busy is the set of NodeClaims taken by live commands, except the command
// with ID except ("" for none).
func Busy(cmds []*Pending, except string) map[string]bool {
	out := map[string]bool{}
	for _, p := range cmds {
		if p.Record.ID == except || !p.Live() {
			continue
		}
		for _, n := range p.Record.Candidates {
			out[n] = true
		}
	}
	return out
}

// Executing is the set of NodeClaims of live commands being carried out:
// the ones whose disrupted taint and DisruptionReason condition are meant.
func ExecutingClaims(cmds []*Pending) map[string]bool {
	out := map[string]bool{}
	for _, p := range cmds {
		if p.Record.Phase == Executing && p.Live() {
			for _, n := range p.Record.Candidates {
				out[n] = true
			}
		}
	}
	return out
}

// sameNames reports whether two name lists hold the same names.
func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

// EventCommand is Karpenter's Command.StringForNode, the command as its
// ConsolidationCandidate and ConsolidationRejected Events name it for the
// candidate whose node is source: the decision and the nodes (sources, the
// candidates' node names), with the replacements; a candidate of a
// multi-node command is named alone, with the command's size.
func EventCommand(decision string, replacements int, sources []string, source string) string {
	if len(sources) > 1 {
		return fmt.Sprintf("%s: [%s] (part of %d-node consolidation)", decision, source, len(sources))
	}
	s := fmt.Sprintf("%s: [%s]", decision, strings.Join(sources, ", "))
	switch {
	case replacements == 1:
		s += " -> [1 replacement]"
	case replacements > 1:
		s += fmt.Sprintf(" -> [%d replacements]", replacements)
	}
	return s
}

// EventCommand is the command as its Events name it for candidate cn.
func (c *Command) EventCommand(cn *Candidate) string {
	sources := make([]string, len(c.Candidates))
	for i, o := range c.Candidates {
		sources[i] = o.Node.Name
	}
	return EventCommand(c.Decision(), len(c.Replacements), sources, cn.Node.Name)
}

// CandidateMessage is Karpenter's ConsolidationCandidate Event message.
func CandidateMessage(command string, savings float64) string {
	return fmt.Sprintf("Consolidation candidate: %s (savings: $%.2f)", command, savings)
}

// RejectedMessage is Karpenter's ConsolidationRejected Event message;
// reason is Validation.Reason.
func RejectedMessage(command, reason string, savings float64) string {
	return fmt.Sprintf("Consolidation rejected: %s, reason: %s (savings: $%.2f)", command, reason, savings)
}
