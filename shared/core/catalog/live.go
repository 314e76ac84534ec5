package catalog

import (
	"fmt"
	"sort"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// Facts is what the catalog keeps of one instance type, in a form that
// can be read from EC2 at run time and stored as JSON.
type Facts struct {
	Name      string `json:"name"`
	VCPU      int64  `json:"vcpu"`
	MemoryMiB int64  `json:"memoryMiB"`
	Arch      string `json:"arch"`
	// Labels are the well-known labels nodes of the type carry (LabelKeys);
	// others are ignored.
	Labels map[string]string `json:"labels"`
	// Interfaces is the ENI limit of the default network card, the only
	// card the VPC CNI uses; MultiCard marks types with more cards.
	Interfaces       int64 `json:"interfaces"`
	MultiCard        bool  `json:"multiCard,omitempty"`
	IPv4PerInterface int64 `json:"ipv4PerInterface"`
	// PodENI is set where nodes advertise vpc.amazonaws.com/pod-eni
	// (security groups for pods), BranchInterfaces of them. EC2 does not
	// publish either: they come from the build where it knows the type.
	PodENI           bool  `json:"podENI,omitempty"`
	BranchInterfaces int64 `json:"branchInterfaces,omitempty"`
	EFA              int64 `json:"efa,omitempty"`
	NeuronCores      int64 `json:"neuronCores,omitempty"`
	// MaxPods stands in for the ENI limits of the few compiled-in types
	// with none published.
	MaxPods int64 `json:"maxPods,omitempty"`
}

// Facts returns what the catalog knows of t, so that a live reading can
// be completed with what EC2 does not publish (network bandwidth, branch
// interfaces come from tables, as in the reference autoscaler).
func (t *InstanceType) Facts() Facts {
	return Facts{
		Name: t.Name, VCPU: t.VCPU, MemoryMiB: t.MemoryMiB, Arch: t.Arch, Labels: t.Labels(),
		Interfaces: t.interfaces, MultiCard: t.multiCard, IPv4PerInterface: t.ipv4PerInterface,
		PodENI: t.podENI, BranchInterfaces: t.branchInterfaces, EFA: t.efa, NeuronCores: t.neuronCores, MaxPods: t.maxPods,
	}
}

// NewType builds an instance type from its facts and on-demand price
// (0: none published, so it is not launched). The facts must name an
// architecture and the default card's ENI limits (or a pod limit): without
// them the pod limit, and so allocatable, would be a guess.
func NewType(f Facts, onDemand float64) (*InstanceType, error) {
	switch {
	case f.Name == "":
		return nil, fmt.Errorf("instance type without a name")
	case f.VCPU <= 0 || f.MemoryMiB <= 0:
		return nil, fmt.Errorf("instance type %s: no vCPU or memory", f.Name)
	case f.Arch != "amd64" && f.Arch != "arm64":
		return nil, fmt.Errorf("instance type %s: architecture %q is neither amd64 nor arm64", f.Name, f.Arch)
	case (f.Interfaces <= 0 || f.IPv4PerInterface <= 1) && f.MaxPods <= 0:
		return nil, fmt.Errorf("instance type %s: no ENI limits for the default network card", f.Name)
	}
	t := &InstanceType{
		Name: f.Name, VCPU: f.VCPU, MemoryMiB: f.MemoryMiB, Arch: f.Arch, OnDemandPrice: onDemand,
		interfaces: f.Interfaces, multiCard: f.MultiCard, ipv4PerInterface: f.IPv4PerInterface,
		branchInterfaces: f.BranchInterfaces, podENI: f.PodENI, efa: f.EFA, neuronCores: f.NeuronCores,
	}
	if f.Interfaces <= 0 || f.IPv4PerInterface <= 1 {
		t.interfaces, t.ipv4PerInterface, t.maxPods = 0, 0, f.MaxPods
	}
	for k, v := range f.Labels {
		if i := labelIndex(k); i >= 0 {
			t.labels[i] = v
		}
	}
	// The labels the scheduler and the launch rely on are the facts'
	// own, whatever the map said.
	t.labels[labelInstanceType] = f.Name
	t.labels[labelArch] = f.Arch
	if t.labels[labelOS] == "" {
		t.labels[labelOS] = "linux"
	}
	return t, nil
}

// New is a catalog of the given types for a region (sorted by name; a
// later duplicate replaces an earlier one).
func New(region string, types []*InstanceType) *Catalog {
	byName := make(map[string]*InstanceType, len(types))
	for _, t := range types {
		byName[t.Name] = t
	}
	c := &Catalog{Region: region, types: make([]*InstanceType, 0, len(byName)), byName: byName}
	for _, t := range byName {
		c.types = append(c.types, t)
	}
	sort.Slice(c.types, func(i, j int) bool { return c.types[i].Name < c.types[j].Name })
	return c
}

// Live is the catalog of a region as read at run time: the types EC2
// lists there (live; nil when they could not be read, then c's types
// stand in) priced from the region's on-demand price list (onDemand; nil
// when it could not be read, then c's prices stand in, and a type c does
// not know has no price). Facts EC2 does not publish (network bandwidth,
// pod-eni branch interfaces) are taken from c where it knows the type.
// Types whose facts are unusable are left out and named in skipped.
func (c *Catalog) Live(region string, live []Facts, onDemand map[string]float64) (cat *Catalog, skipped []string) {
	price := func(name string) float64 {
		if onDemand != nil {
			return onDemand[name]
		}
		if t, ok := c.byName[name]; ok {
			return t.OnDemandPrice
		}
		return 0
	}
	if live == nil {
		live = make([]Facts, 0, len(c.types))
		for _, t := range c.types {
			live = append(live, t.Facts())
		}
	}
	types := make([]*InstanceType, 0, len(live))
	for _, f := range live {
		if known, ok := c.byName[f.Name]; ok {
			f = completeFrom(f, known)
		}
		t, err := NewType(f, price(f.Name))
		if err != nil {
			skipped = append(skipped, err.Error())
			continue
		}
		types = append(types, t)
	}
	return New(region, types), skipped
}

// completeFrom fills what EC2's answer lacks from the compiled-in type.
func completeFrom(f Facts, known *InstanceType) Facts {
	labels := make(map[string]string, numLabels)
	for k, v := range f.Labels {
		labels[k] = v
	}
	if _, ok := labels[wellknown.InstanceNetworkBandwidthLabel]; !ok {
		if v, ok := known.Label(wellknown.InstanceNetworkBandwidthLabel); ok {
			labels[wellknown.InstanceNetworkBandwidthLabel] = v
		}
	}
	f.Labels = labels
	if !f.PodENI && f.BranchInterfaces == 0 {
		f.PodENI, f.BranchInterfaces = known.podENI, known.branchInterfaces
	}
	return f
}
