package demo

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// costs follows what the account pays for, instance by instance, so that a
// step's $/hour change is put down to what made it: nodes launched for
// pods, a disruption's replacements beside the nodes they replace, a node
// that left and why. A step's total alone misleads: the AMI release's step
// loses the GPU node's $0.526/h because that node was left empty and
// removed, not because the roll made nodes cheaper.
type costs struct {
	paid       map[string]paidInstance // by instance ID, while not terminated
	launchedBy map[string]string       // NodeClaim -> the method whose replacement it is
	retiredBy  map[string]string       // NodeClaim -> the method that replaced it
	why        map[string]string       // NodeClaim -> why it is going (its disruption reason)
	changes    []costChange
}

// paidInstance is an instance not terminated and its hourly price.
type paidInstance struct {
	ID, Claim, NodePool, InstanceType, CapacityType string
	Price                                           float64
}

// costChange is one change of $/hour at T (seconds since the run began).
type costChange struct {
	T     float64
	Delta float64
	What  string // launched, left or price
	paidInstance
}

func newCosts() *costs {
	return &costs{paid: map[string]paidInstance{}, launchedBy: map[string]string{}, retiredBy: map[string]string{}, why: map[string]string{}}
}

// replaced notes a disruption command carried out: its replacements run
// beside its candidates until those go, so both belong to the command. A
// command without replacements is not one: its candidates simply leave.
func (c *costs) replaced(method string, candidates, replacements []string) {
	if len(replacements) == 0 {
		return
	}
	for _, n := range candidates {
		c.retiredBy[n] = method
	}
	for _, n := range replacements {
		c.launchedBy[n] = method
	}
}

// retiring notes why a NodeClaim is going (Drifted, Empty, interrupted...).
func (c *costs) retiring(claim, why string) { c.why[claim] = why }

// observe compares the instances paid for at t with the last look: each
// instance that appeared, went or changed price is a change.
func (c *costs) observe(t float64, now []paidInstance) {
	seen := map[string]bool{}
	for _, p := range now {
		seen[p.ID] = true
		old, ok := c.paid[p.ID]
		switch {
		case !ok:
			c.changes = append(c.changes, costChange{T: t, Delta: p.Price, What: "launched", paidInstance: p})
		case old.Price != p.Price:
			c.changes = append(c.changes, costChange{T: t, Delta: p.Price - old.Price, What: "price", paidInstance: p})
		}
		c.paid[p.ID] = p
	}
	ids := make([]string, 0, len(c.paid))
	for id := range c.paid {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if !seen[id] {
			p := c.paid[id]
			c.changes = append(c.changes, costChange{T: t, Delta: -p.Price, What: "left", paidInstance: p})
			delete(c.paid, id)
		}
	}
}

// total is the $/hour of the instances at the last look.
func (c *costs) total() float64 {
	sum := 0.0
	for _, p := range c.paid {
		sum += p.Price
	}
	return sum
}

// costCause is one cause of a step's change of $/hour: changes of one kind
// added up.
type costCause struct {
	Delta    float64
	Kind     string // launched, left, replaced or price
	NodePool string // of launched and left
	Method   string // of replaced: drift, consolidation
	Why      string // of left: why the nodes went
	Launched []paidInstance
	Left     []paidInstance
}

// causes adds up the changes in (from, to] by cause, largest first.
func (c *costs) causes(from, to float64) []costCause {
	byKey := map[string]*costCause{}
	var order []string
	for _, ch := range c.changes {
		if ch.T <= from || ch.T > to {
			continue
		}
		var key string
		cause := costCause{Kind: ch.What, NodePool: ch.NodePool}
		switch {
		case ch.What == "price":
			key = "price"
			cause.NodePool = ""
		case ch.What == "launched" && c.launchedBy[ch.Claim] != "":
			cause = costCause{Kind: "replaced", Method: c.launchedBy[ch.Claim]}
		case ch.What == "left" && c.retiredBy[ch.Claim] != "":
			cause = costCause{Kind: "replaced", Method: c.retiredBy[ch.Claim]}
		case ch.What == "left":
			cause.Why = c.why[ch.Claim]
		}
		if key == "" {
			key = strings.Join([]string{cause.Kind, cause.Method, cause.NodePool, cause.Why}, "/")
		}
		x := byKey[key]
		if x == nil {
			x = &cause
			byKey[key] = x
			order = append(order, key)
		}
		x.Delta += ch.Delta
		switch ch.What {
		case "launched":
			x.Launched = append(x.Launched, ch.paidInstance)
		case "left":
			x.Left = append(x.Left, ch.paidInstance)
		}
	}
	out := make([]costCause, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	sort.SliceStable(out, func(i, j int) bool { return math.Abs(out[i].Delta) > math.Abs(out[j].Delta) })
	return out
}

// explain says what changed $/hour in (from, to]: the causes worth a
// tenth of a cent an hour, largest first, at most three of them.
func (c *costs) explain(from, to float64) []string {
	var out []string
	rest, restDelta := 0, 0.0
	for _, x := range c.causes(from, to) {
		if math.Abs(x.Delta) < 0.0005 {
			continue
		}
		if len(out) == 3 {
			rest++
			restDelta += x.Delta
			continue
		}
		out = append(out, x.String())
	}
	if rest > 0 {
		out = append(out, fmt.Sprintf("%s: %d smaller changes", signed(restDelta), rest))
	}
	return out
}

func (x costCause) String() string {
	switch x.Kind {
	case "price":
		return fmt.Sprintf("%s: spot prices moved", signed(x.Delta))
	case "replaced":
		return fmt.Sprintf("%s: %s replaced %s with %s", signed(x.Delta), x.Method, nodes(len(x.Left), ""), nodes(len(x.Launched), ""))
	case "launched":
		return fmt.Sprintf("%s: %s launched", signed(x.Delta), describe(x.Launched, x.NodePool))
	default:
		why := reasonText(x.Why)
		if why == "" {
			return fmt.Sprintf("%s: %s left", signed(x.Delta), describe(x.Left, x.NodePool))
		}
		return fmt.Sprintf("%s: %s left, %s", signed(x.Delta), describe(x.Left, x.NodePool), why)
	}
}

// describe names one node with its instance, or counts several.
func describe(list []paidInstance, pool string) string {
	if len(list) == 1 {
		p := list[0]
		name := p.Claim
		if name == "" {
			name = p.ID
		}
		return fmt.Sprintf("the %s node %s (%s %s, $%.3f/h)", pool, name, p.InstanceType, p.CapacityType, p.Price)
	}
	return nodes(len(list), pool)
}

func nodes(n int, pool string) string {
	if pool != "" {
		pool += " "
	}
	if n == 1 {
		return "1 " + pool + "node"
	}
	return fmt.Sprintf("%d %snodes", n, pool)
}

func signed(d float64) string {
	if d < 0 {
		return fmt.Sprintf("−%.3f", -d)
	}
	return fmt.Sprintf("+%.3f", d)
}

// reasonText words a NodeClaim's disruption reason for a reader.
func reasonText(why string) string {
	switch why {
	case "":
		return ""
	case "Empty":
		return "empty"
	case "Underutilized":
		return "underutilized (consolidation)"
	case "Drifted":
		return "drifted"
	case "Expired":
		return "expired"
	case "interrupted":
		return "interrupted by EC2"
	case "deleted":
		return "deleted"
	}
	return strings.ToLower(why)
}
