// Package catalog is the EC2 instance-type catalog (vCPU, memory, labels, ENI
// limits, on-demand prices) compiled into the binary, and its allocatable arithmetic.
package catalog

//go:generate go run ./internal/gen -in ../../../../shared/catalog/ec2-instance-types.json

import (
	"strconv"
	"strings"
)

// InstanceType is one EC2 instance type. The catalog hands out pointers into
// its own copy: treat them as read-only.
type InstanceType struct {
	Name      string
	VCPU      int64
	MemoryMiB int64
	// Arch is amd64 or arm64.
	Arch string
	// OnDemandPrice is the Linux on-demand price in USD per hour in the
	// catalog's region; 0 when AWS does not publish one.
	OnDemandPrice float64

	labels [numLabels]string
	// interfaces is the ENI limit of the default network card, which is all
	// the VPC CNI uses; multiCard marks types where it is less than the total.
	interfaces       int64
	multiCard        bool
	ipv4PerInterface int64
	branchInterfaces int64
	// podENI is true when the VPC resource controller advertises
	// vpc.amazonaws.com/pod-eni (security groups for pods) on the type.
	podENI bool
	// maxPods is stored only for types with no published ENI facts.
	maxPods int64
	// EFA interfaces and Neuron cores are not in the published facts; they
	// are stored as the figures the reference autoscaler publishes.
	efa         int64
	neuronCores int64
}

// Catalog is the set of instance types, sorted by name.
type Catalog struct {
	Region string
	types  []*InstanceType
	byName map[string]*InstanceType
}

// Load returns a private copy of the compiled-in catalog. It is cheap (a copy
// and an index); share the result for the life of the process.
func Load() (*Catalog, error) {
	own := make([]InstanceType, len(records))
	copy(own, records[:])
	c := &Catalog{Region: region, types: make([]*InstanceType, len(own)), byName: make(map[string]*InstanceType, len(own))}
	for i := range own {
		c.types[i] = &own[i]
		c.byName[own[i].Name] = &own[i]
	}
	return c, nil
}

// All returns every instance type, sorted by name. Do not modify the slice.
func (c *Catalog) All() []*InstanceType { return c.types }

// Get returns the named instance type.
func (c *Catalog) Get(name string) (*InstanceType, bool) {
	t, ok := c.byName[name]
	return t, ok
}

// Len is the number of instance types.
func (c *Catalog) Len() int { return len(c.types) }

// Label returns the value of a well-known label on nodes of this type.
func (t *InstanceType) Label(key string) (string, bool) {
	i := labelIndex(key)
	if i < 0 || t.labels[i] == "" {
		return "", false
	}
	return t.labels[i], true
}

// EachLabel calls f for every label nodes of this type carry.
func (t *InstanceType) EachLabel(f func(key, value string)) {
	for i, v := range t.labels {
		if v != "" {
			f(labelKeys[i], v)
		}
	}
}

// Labels returns a new map of the type's labels.
func (t *InstanceType) Labels() map[string]string {
	m := make(map[string]string, numLabels)
	t.EachLabel(func(k, v string) { m[k] = v })
	return m
}

// GPUs is the number of GPUs and their manufacturer (nvidia, amd), if any.
func (t *InstanceType) GPUs() (int64, string) {
	n, _ := strconv.ParseInt(t.labels[labelGPUCount], 10, 64)
	return n, t.labels[labelGPUManufacturer]
}

// Accelerators is the number of non-GPU accelerators (Neuron, Gaudi) and
// their manufacturer.
func (t *InstanceType) Accelerators() (int64, string) {
	n, _ := strconv.ParseInt(t.labels[labelAcceleratorCount], 10, 64)
	return n, t.labels[labelAcceleratorManufacturer]
}

// MaxEFA is how many EFA interfaces the type can attach (0: none).
func (t *InstanceType) MaxEFA() int64 { return t.efa }

// IsMetal reports whether the type is bare metal.
func (t *InstanceType) IsMetal() bool { return strings.Contains(t.labels[labelSize], "metal") }

// ENILimitedPods is the VPC CNI's pod limit: usable interfaces on the default
// network card times (addresses per interface - 1), plus 2 for host-network
// pods. reservedENIs are interfaces kept for other uses (EFA-only, --reserved-enis).
func (t *InstanceType) ENILimitedPods(reservedENIs int64) int64 {
	if t.ipv4PerInterface == 0 {
		return t.maxPods
	}
	usable := t.interfaces - reservedENIs
	if usable <= 0 {
		return 0
	}
	return usable*(t.ipv4PerInterface-1) + 2
}

// LabelKeys are the label keys the catalog can set, in a fixed order.
func LabelKeys() []string { return append([]string(nil), labelKeys[:]...) }
