package static

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/poolstatus"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// catalogKeys are the labels an instance type either has or lacks for
// certain (a GPU count on a type without GPUs): a requirement on one of
// them is about the type even when the type does not carry the label.
var catalogKeys = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range catalog.LabelKeys() {
		m[k] = true
	}
	return m
}()

// Template is the NodeClaim a static NodePool creates: no pods, the
// template's requirements, labels and taints, and every instance type of
// its EC2NodeClass those requirements allow that has an available offering
// they allow, cheapest first, named in its instance-type requirement (the
// launch then picks by scheduling.LaunchOrder, as CheapestOffering
// predicts). Karpenter leaves the choice of type to its cloud provider,
// which filters by the same requirements; DaemonSets are not asked to fit,
// as there. It returns nil and why when the pool cannot launch.
func Template(np *karpv1.NodePool, classes map[string]*scheduling.NodeClass) (*scheduling.NewNodeClaim, string) {
	// Karpenter's static provisioning waits for the pool's root (Ready)
	// condition to be True.
	if err := poolstatus.Usable(np); err != nil {
		return nil, "it is not ready: " + err.Error()
	}
	ref := np.Spec.Template.Spec.NodeClassRef
	class := classes[ref.Name]
	switch {
	case class == nil:
		return nil, fmt.Sprintf("EC2NodeClass %s does not exist", ref.Name)
	case !class.Ready:
		return nil, fmt.Sprintf("EC2NodeClass %s is not ready", ref.Name)
	}
	class = class.ForPool(np.Name)
	labels := maps.Clone(np.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[wellknown.NodePoolLabel] = np.Name
	labels[wellknown.EC2NodeClassLabel] = class.Name
	reqs := scheduling.RequirementsFromNodePool(np.Spec.Template.Spec.Requirements)
	reqs.AddAll(scheduling.RequirementsFromLabels(labels))

	zones, cts := reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel)
	type priced struct {
		it    *scheduling.InstanceType
		price float64
	}
	var fit []priced
	for _, it := range class.InstanceTypes {
		if it == nil || !typeAllowed(it, reqs) {
			continue
		}
		p := priced{it: it, price: math.Inf(1)}
		for _, o := range it.Offerings {
			if o.Available && zones.Matches(o.Zone, true) && cts.Matches(o.CapacityType, true) {
				p.price = min(p.price, o.Price)
			}
		}
		if !math.IsInf(p.price, 1) {
			fit = append(fit, p)
		}
	}
	if len(fit) == 0 {
		return nil, fmt.Sprintf("no instance type of EC2NodeClass %s meets its requirements (%s) with an available offering", class.Name, reqs)
	}
	slices.SortFunc(fit, func(a, b priced) int {
		if c := cmp.Compare(a.price, b.price); c != 0 {
			return c
		}
		return cmp.Compare(a.it.Name, b.it.Name)
	})
	fit = fit[:min(len(fit), scheduling.DefaultMaxInstanceTypes)]
	out := &scheduling.NewNodeClaim{
		NodePool: np.Name, NodeClass: class.Name,
		Taints: np.Spec.Template.Spec.Taints, StartupTaints: np.Spec.Template.Spec.StartupTaints,
		Labels: labels,
	}
	names := make([]string, 0, len(fit))
	for _, p := range fit {
		out.InstanceTypes = append(out.InstanceTypes, p.it)
		names = append(names, p.it.Name)
	}
	if why := minValuesUnmet(reqs, out.InstanceTypes); why != "" {
		return nil, why
	}
	slices.Sort(names)
	itReq := karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: names}
	if r, ok := reqs[wellknown.InstanceTypeLabel]; ok {
		itReq.MinValues = r.MinValues
	}
	rest := reqs.Copy()
	delete(rest, wellknown.InstanceTypeLabel)
	delete(rest, wellknown.HostnameLabel)
	out.Requirements = append(rest.NodeSelectorRequirements(), itReq)
	slices.SortStableFunc(out.Requirements, func(a, b karpv1.NodeSelectorRequirementWithMinValues) int { return cmp.Compare(a.Key, b.Key) })
	// A custom label the requirements pin to one value is the node's
	// label too, as on a claim the simulator makes.
	for k, r := range rest {
		if !scheduling.IsWellKnown(k) && !wellknown.IsRestrictedLabel(k) && r.Operator() == corev1.NodeSelectorOpIn && len(r.Values()) == 1 {
			out.Labels[k] = r.Values()[0]
		}
	}
	return out, ""
}

// typeAllowed reports whether the requirements allow the type: each
// requirement on a label the type carries, or on a catalog label it
// lacks, must match. Zone and capacity type are the offerings' business;
// other labels (custom ones, the pool's own) are put on the node, not
// asked of the type.
func typeAllowed(it *scheduling.InstanceType, reqs scheduling.Requirements) bool {
	for _, k := range reqs.Keys() {
		switch k {
		case wellknown.ZoneLabel, wellknown.CapacityTypeLabel, wellknown.HostnameLabel:
			continue
		}
		if _, choice := it.LabelChoices[k]; choice {
			// The launch picks one of the values (tenancy).
			if !it.LabelMatches(reqs[k]) {
				return false
			}
			continue
		}
		v, ok := it.Labels[k]
		if !ok && !catalogKeys[k] {
			continue
		}
		if !reqs[k].Matches(v, ok) {
			return false
		}
	}
	return true
}

// minValuesUnmet says which minValues the types cannot meet ("" when all
// are met): a launch with fewer distinct values would be refused.
func minValuesUnmet(reqs scheduling.Requirements, types []*scheduling.InstanceType) string {
	for _, k := range reqs.Keys() {
		r := reqs[k]
		if r.MinValues == nil {
			continue
		}
		seen := map[string]bool{}
		for _, it := range types {
			if v, ok := it.Labels[k]; ok {
				seen[v] = true
			} else if k == wellknown.InstanceTypeLabel {
				seen[it.Name] = true
			}
		}
		if len(seen) < *r.MinValues {
			return fmt.Sprintf("requirement %s asks for %d distinct values (minValues) and the allowed instance types have %d", k, *r.MinValues, len(seen))
		}
	}
	return ""
}
