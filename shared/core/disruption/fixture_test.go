package disruption

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
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

var zones = []string{"test-1a", "test-1b"}

// mkType is a synthetic instance type: cores, GiB and on-demand $/h; spot
// costs 30% of on-demand.
func mkType(name string, cpu, memGi int64, od float64) *scheduling.InstanceType {
	family, size, _ := strings.Cut(name, ".")
	it := &scheduling.InstanceType{
		Name: name,
		Labels: map[string]string{
			wellknown.InstanceTypeLabel: name, wellknown.ArchLabel: "amd64", wellknown.OSLabel: "linux",
			wellknown.InstanceFamilyLabel: family, wellknown.InstanceSizeLabel: size,
			wellknown.InstanceCPULabel: fmt.Sprint(cpu), wellknown.InstanceCategoryLabel: family[:1],
		},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(memGi<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		},
	}
	it.Allocatable = it.Capacity.DeepCopy()
	for _, z := range zones {
		it.Offerings = append(it.Offerings,
			scheduling.Offering{Zone: z, CapacityType: wellknown.CapacityTypeOnDemand, Price: od, Available: true},
			scheduling.Offering{Zone: z, CapacityType: wellknown.CapacityTypeSpot, Price: od * 0.3, Available: true})
	}
	return it
}

func baseTypes() []*scheduling.InstanceType {
	return []*scheduling.InstanceType{
		mkType("m.large", 2, 8, 0.10),
		mkType("m.xlarge", 4, 16, 0.20),
		mkType("m.2xlarge", 8, 32, 0.40),
		mkType("m.4xlarge", 16, 64, 0.80),
	}
}

// manyTypes adds 20 small spot-capable types cheaper than m.xlarge, for
// the spot-to-spot rule that wants 15 cheaper options.
func manyTypes() []*scheduling.InstanceType {
	out := baseTypes()
	for i := range 20 {
		out = append(out, mkType(fmt.Sprintf("c%d.xlarge", i), 4, 16, 0.12+float64(i)*0.001))
	}
	return out
}

type fixture struct {
	t     *testing.T
	now   time.Time
	snap  *cluster.Snapshot
	types []*scheduling.InstanceType
	opts  Options
	facts map[string]InstanceFacts
	seq   int
	// extraClasses are EC2NodeClasses beside "default", by name.
	extraClasses map[string]*scheduling.NodeClass
}

var t0 = time.Date(2026, 3, 2, 10, 30, 0, 0, time.UTC)

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, now: t0, types: baseTypes(), snap: &cluster.Snapshot{}}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "np-uid"}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Kind: "EC2NodeClass", Name: "default", Group: "karpenter.k8s.aws"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeOnDemand}},
	}
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Annotations: map[string]string{
		wellknown.EC2NodeClassHashAnnotation: "111", wellknown.EC2NodeClassHashVersionAnnotation: "karpless-v1",
	}}}
	class.Status.AMIs = []awsv1.AMI{{ID: "ami-new", Requirements: []corev1.NodeSelectorRequirement{{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}}
	class.Status.SecurityGroups = []awsv1.SecurityGroup{{ID: "sg-1"}}
	class.Status.Subnets = []awsv1.Subnet{{ID: "subnet-a", Zone: "test-1a"}, {ID: "subnet-b", Zone: "test-1b"}}
	f.snap.NodePools = []*karpv1.NodePool{np}
	f.snap.NodeClasses = []*awsv1.EC2NodeClass{class}
	return f
}

func (f *fixture) pool() *karpv1.NodePool { return f.snap.NodePools[0] }

func (f *fixture) class() *awsv1.EC2NodeClass { return f.snap.NodeClasses[0] }

func (f *fixture) typeNamed(name string) *scheduling.InstanceType {
	for _, it := range f.types {
		if it.Name == name {
			return it
		}
	}
	f.t.Fatalf("no instance type %s", name)
	return nil
}

// node adds an initialized, consolidatable node and its claim.
func (f *fixture) node(name, itype, zone, ct string) *karpv1.NodeClaim {
	f.seq++
	it := f.typeNamed(itype)
	np := f.pool()
	created := metav1.NewTime(f.now.Add(-2 * time.Hour))
	pid := wellknown.ProviderID(zone, fmt.Sprintf("i-%017d", f.seq))
	labels := map[string]string{
		wellknown.NodePoolLabel: np.Name, wellknown.EC2NodeClassLabel: "default",
		wellknown.InstanceTypeLabel: itype, wellknown.ZoneLabel: zone, wellknown.CapacityTypeLabel: ct,
		wellknown.HostnameLabel: name,
	}
	for k, v := range it.Labels {
		labels[k] = v
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID("uid-" + name), CreationTimestamp: created, Labels: labels,
			Annotations: map[string]string{
				wellknown.NodePoolHashAnnotation: np.Hash(), wellknown.NodePoolHashVersionAnnotation: wellknown.NodePoolHashVersion,
				wellknown.EC2NodeClassHashAnnotation: "111", wellknown.EC2NodeClassHashVersionAnnotation: "karpless-v1",
			},
		},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: np.Spec.Template.Spec.NodeClassRef,
			ExpireAfter:  karpv1.MustParseNillableDuration("720h"),
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{np.Name}}},
		},
		Status: karpv1.NodeClaimStatus{ProviderID: pid, NodeName: name, ImageID: "ami-new", Allocatable: it.Allocatable, Capacity: it.Capacity},
	}
	at := metav1.NewTime(f.now.Add(-time.Hour))
	for _, c := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, karpv1.ConditionTypeConsolidatable} {
		nc.SetCondition(c, metav1.ConditionTrue, c, "", at)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-" + name), Labels: labels, CreationTimestamp: created},
		Spec:       corev1.NodeSpec{ProviderID: pid},
		Status: corev1.NodeStatus{Allocatable: it.Allocatable, Capacity: it.Capacity, Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		}},
	}
	f.snap.NodeClaims = append(f.snap.NodeClaims, nc)
	f.snap.Nodes = append(f.snap.Nodes, node)
	if f.facts == nil {
		f.facts = map[string]InstanceFacts{}
	}
	subnet := "subnet-a"
	if zone == "test-1b" {
		subnet = "subnet-b"
	}
	f.facts[wellknown.InstanceIDFromProviderID(pid)] = InstanceFacts{SubnetID: subnet, SecurityGroupIDs: []string{"sg-1"}}
	return nc
}

func (f *fixture) nodeObj(name string) *corev1.Node {
	for _, n := range f.snap.Nodes {
		if n.Name == name {
			return n
		}
	}
	f.t.Fatalf("no node %s", name)
	return nil
}

func (f *fixture) claim(name string) *karpv1.NodeClaim {
	for _, n := range f.snap.NodeClaims {
		if n.Name == name {
			return n
		}
	}
	f.t.Fatalf("no claim %s", name)
	return nil
}

// pod binds a pod requesting cpu (cores, e.g. "1500m") and memory to node
// ("" for a pending, unschedulable pod).
func (f *fixture) pod(name, node, cpu, mem string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID("pod-" + name), Labels: map[string]string{"app": name},
			CreationTimestamp: metav1.NewTime(f.now.Add(-3 * time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: new(true)}},
		},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if node == "" {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	} else {
		// It started 3 h ago, when it was created: a do-not-disrupt
		// duration's grace period begins then.
		p.Status.StartTime = &metav1.Time{Time: f.now.Add(-3 * time.Hour)}
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(f.now.Add(-2 * time.Hour))},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}
	}
	for _, m := range mods {
		m(p)
	}
	f.snap.Pods = append(f.snap.Pods, p)
	return p
}

func (f *fixture) pdb(name string, allowed int32, selector map[string]string, mods ...func(*policyv1.PodDisruptionBudget)) {
	one := intstr.FromInt(1)
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: selector}, MaxUnavailable: &one},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
	for _, m := range mods {
		m(p)
	}
	f.snap.PDBs = append(f.snap.PDBs, p)
}

func (f *fixture) input() *Input {
	classes := map[string]*scheduling.NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: f.types}}
	for name, c := range f.extraClasses {
		classes[name] = c
	}
	return &Input{
		Cluster:    f.snap,
		Simulation: planning.SimulationInput(f.snap, nil, classes),
		Classes:    classes,
		Instances:  f.facts,
		Now:        f.now,
		Options:    f.opts,
	}
}

// record puts a command record on claims (as a previous tick would).
func (f *fixture) record(r *Record) {
	for _, name := range r.Candidates {
		nc := f.claim(name)
		nc.Annotations[CommandAnnotation] = r.Encode()
	}
}

func allowSpot(np *karpv1.NodePool) {
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeOnDemand, wellknown.CapacityTypeSpot}},
	}
}

func names(cs []*Candidate) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name())
	}
	return strings.Join(out, ",")
}

func mustCommand(t *testing.T, p *Plan, m Method) *Command {
	t.Helper()
	if p.Command == nil {
		t.Fatalf("no command; unconsolidatable=%v blocked=%v", p.Unconsolidatable, p.Blocked)
	}
	if p.Command.Method != m {
		t.Fatalf("command %s, want method %s", p.Command, m)
	}
	return p.Command
}

func resourceMust(s string) resource.Quantity { return resource.MustParse(s) }
