package whatif

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/wellknown"
)

var (
	t0     = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	zoneA  = "us-east-1a"
	zoneB  = "us-east-1b"
	mTypes = []string{"m5.large", "m5.xlarge", "m5.2xlarge"}
)

// book prices m5 spot at fixed values in both zones; every type in the
// catalog is offered in both zones.
func testBook() *pricing.Book {
	b := &pricing.Book{UpdatedAt: t0.Add(-5 * time.Minute), Zones: map[string][]string{}, Spot: map[string]map[string]float64{
		"m5.large":   {zoneA: 0.040, zoneB: 0.035},
		"m5.xlarge":  {zoneA: 0.080, zoneB: 0.090},
		"m5.2xlarge": {zoneA: 0.160, zoneB: 0.170},
	}}
	for _, t := range append(mTypes, "c5.large", "c5.xlarge", "m6g.large") {
		b.Zones[t] = []string{zoneA, zoneB}
	}
	return b
}

// fixture builds a snapshot by hand.
type fixture struct {
	t      *testing.T
	snap   *cluster.Snapshot
	market Market
	seq    int
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, snap: &cluster.Snapshot{}, market: Market{Book: testBook()}}
	f.snap.NodeClasses = []*awsv1.EC2NodeClass{readyClass("default")}
	f.pool("default", karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: mTypes})
	return f
}

func readyClass(name string) *awsv1.EC2NodeClass {
	c := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1, Annotations: map[string]string{
		wellknown.EC2NodeClassHashAnnotation: "1234", wellknown.EC2NodeClassHashVersionAnnotation: "v4",
	}}}
	c.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}
	c.Status.Subnets = []awsv1.Subnet{{ID: "subnet-a", Zone: zoneA}, {ID: "subnet-b", Zone: zoneB}}
	c.Status.AMIs = []awsv1.AMI{{ID: "ami-1", Requirements: []corev1.NodeSelectorRequirement{{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}}
	c.Status.Conditions = []metav1.Condition{{Type: awsv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}
	return c
}

// pool adds a NodePool: WhenEmptyOrUnderutilized, consolidateAfter 0s,
// budget 100%, on-demand and spot.
func (f *fixture) pool(name string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("np-" + name)}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = append([]karpv1.NodeSelectorRequirementWithMinValues{
		{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand}},
	}, reqs...)
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	f.snap.NodePools = append(f.snap.NodePools, np)
	return np
}

func (f *fixture) poolNamed(name string) *karpv1.NodePool {
	for _, np := range f.snap.NodePools {
		if np.Name == name {
			return np
		}
	}
	f.t.Fatalf("no nodepool %s", name)
	return nil
}

// node adds a managed, initialized node of the pool and its NodeClaim,
// created age ago.
func (f *fixture) node(name, pool, itype, zone, ct string, age time.Duration) (*corev1.Node, *karpv1.NodeClaim) {
	f.seq++
	created := metav1.NewTime(t0.Add(-age))
	pid := wellknown.ProviderID(zone, fmt.Sprintf("i-%017d", f.seq))
	labels := map[string]string{
		wellknown.NodePoolLabel: pool, wellknown.InstanceTypeLabel: itype, wellknown.ZoneLabel: zone, wellknown.CapacityTypeLabel: ct,
		wellknown.ArchLabel: "amd64", wellknown.OSLabel: "linux", corev1.LabelHostname: name,
	}
	if family, size, ok := strings.Cut(itype, "."); ok {
		labels[wellknown.InstanceFamilyLabel], labels[wellknown.InstanceSizeLabel] = family, size
	}
	cpu, mem := map[string]string{"m5.large": "1930m", "m5.xlarge": "3920m", "m5.2xlarge": "7910m", "t3.medium": "1930m"}[itype], map[string]string{"m5.large": "7Gi", "m5.xlarge": "14Gi", "m5.2xlarge": "29Gi", "t3.medium": "3Gi"}[itype]
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("29")}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: created},
		Spec:       corev1.NodeSpec{ProviderID: pid},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc, Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		}},
	}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + name, Labels: labels, CreationTimestamp: created, UID: types.UID("uid-" + name)}}
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{pool}},
		{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: mTypes},
		{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand}},
	}
	nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration("720h")
	nc.Status.ProviderID, nc.Status.NodeName, nc.Status.Allocatable, nc.Status.Capacity = pid, name, alloc, alloc
	for _, c := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: c, LastTransitionTime: created})
	}
	f.snap.Nodes = append(f.snap.Nodes, n)
	f.snap.NodeClaims = append(f.snap.NodeClaims, nc)
	return n, nc
}

// inFlight adds a claim launched for pool but not registered yet.
func (f *fixture) inFlight(name, pool, itype, zone, ct string) *karpv1.NodeClaim {
	_, nc := f.node(name, pool, itype, zone, ct, time.Minute)
	f.snap.Nodes = f.snap.Nodes[:len(f.snap.Nodes)-1]
	nc.Status.NodeName = ""
	nc.Status.Conditions = nc.Status.Conditions[:1]
	return nc
}

// pod adds a pod of a ReplicaSet: bound to node, or pending (marked
// Unschedulable) when node is "".
func (f *fixture) pod(ns, name, cpu, mem, node string) *corev1.Pod {
	f.seq++
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("pod-%d", f.seq)), Labels: map[string]string{"app": name},
			CreationTimestamp: metav1.NewTime(t0.Add(-2 * time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-rs", UID: "rs", Controller: new(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if node == "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	} else {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-2 * time.Hour))}}
	}
	f.snap.Pods = append(f.snap.Pods, p)
	return p
}

// pdb adds a PDB over app=<app> with the given allowed disruptions.
func (f *fixture) pdb(ns, app string, allowed int32) {
	f.snap.PDBs = append(f.snap.PDBs, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app + "-pdb"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: new(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	})
}

func (f *fixture) world() *World {
	f.t.Helper()
	w, err := New(Input{Cluster: f.snap, Market: f.market, Options: Options{Now: t0}})
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}

// onDemand is the catalog's on-demand price of a type.
func onDemand(t *testing.T, name string) float64 {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	it, ok := cat.Get(name)
	if !ok {
		t.Fatalf("no instance type %s", name)
	}
	return it.OnDemandPrice
}
