package scheduling

import (
	"math/bits"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// minValues counts, for each minValues key of a template, the distinct
// values the instance types added so far offer, as Karpenter's
// SatisfiesMinValues does over each type's requirements. The zone and
// capacity type of a type are not labels: they come from its available
// offerings (Karpenter's instance types carry the zones and capacity types
// they are offered in), here only those the claim still allows, so that a
// count that meets minValues also fits in the values the NodeClaim lists.
type minValues struct {
	keys  []string
	zones uint64
	cts   uint8
	seen  []map[string]struct{}
}

func newMinValues(keys []string) *minValues {
	m := &minValues{keys: keys, seen: make([]map[string]struct{}, len(keys))}
	for i := range m.seen {
		m.seen[i] = map[string]struct{}{}
	}
	return m
}

// add counts the values of tt under the claim's zone and capacity-type masks.
func (m *minValues) add(tt *tType, zm uint64, ctm uint8) {
	var zones uint64
	var cts uint8
	for ct := 0; ct < numCT; ct++ {
		if ctm&(1<<ct) == 0 {
			continue
		}
		if z := tt.zones[ct] & zm; z != 0 {
			zones |= z
			cts |= 1 << ct
		}
	}
	m.zones |= zones
	m.cts |= cts
	for k, key := range m.keys {
		switch key {
		case wellknown.ZoneLabel, wellknown.CapacityTypeLabel:
		case wellknown.InstanceTypeLabel:
			m.seen[k][tt.it.Name] = struct{}{}
		default:
			if vs, ok := tt.it.LabelChoices[key]; ok {
				for _, v := range vs {
					m.seen[k][v] = struct{}{}
				}
			} else if v, ok := tt.it.Labels[key]; ok {
				m.seen[k][v] = struct{}{}
			}
		}
	}
}

// count is the number of distinct values of the k-th key.
func (m *minValues) count(k int) int {
	switch m.keys[k] {
	case wellknown.ZoneLabel:
		return bits.OnesCount64(m.zones)
	case wellknown.CapacityTypeLabel:
		return bits.OnesCount8(m.cts)
	}
	return len(m.seen[k])
}

// minValueOf is the minValues the claim must keep for its k-th key: the
// NodePool's, or what BestEffort relaxed it to when the claim was opened.
func (c *claim) minValueOf(k int) int {
	if c.minVals != nil {
		return c.minVals[k]
	}
	return *c.t.reqs[c.t.minValueKeys[k]].MinValues
}

// MinValuesCount is the number of distinct values of key across types, the
// zone and capacity type taken from the available offerings that zones and
// cts allow (nil: any), as the simulator counts them for minValues. The
// disruption side uses it on replacement NodeClaims.
func MinValuesCount(types []*InstanceType, key string, zones, cts *Requirement) int {
	seen := map[string]struct{}{}
	for _, it := range types {
		switch key {
		case wellknown.ZoneLabel, wellknown.CapacityTypeLabel:
			for _, o := range it.Offerings {
				if !o.Available || (zones != nil && !zones.Has(o.Zone)) || (cts != nil && !cts.Has(o.CapacityType)) {
					continue
				}
				if key == wellknown.ZoneLabel {
					seen[o.Zone] = struct{}{}
				} else {
					seen[o.CapacityType] = struct{}{}
				}
			}
		case wellknown.InstanceTypeLabel:
			seen[it.Name] = struct{}{}
		default:
			if vs, ok := it.LabelChoices[key]; ok {
				for _, v := range vs {
					seen[v] = struct{}{}
				}
			} else if v, ok := it.Labels[key]; ok {
				seen[v] = struct{}{}
			}
		}
	}
	return len(seen)
}
