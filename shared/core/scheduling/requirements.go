package scheduling

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Requirement is the set of values one label key may take on a node. It is
// either a finite set ("In a, b"; empty means the label must be absent) or
// the complement of one ("NotIn a, b"; empty means any value, "Exists"),
// optionally bounded to integers in [gte, lte] (Gt, Lt, Gte, Lte).
// Requirements are values: every operation returns a new one.
type Requirement struct {
	Key        string
	complement bool
	values     []string // sorted, unique
	hasGte     bool
	hasLte     bool
	gte, lte   int64
	// MinValues is the NodePool's minimum number of distinct values of this
	// key across a NodeClaim's instance types; nil when unset.
	MinValues *int
}

// NewRequirement builds a requirement from a node-selector operator. Deprecated
// label keys are normalised to their current names. Values of Gt, Lt, Gte and
// Lte that are not integers make the requirement unsatisfiable.
func NewRequirement(key string, op corev1.NodeSelectorOperator, values ...string) *Requirement {
	if n, ok := wellknown.NormalizedLabels[key]; ok {
		key = n
	}
	r := &Requirement{Key: key}
	switch op {
	case corev1.NodeSelectorOpIn:
		r.values = sortedUnique(values)
	case corev1.NodeSelectorOpNotIn:
		r.complement = true
		r.values = sortedUnique(values)
	case corev1.NodeSelectorOpExists:
		r.complement = true
	case corev1.NodeSelectorOpDoesNotExist:
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
		if len(values) != 1 {
			return &Requirement{Key: key}
		}
		v, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return &Requirement{Key: key}
		}
		r.complement = true
		switch op {
		case corev1.NodeSelectorOpGt:
			if v == 1<<63-1 {
				return &Requirement{Key: key}
			}
			r.hasGte, r.gte = true, v+1
		case karpv1.NodeSelectorOpGte:
			r.hasGte, r.gte = true, v
		case corev1.NodeSelectorOpLt:
			if v == -1<<63 {
				return &Requirement{Key: key}
			}
			r.hasLte, r.lte = true, v-1
		case karpv1.NodeSelectorOpLte:
			r.hasLte, r.lte = true, v
		}
	default:
		// Unknown operators match nothing, as the API server would reject them.
		return &Requirement{Key: key}
	}
	return r
}

// NewRequirementWithMinValues is NewRequirement with a minValues floor.
func NewRequirementWithMinValues(key string, op corev1.NodeSelectorOperator, minValues *int, values ...string) *Requirement {
	r := NewRequirement(key, op, values...)
	if minValues != nil {
		v := *minValues
		r.MinValues = &v
	}
	return r
}

func sortedUnique(values []string) []string {
	if len(values) == 0 {
		return nil
	}
	out := slices.Clone(values)
	slices.Sort(out)
	return slices.Compact(out)
}

// Operator is the node-selector operator that describes the set best.
func (r *Requirement) Operator() corev1.NodeSelectorOperator {
	if r.complement {
		if len(r.values) > 0 {
			return corev1.NodeSelectorOpNotIn
		}
		return corev1.NodeSelectorOpExists
	}
	if len(r.values) > 0 {
		return corev1.NodeSelectorOpIn
	}
	return corev1.NodeSelectorOpDoesNotExist
}

// Values are the listed values: the allowed ones for In, the excluded ones for NotIn.
func (r *Requirement) Values() []string { return r.values }

// Len is the number of allowed values; a complement counts as
// math.MaxInt64 less the values it excludes, as Karpenter's does.
func (r *Requirement) Len() int {
	if r.complement {
		return math.MaxInt64 - len(r.values)
	}
	return len(r.values)
}

// Has reports whether a node whose label has value v satisfies the requirement.
func (r *Requirement) Has(v string) bool {
	if !r.withinBounds(v) {
		return false
	}
	_, found := slices.BinarySearch(r.values, v)
	return found != r.complement
}

// Any returns a value that satisfies the requirement, for a label a node
// must carry, as Karpenter's Requirement.Any: for In a listed value (the
// first, where Karpenter takes any), for NotIn, Exists and bounds an
// integer within the bounds (the smallest from 0 up that is not excluded,
// where Karpenter draws one at random, so that a solve stays a function of
// its input). It returns false for DoesNotExist and for bounds no integer
// meets.
func (r *Requirement) Any() (string, bool) {
	if !r.complement {
		if len(r.values) == 0 {
			return "", false
		}
		return r.values[0], true
	}
	lo := int64(0)
	switch {
	case r.hasGte:
		lo = r.gte
	case r.hasLte && r.lte < 0:
		lo = r.lte - int64(len(r.values))
	}
	// At most len(values) integers are excluded: one of the next
	// len(values)+1 is not.
	for i := 0; i <= len(r.values); i++ {
		v := lo + int64(i)
		if r.hasLte && v > r.lte || v < lo {
			break
		}
		if s := strconv.FormatInt(v, 10); r.Has(s) {
			return s, true
		}
	}
	return "", false
}

// AllowsAbsent reports whether a node without the label satisfies it.
func (r *Requirement) AllowsAbsent() bool {
	return r.Operator() == corev1.NodeSelectorOpNotIn || r.Operator() == corev1.NodeSelectorOpDoesNotExist
}

// Matches reports whether a node label (present or not) satisfies the requirement.
func (r *Requirement) Matches(v string, present bool) bool {
	if !present {
		return r.AllowsAbsent()
	}
	return r.Has(v)
}

func (r *Requirement) withinBounds(v string) bool {
	if !r.hasGte && !r.hasLte {
		return true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false
	}
	return (!r.hasGte || n >= r.gte) && (!r.hasLte || n <= r.lte)
}

// Intersect returns the values both requirements allow.
func (r *Requirement) Intersect(o *Requirement) *Requirement {
	out := &Requirement{Key: r.Key, complement: r.complement && o.complement}
	out.hasGte, out.gte = maxBound(r.hasGte, r.gte, o.hasGte, o.gte)
	out.hasLte, out.lte = minBound(r.hasLte, r.lte, o.hasLte, o.lte)
	out.MinValues = maxIntPtr(r.MinValues, o.MinValues)
	if out.hasGte && out.hasLte && out.gte > out.lte {
		return &Requirement{Key: r.Key, MinValues: out.MinValues}
	}
	switch {
	case r.complement && o.complement:
		out.values = union(r.values, o.values)
	case r.complement:
		out.values = difference(o.values, r.values)
	case o.complement:
		out.values = difference(r.values, o.values)
	default:
		out.values = intersection(r.values, o.values)
	}
	// Values outside the bounds are dropped, from a complement too: a
	// NotIn value the bounds already exclude says nothing more, and keeping
	// it would make "Gt 9" and "NotIn 1" read NotIn (a label it lets be
	// absent) rather than Exists, as Karpenter has it.
	if out.hasGte || out.hasLte {
		kept := out.values[:0:0]
		for _, v := range out.values {
			if out.withinBounds(v) {
				kept = append(kept, v)
			}
		}
		out.values = kept
	}
	if !out.complement {
		out.hasGte, out.hasLte = false, false
	}
	return out
}

// HasIntersection reports whether some node could satisfy both, counting a
// node without the label when both allow its absence.
func (r *Requirement) HasIntersection(o *Requirement) bool {
	if r.AllowsAbsent() && o.AllowsAbsent() {
		return true
	}
	return r.intersectsValues(o)
}

// intersectsValues reports whether some label value satisfies both.
func (r *Requirement) intersectsValues(o *Requirement) bool {
	hasGte, gte := maxBound(r.hasGte, r.gte, o.hasGte, o.gte)
	hasLte, lte := minBound(r.hasLte, r.lte, o.hasLte, o.lte)
	if hasGte && hasLte && gte > lte {
		return false
	}
	bounded := func(v string) bool {
		if !hasGte && !hasLte {
			return true
		}
		n, err := strconv.ParseInt(v, 10, 64)
		return err == nil && (!hasGte || n >= gte) && (!hasLte || n <= lte)
	}
	switch {
	case r.complement && o.complement:
		return true
	case r.complement:
		for _, v := range o.values {
			if r.Has(v) && bounded(v) {
				return true
			}
		}
		return false
	case o.complement:
		for _, v := range r.values {
			if o.Has(v) && bounded(v) {
				return true
			}
		}
		return false
	}
	i, j := 0, 0
	for i < len(r.values) && j < len(o.values) {
		switch c := strings.Compare(r.values[i], o.values[j]); {
		case c == 0:
			if bounded(r.values[i]) {
				return true
			}
			i++
			j++
		case c < 0:
			i++
		default:
			j++
		}
	}
	return false
}

// NodeSelectorRequirements renders the requirement for a NodeClaim spec; a
// doubly bounded requirement needs two entries.
func (r *Requirement) NodeSelectorRequirements() []karpv1.NodeSelectorRequirementWithMinValues {
	return r.appendNodeSelectorRequirements(nil)
}

// appendNodeSelectorRequirements appends the rendering to out.
func (r *Requirement) appendNodeSelectorRequirements(out []karpv1.NodeSelectorRequirementWithMinValues) []karpv1.NodeSelectorRequirementWithMinValues {
	mk := func(op corev1.NodeSelectorOperator, values []string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: op, Values: values, MinValues: r.MinValues}
	}
	switch {
	case r.complement && (r.hasGte || r.hasLte):
		if r.hasGte {
			out = append(out, mk(karpv1.NodeSelectorOpGte, []string{strconv.FormatInt(r.gte, 10)}))
		}
		if r.hasLte {
			out = append(out, mk(karpv1.NodeSelectorOpLte, []string{strconv.FormatInt(r.lte, 10)}))
		}
		if len(r.values) > 0 {
			out = append(out, mk(corev1.NodeSelectorOpNotIn, slices.Clone(r.values)))
		}
		return out
	default:
		return append(out, mk(r.Operator(), slices.Clone(r.values)))
	}
}

// String renders the requirement for people as Karpenter does, in pod
// events and errors: "zone In [a b]", "cpu Exists >=2 <=8", at most five
// values then "and N others".
func (r *Requirement) String() string {
	var b strings.Builder
	b.WriteString(r.Key)
	switch op := r.Operator(); op {
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		b.WriteString(" " + string(op))
	default:
		vals := r.values
		more := 0
		if len(vals) > 5 {
			more = len(vals) - 5
			vals = vals[:5]
		}
		fmt.Fprintf(&b, " %s [%s", op, strings.Join(vals, " "))
		if more > 0 {
			fmt.Fprintf(&b, " and %d others", more)
		}
		b.WriteString("]")
	}
	if r.hasGte {
		fmt.Fprintf(&b, " >=%d", r.gte)
	}
	if r.hasLte {
		fmt.Fprintf(&b, " <=%d", r.lte)
	}
	if r.MinValues != nil {
		fmt.Fprintf(&b, " minValues %d", *r.MinValues)
	}
	return b.String()
}

// canonical is a stable encoding used to deduplicate requirement sets.
func (r *Requirement) canonical(b *strings.Builder) {
	b.WriteString(r.Key)
	if r.complement {
		b.WriteString("!")
	} else {
		b.WriteString("=")
	}
	for _, v := range r.values {
		b.WriteString(v)
		b.WriteByte(',')
	}
	if r.hasGte {
		fmt.Fprintf(b, ">%d", r.gte)
	}
	if r.hasLte {
		fmt.Fprintf(b, "<%d", r.lte)
	}
	if r.MinValues != nil {
		fmt.Fprintf(b, "#%d", *r.MinValues)
	}
	b.WriteByte(';')
}

func maxBound(ha bool, a int64, hb bool, b int64) (bool, int64) {
	switch {
	case ha && hb:
		return true, max(a, b)
	case ha:
		return true, a
	case hb:
		return true, b
	}
	return false, 0
}

func minBound(ha bool, a int64, hb bool, b int64) (bool, int64) {
	switch {
	case ha && hb:
		return true, min(a, b)
	case ha:
		return true, a
	case hb:
		return true, b
	}
	return false, 0
}

func maxIntPtr(a, b *int) *int {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case *a >= *b:
		return a
	}
	return b
}

func union(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

func intersection(a, b []string) []string {
	var out []string
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			out = append(out, a[i])
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return out
}

// difference is a minus b.
func difference(a, b []string) []string {
	var out []string
	j := 0
	for _, v := range a {
		for j < len(b) && b[j] < v {
			j++
		}
		if j < len(b) && b[j] == v {
			continue
		}
		out = append(out, v)
	}
	return out
}

// Requirements is a conjunction of requirements, one per key.
type Requirements map[string]*Requirement

// NewRequirements intersects the given requirements by key.
func NewRequirements(rs ...*Requirement) Requirements {
	out := make(Requirements, len(rs))
	out.Add(rs...)
	return out
}

// RequirementsFromNodeSelector converts node-selector expressions.
func RequirementsFromNodeSelector(exprs []corev1.NodeSelectorRequirement) Requirements {
	out := make(Requirements, len(exprs))
	for _, e := range exprs {
		out.Add(NewRequirement(e.Key, e.Operator, e.Values...))
	}
	return out
}

// RequirementsFromNodePool converts NodePool requirements, keeping minValues.
func RequirementsFromNodePool(exprs []karpv1.NodeSelectorRequirementWithMinValues) Requirements {
	out := make(Requirements, len(exprs))
	for _, e := range exprs {
		out.Add(NewRequirementWithMinValues(e.Key, e.Operator, e.MinValues, e.Values...))
	}
	return out
}

// RequirementsFromLabels makes one In requirement per label.
func RequirementsFromLabels(labels map[string]string) Requirements {
	out := make(Requirements, len(labels))
	for k, v := range labels {
		out.Add(NewRequirement(k, corev1.NodeSelectorOpIn, v))
	}
	return out
}

// Add intersects requirements into r in place.
func (r Requirements) Add(rs ...*Requirement) {
	for _, q := range rs {
		if have, ok := r[q.Key]; ok {
			q = have.Intersect(q)
		}
		r[q.Key] = q
	}
}

// AddAll intersects every requirement of o into r.
func (r Requirements) AddAll(o Requirements) {
	for _, k := range o.Keys() {
		r.Add(o[k])
	}
}

// Copy returns a shallow copy (requirements themselves are immutable).
func (r Requirements) Copy() Requirements {
	out := make(Requirements, len(r))
	for k, v := range r {
		out[k] = v
	}
	return out
}

// Get returns the requirement on key, or Exists when there is none.
func (r Requirements) Get(key string) *Requirement {
	if q, ok := r[key]; ok {
		return q
	}
	return &Requirement{Key: key, complement: true}
}

// Has reports whether key is constrained.
func (r Requirements) Has(key string) bool {
	_, ok := r[key]
	return ok
}

// Keys returns the keys in sorted order.
func (r Requirements) Keys() []string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// IsWellKnown reports whether a key is one the scheduler can satisfy on a node
// it has not launched yet (Karpenter's well-known labels).
func IsWellKnown(key string) bool { return wellKnownSet[key] }

var wellKnownSet = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range wellknown.WellKnownLabels {
		m[k] = true
	}
	return m
}()

// Incompatibility describes why two requirement sets cannot both hold.
type Incompatibility struct {
	Key string
	// Have is what the node side allows; nil when the node side does not
	// define the key at all.
	Have, Want *Requirement
	// node and allowUndefined are Compatible's, kept to name a likely typo
	// only when the message is asked for: most failures are never shown.
	node           Requirements
	allowUndefined func(string) bool
}

// Error words the failure as Karpenter's Requirements.Compatible does.
func (e *Incompatibility) Error() string {
	if e.Have == nil {
		return fmt.Sprintf("label %q does not have known values%s", e.Key, e.typoHint())
	}
	return fmt.Sprintf("key %s, %s not in %s", e.Key, e.Want, e.Have)
}

// typoHint is Karpenter's guess at the label a key no node defines was
// meant to be, ` (typo of "topology.kubernetes.io/zone"?)`: the first
// well-known label the check let nodes leave undefined, then the first
// label the nodes define, that contains the key or ends with its name
// (the part after the prefix). Karpenter takes the first of a set; the
// well-known list's order (zone before zone-id) makes the guess stable.
func (e *Incompatibility) typoHint() string {
	name := e.Key
	if _, after, found := strings.Cut(e.Key, "/"); found {
		name = after
	}
	like := func(k string) bool { return strings.Contains(k, e.Key) || strings.HasSuffix(k, name) }
	if e.allowUndefined != nil {
		for _, k := range wellknown.WellKnownLabels {
			if e.allowUndefined(k) && like(k) {
				return fmt.Sprintf(" (typo of %q?)", k)
			}
		}
	}
	for _, k := range e.node.Keys() {
		if like(k) {
			return fmt.Sprintf(" (typo of %q?)", k)
		}
	}
	return ""
}

// Compatible reports whether a node described by r can satisfy want. Keys in
// want that r does not define fail when want needs the label to exist (In,
// Exists, bounds), unless allowUndefined says the key is one a new node may
// still get (well-known labels on a NodeClaim not launched yet).
func (r Requirements) Compatible(want Requirements, allowUndefined func(string) bool) *Incompatibility {
	for _, k := range want.Keys() {
		w := want[k]
		h, ok := r[k]
		if !ok {
			if (allowUndefined != nil && allowUndefined(k)) || w.AllowsAbsent() {
				continue
			}
			return &Incompatibility{Key: k, Want: w, node: r, allowUndefined: allowUndefined}
		}
		if !h.HasIntersection(w) {
			return &Incompatibility{Key: k, Have: h, Want: w}
		}
	}
	return nil
}

// Intersects reports whether r and o agree on every key both define.
func (r Requirements) Intersects(o Requirements) *Incompatibility {
	small, large := r, o
	swapped := false
	if len(small) > len(large) {
		small, large, swapped = large, small, true
	}
	for _, k := range small.Keys() {
		if lq, ok := large[k]; ok && !small[k].HasIntersection(lq) {
			if swapped {
				return &Incompatibility{Key: k, Have: small[k], Want: lq}
			}
			return &Incompatibility{Key: k, Have: lq, Want: small[k]}
		}
	}
	return nil
}

// MatchesLabels reports whether a node with these labels satisfies every
// requirement, returning the first one it fails.
func (r Requirements) MatchesLabels(labels map[string]string) *Requirement {
	for _, k := range r.Keys() {
		v, ok := labels[k]
		if !r[k].Matches(v, ok) {
			return r[k]
		}
	}
	return nil
}

// NodeSelectorRequirements renders every requirement, sorted by key.
func (r Requirements) NodeSelectorRequirements() []karpv1.NodeSelectorRequirementWithMinValues {
	return r.appendNodeSelectorRequirements(nil)
}

// appendNodeSelectorRequirements appends the rendering, sorted by key, to out.
func (r Requirements) appendNodeSelectorRequirements(out []karpv1.NodeSelectorRequirementWithMinValues) []karpv1.NodeSelectorRequirementWithMinValues {
	for _, k := range r.Keys() {
		out = r[k].appendNodeSelectorRequirements(out)
	}
	return out
}

// String renders the set for people, sorted by key.
func (r Requirements) String() string {
	parts := make([]string, 0, len(r))
	for _, k := range r.Keys() {
		parts = append(parts, r[k].String())
	}
	return strings.Join(parts, ", ")
}

func (r Requirements) canonical() string {
	var b strings.Builder
	for _, k := range r.Keys() {
		r[k].canonical(&b)
	}
	return b.String()
}

// PodRequirements are the node requirements of a pod: its nodeSelector, the
// first required node-affinity term (the others are tried in turn when it
// fails, as Karpenter does) and, unless strict, the heaviest preferred term.
func PodRequirements(pod *corev1.Pod, strict bool) Requirements {
	r := RequirementsFromLabels(pod.Spec.NodeSelector)
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil {
		return r
	}
	if !strict {
		if pref := heaviestPreferred(aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution); pref != nil {
			for _, e := range pref.Preference.MatchExpressions {
				r.Add(NewRequirement(e.Key, e.Operator, e.Values...))
			}
		}
	}
	if req := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; req != nil && len(req.NodeSelectorTerms) > 0 {
		for _, e := range req.NodeSelectorTerms[0].MatchExpressions {
			r.Add(NewRequirement(e.Key, e.Operator, e.Values...))
		}
	}
	return r
}

// heaviestPreferred returns the first preferred term of the highest weight.
func heaviestPreferred(terms []corev1.PreferredSchedulingTerm) *corev1.PreferredSchedulingTerm {
	var best *corev1.PreferredSchedulingTerm
	for i := range terms {
		if best == nil || terms[i].Weight > best.Weight {
			best = &terms[i]
		}
	}
	return best
}
