// Package shadow is Karpless's shadow mode (MODE=shadow, cdk deploy -c
// mode=shadow): the functions run beside a running Karpenter, decide as
// they would, and record each decision instead of carrying it out.
//
// The ticks call a Recorder at the point they would write (create a
// NodeClaim, execute a disruption command, expire, repair) and skip the
// write, so a pass goes on to its next decision. Under that, the clients'
// transports refuse what shadow mode must never do (Kube, GuardAWS), should
// a path miss its skip.
//
// A decision record is one JSON log line with the key "decision" (Decision,
// its fields stable), an Event with reason EventReason on the NodePool or
// node it is about, whose annotation DecisionAnnotation holds the same
// JSON, and an entry in the function's ConfigMap (Store) that keeps the
// last days of decisions, since Events live an hour. `karpless shadow
// report` reads all three.
package shadow

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// LogKey is the key of a decision in a function's JSON log line.
const LogKey = "decision"

// EventReason is the reason of a decision's Event.
const EventReason = "ShadowDecision"

// DecisionAnnotation holds a decision's JSON on its Event.
const DecisionAnnotation = "karpless.dev/decision"

// The kinds of decisions.
const (
	// KindLaunch: a NodeClaim the provisioner would create and launch for
	// pending pods (or a static NodePool's replicas).
	KindLaunch = "launch"
	// KindConsolidate: nodes emptiness or consolidation would take away,
	// with the replacements it would launch first.
	KindConsolidate = "consolidate"
	// KindDrift: drifted nodes it would replace.
	KindDrift = "drift"
	// KindExpire: a NodeClaim past its expireAfter it would delete.
	KindExpire = "expire"
	// KindRepair: an unhealthy node (NODE_REPAIR) it would replace.
	KindRepair = "repair"
	// KindInstanceStatus: a node whose instance EC2 reports impaired or
	// scheduled for an event.
	KindInstanceStatus = "instance-status"
	// KindScaleDown: a static NodePool's NodeClaim beyond its replicas.
	KindScaleDown = "scale-down"
)

// Limits keep a record small (an Event annotation, a ConfigMap entry).
const (
	maxPods  = 20
	maxTypes = 10
)

// Decision is one decision shadow mode made and did not carry out. Its
// JSON field names are the record's format: keep them.
type Decision struct {
	Kind string `json:"kind"`
	// Function is provisioner or disruption.
	Function string `json:"function,omitempty"`
	// At is when it was decided.
	At       time.Time `json:"at"`
	NodePool string    `json:"nodepool,omitempty"`
	// NodeClaim and Node are what a disruption of one node is about.
	NodeClaim string `json:"nodeclaim,omitempty"`
	Node      string `json:"node,omitempty"`
	// Method is the disruption method (Emptiness, Drift,
	// SingleNodeConsolidation, MultiNodeConsolidation).
	Method string `json:"method,omitempty"`
	// Reason says why, for people.
	Reason string `json:"reason,omitempty"`
	// Launch: the instance types it would offer CreateFleet (the first
	// maxTypes, cheapest first), how many there were, and the cheapest
	// offering, whose price is what the claim is expected to cost.
	InstanceTypes     []string  `json:"instanceTypes,omitempty"`
	InstanceTypeCount int       `json:"instanceTypeCount,omitempty"`
	Offering          *Offering `json:"offering,omitempty"`
	// Pods it would launch for (namespace/name, the first maxPods) and how
	// many.
	Pods     []string `json:"pods,omitempty"`
	PodCount int      `json:"podCount,omitempty"`
	// Count is how many such NodeClaims it would launch (a static
	// NodePool's missing replicas); 0 means one.
	Count int `json:"count,omitempty"`
	// Disruption: the nodes it would take away and what it would launch
	// first; the $/h before and after and the difference.
	Candidates   []Node     `json:"candidates,omitempty"`
	Replacements []Decision `json:"replacements,omitempty"`
	PriceBefore  float64    `json:"priceBefore,omitempty"`
	PriceAfter   float64    `json:"priceAfter,omitempty"`
	Savings      float64    `json:"savings,omitempty"`
}

// Offering is an instance type in a zone and capacity type, and its $/h.
type Offering struct {
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone,omitempty"`
	CapacityType string  `json:"capacityType,omitempty"`
	Price        float64 `json:"price"`
	// Credits is the $/h of surplus CPU credits a burstable type would
	// spend with the claim's pods, on top of Price.
	Credits float64 `json:"credits,omitempty"`
}

// Node is a node a disruption would take away.
type Node struct {
	NodeClaim    string  `json:"nodeclaim"`
	Node         string  `json:"node,omitempty"`
	NodePool     string  `json:"nodepool,omitempty"`
	InstanceType string  `json:"instanceType,omitempty"`
	Zone         string  `json:"zone,omitempty"`
	CapacityType string  `json:"capacityType,omitempty"`
	Price        float64 `json:"price,omitempty"`
	Pods         int     `json:"pods,omitempty"`
}

// Launch is the decision to create and launch n, the simulation's claim of
// pool, for reason (provisioning, static).
func Launch(n *scheduling.NewNodeClaim, reason string) Decision {
	d := Decision{Kind: KindLaunch, NodePool: n.NodePool, Reason: reason, InstanceTypeCount: len(n.InstanceTypes)}
	for i, it := range n.InstanceTypes {
		if i == maxTypes {
			break
		}
		d.InstanceTypes = append(d.InstanceTypes, it.Name)
	}
	if it, o := n.CheapestOffering(); it != nil {
		hourly := n.HourlyPrice()
		d.Offering = &Offering{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType, Price: o.Price, Credits: max(0, hourly-o.Price)}
		d.PriceAfter = hourly
	}
	d.Pods, d.PodCount = PodNames(n.Pods)
	return d
}

// Command is the decision to carry out a disruption command: consolidate
// (emptiness, multi- or single-node consolidation) or drift.
func Command(cmd *disruption.Command) Decision {
	d := Decision{Kind: KindConsolidate, Method: string(cmd.Method), Reason: cmd.Why,
		PriceBefore: cmd.PriceBefore, PriceAfter: cmd.PriceAfter, Savings: cmd.Savings()}
	if cmd.Method == disruption.Drift {
		d.Kind = KindDrift
	}
	pools := map[string]bool{}
	for _, cn := range cmd.Candidates {
		n := Node{NodeClaim: cn.NodeClaim.Name, Zone: cn.Zone, CapacityType: cn.CapacityType, Price: cn.Price, Pods: len(cn.Reschedulable),
			InstanceType: cn.NodeClaim.Labels[wellknown.InstanceTypeLabel], NodePool: cn.NodeClaim.Labels[wellknown.NodePoolLabel]}
		if cn.Node != nil {
			n.Node = cn.Node.Name
		}
		if cn.NodePool != nil {
			n.NodePool = cn.NodePool.Name
		}
		pools[n.NodePool] = true
		d.Candidates = append(d.Candidates, n)
	}
	sort.Slice(d.Candidates, func(i, j int) bool { return d.Candidates[i].NodeClaim < d.Candidates[j].NodeClaim })
	if len(pools) == 1 {
		for p := range pools {
			d.NodePool = p
		}
	}
	for _, r := range cmd.Replacements {
		d.Replacements = append(d.Replacements, Launch(r, ""))
	}
	return d
}

// Deletion is the decision to delete one NodeClaim (expire, repair,
// instance-status, scale-down) that costs price $/h, for reason. Its pods
// go to other nodes or to capacity provisioned for them, so no saving is
// claimed (a scale-down's caller sets one).
func Deletion(kind string, nc *karpv1.NodeClaim, price float64, reason string) Decision {
	n := Node{NodeClaim: nc.Name, Node: nc.Status.NodeName, NodePool: nc.Labels[wellknown.NodePoolLabel],
		InstanceType: nc.Labels[wellknown.InstanceTypeLabel], Zone: nc.Labels[wellknown.ZoneLabel],
		CapacityType: nc.Labels[wellknown.CapacityTypeLabel], Price: price}
	return Decision{Kind: kind, NodePool: n.NodePool, NodeClaim: nc.Name, Node: n.Node, Reason: reason,
		Candidates: []Node{n}, PriceBefore: price}
}

// PodNames are the pods' namespace/name, sorted, the first maxPods, and
// how many there are.
func PodNames(pods []*corev1.Pod) ([]string, int) {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	sort.Strings(names)
	if len(names) > maxPods {
		names = names[:maxPods]
	}
	return names, len(pods)
}

// Claims is how many NodeClaims a launch decision stands for.
func (d Decision) Claims() int { return max(d.Count, 1) }

// Key identifies a decision across passes and invocations: the same
// decision made again (the pods still pending, the same nodes still
// consolidatable) has the same key. Times and prices are not part of it.
func (d Decision) Key() string {
	parts := []string{d.Kind, d.NodePool, d.NodeClaim, d.Node, d.Method}
	var cands []string
	for _, c := range d.Candidates {
		cands = append(cands, c.NodeClaim)
	}
	sort.Strings(cands)
	parts = append(parts, strings.Join(cands, ","), strings.Join(d.Pods, ","))
	if d.Offering != nil {
		parts = append(parts, d.Offering.InstanceType)
	}
	for _, r := range d.Replacements {
		if r.Offering != nil {
			parts = append(parts, r.Offering.InstanceType)
		}
	}
	return strings.Join(parts, "|")
}

// Subject is the object the decision's Event is about: the node (or
// NodeClaim) of a disruption of one, else the NodePool.
func (d Decision) Subject() (kind, name string) {
	switch {
	case d.Node != "":
		return "Node", d.Node
	case d.NodeClaim != "":
		return "NodeClaim", d.NodeClaim
	case len(d.Candidates) == 1 && d.Candidates[0].Node != "":
		return "Node", d.Candidates[0].Node
	case len(d.Candidates) == 1:
		return "NodeClaim", d.Candidates[0].NodeClaim
	}
	return "NodePool", d.NodePool
}

// Text is the decision in words (an Event's message): deterministic, so
// that the same decision repeated in one invocation folds into one Event.
func (d Decision) Text() string {
	var b strings.Builder
	b.WriteString("shadow: would ")
	switch d.Kind {
	case KindLaunch:
		fmt.Fprintf(&b, "launch %d nodeclaim(s) of nodepool %s for %d pod(s)", d.Claims(), d.NodePool, d.PodCount)
		if len(d.Pods) > 0 {
			fmt.Fprintf(&b, " (%s", strings.Join(d.Pods[:min(len(d.Pods), 3)], ", "))
			if d.PodCount > 3 {
				b.WriteString(", ...")
			}
			b.WriteString(")")
		}
		if d.Offering != nil {
			fmt.Fprintf(&b, ": %s %s in %s at $%.4f/h", d.Offering.InstanceType, d.Offering.CapacityType, d.Offering.Zone, d.Offering.Price)
			if d.Offering.Credits > 0 {
				fmt.Fprintf(&b, " + $%.4f/h of CPU credits", d.Offering.Credits)
			}
			fmt.Fprintf(&b, " (cheapest of %d types)", d.InstanceTypeCount)
		}
	case KindConsolidate, KindDrift:
		verb := "delete"
		if len(d.Replacements) > 0 {
			verb = fmt.Sprintf("replace with %d nodeclaim(s)", len(d.Replacements))
		}
		names := make([]string, 0, len(d.Candidates))
		for _, c := range d.Candidates {
			names = append(names, c.NodeClaim)
		}
		fmt.Fprintf(&b, "%s (%s) %s: $%.4f/h -> $%.4f/h", verb, d.Method, strings.Join(names, ","), d.PriceBefore, d.PriceAfter)
	default:
		fmt.Fprintf(&b, "delete nodeclaim %s (%s)", d.NodeClaim, d.Kind)
		if d.PriceBefore > 0 {
			fmt.Fprintf(&b, " at $%.4f/h", d.PriceBefore)
		}
	}
	if d.Reason != "" {
		fmt.Fprintf(&b, "; %s", d.Reason)
	}
	return b.String()
}

// Valid reports whether a decision read back (a log line, an Event, a
// ConfigMap entry) is one: a known kind and a time.
func (d Decision) Valid() bool {
	return slices.Contains([]string{KindLaunch, KindConsolidate, KindDrift, KindExpire, KindRepair, KindInstanceStatus, KindScaleDown}, d.Kind) && !d.At.IsZero()
}

// Marshal is the decision's JSON, as logged.
func (d Decision) Marshal() string {
	b, _ := json.Marshal(d) // plain data: cannot fail
	return string(b)
}
