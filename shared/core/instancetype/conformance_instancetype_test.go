package instancetype

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/core/zonalshift"
)

// Karpenter v1.14.1's instance type provider suite
// (aws/karpenter-provider-aws pkg/providers/instancetype/suite_test.go),
// the cases that provision pods or list a class's instance types, ported
// through Build, WithReservations and scheduling.Solve: a pod "scheduled"
// is one Solve places on a new NodeClaim, and the node it lands on is the
// claim's first offering in launch order (what CreateFleet is asked for
// first). The arithmetic cases (NewInstanceType) are in shared/core/catalog.
const itSuite, itFile = "aws/providers/instancetype", "pkg/providers/instancetype/suite_test.go"

func itCase(spec string) conformance.Case {
	return conformance.Case{Suite: itSuite, File: itFile, Spec: "InstanceTypeProvider > " + spec}
}

// fakeTypeNames are the types of Karpenter's fake DescribeInstanceTypes.
// The catalog has them all but dl1.24xlarge, which EC2 no longer lists:
// it is made from the fake's facts (dl1Facts).
var fakeTypeNames = []string{
	"c6g.large", "g4ad.16xlarge", "g4dn.8xlarge", "g5.12xlarge", "inf2.24xlarge", "inf2.xlarge",
	"m5.large", "m5.metal", "m5.xlarge", "m6idn.32xlarge", "m7i-flex.large", "t3.large",
	"t4g.medium", "t4g.small", "t4g.xlarge", "trn1.2xlarge",
}

// dl1Facts is the fake's dl1.24xlarge: 8 Gaudi HL-205 (EC2 lists them as
// GPUs of manufacturer Habana), 4 EFA interfaces, 4000 GB of NVMe.
func dl1Facts() catalog.Facts {
	return catalog.Facts{
		Name: "dl1.24xlarge", VCPU: 96, MemoryMiB: 786432, Arch: "amd64", Interfaces: 15, MultiCard: true, IPv4PerInterface: 50, EFA: 4,
		Labels: map[string]string{
			wellknown.InstanceFamilyLabel: "dl1", wellknown.InstanceSizeLabel: "24xlarge", wellknown.InstanceCategoryLabel: "dl",
			wellknown.InstanceGenerationLabel: "1", wellknown.InstanceCPULabel: "96", wellknown.InstanceMemoryLabel: "786432",
			wellknown.InstanceHypervisorLabel: "nitro", wellknown.InstanceCPUManufacturerLabel: "intel",
			wellknown.InstanceGPUNameLabel: "gaudi-hl-205", wellknown.InstanceGPUManufacturerLabel: "habana",
			wellknown.InstanceGPUCountLabel: "8", wellknown.InstanceGPUMemoryLabel: "32768", wellknown.InstanceLocalNVMeLabel: "4000",
			wellknown.InstanceCapabilityFlexLabel: "false", wellknown.InstanceEncryptionInTransitSupportedLabel: "true",
		},
	}
}

// fakeCatalog is the fake's instance types with the catalog's facts and
// on-demand prices (dl1.24xlarge at its last published price).
func fakeCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	full, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	var its []*catalog.InstanceType
	for _, name := range fakeTypeNames {
		it, ok := full.Get(name)
		if !ok {
			t.Fatalf("%s is not in the catalog", name)
		}
		its = append(its, it)
	}
	dl1, err := catalog.NewType(dl1Facts(), 13.10904)
	if err != nil {
		t.Fatal(err)
	}
	return catalog.New("us-west-2", append(its, dl1))
}

var fakeZones = []string{"test-zone-1a", "test-zone-1b", "test-zone-1c"}

// marks is the unavailable offerings cache.
type marks map[string]bool

func (m marks) mark(ct, it, zone string) { m[ct+"/"+it+"/"+zone] = true }
func (m marks) unavailable(ct, it, zone string) bool {
	return m[ct+"/"+it+"/"+zone] || m[ct+"/*/*"]
}

// itWorld is the suite's fixture: its nodeClass (AL2023, three zones) and
// nodePool (on-demand only).
type itWorld struct {
	cat    *catalog.Catalog
	nc     *awsv1.EC2NodeClass
	family string
	zones  []string
	prices Prices
	marks  marks
	// subnetsOut are the subnets marked out of addresses.
	subnetsOut map[string]bool
	pool       *karpv1.NodePool
}

func newITWorld(t *testing.T) *itWorld {
	return &itWorld{
		cat: fakeCatalog(t), nc: &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		family: catalog.FamilyAL2023, zones: fakeZones, marks: marks{}, subnetsOut: map[string]bool{},
		pool: &karpv1.NodePool{
			ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{req(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, wellknown.CapacityTypeOnDemand)},
			}}},
		},
	}
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

// types is the provider's List for the world's class.
func (w *itWorld) types(t *testing.T) []*scheduling.InstanceType {
	t.Helper()
	cfg := catalog.NodeConfigFor(w.nc, w.family)
	types, err := Build(w.cat, cfg, w.zones, w.prices, Unavailable(w.nc, w.marks.unavailable, func(id string) bool { return w.subnetsOut[id] }))
	if err != nil {
		t.Fatal(err)
	}
	return WithReservations(types, w.nc, func(string) int { return 1 }, w.marks.unavailable)
}

func (w *itWorld) typeNamed(t *testing.T, name string) *scheduling.InstanceType {
	t.Helper()
	for _, it := range w.types(t) {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("no instance type %s", name)
	return nil
}

// provision is ExpectProvisioned: one provisioning solve of the pods.
func (w *itWorld) provision(t *testing.T, pods ...*corev1.Pod) *scheduling.Results {
	t.Helper()
	return scheduling.Solve(&scheduling.Snapshot{
		Pods: pods, NodePools: []*karpv1.NodePool{w.pool},
		NodeClasses: map[string]*scheduling.NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: w.types(t)}},
	}, scheduling.Provisioning())
}

var podSeq int

type podOpt func(*corev1.Pod)

func pod(opts ...podOpt) *corev1.Pod {
	podSeq++
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", podSeq), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%06d", podSeq))},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func selector(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func requests(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		p.Spec.Containers[0].Resources.Requests = l
	}
}

func preferZone(zone string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: wellknown.ZoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}},
		}}}}
	}
}

// node is the node a claim launches: the labels of its first offering in
// launch order, with the claim's own and the tenancy the launch picks.
type node struct {
	name   string
	labels map[string]string
	it     *scheduling.InstanceType
}

func launched(t *testing.T, c *scheduling.NewNodeClaim, i int) node {
	t.Helper()
	it, o := c.CheapestOffering()
	if it == nil {
		t.Fatalf("claim %d has no offering to launch", i)
	}
	labels := map[string]string{}
	for k, v := range it.Labels {
		labels[k] = v
	}
	for k, v := range c.Labels {
		labels[k] = v
	}
	labels[wellknown.ZoneLabel], labels[wellknown.CapacityTypeLabel] = o.Zone, o.CapacityType
	labels[wellknown.InstanceTenancyLabel] = Tenancy(c.Requirements)
	return node{name: fmt.Sprintf("claim-%d", i), labels: labels, it: it}
}

// expectScheduled is ExpectScheduled: the node the pod lands on.
func expectScheduled(t *testing.T, r *scheduling.Results, p *corev1.Pod) node {
	t.Helper()
	for i, c := range r.NewNodeClaims {
		for _, q := range c.Pods {
			if q == p {
				return launched(t, c, i)
			}
		}
	}
	for _, e := range r.Unschedulable {
		if e.Pod == p {
			t.Fatalf("pod %s not scheduled: %s", p.Name, e.Reason)
		}
	}
	t.Fatalf("pod %s not scheduled", p.Name)
	return node{}
}

func expectNotScheduled(t *testing.T, r *scheduling.Results, p *corev1.Pod) {
	t.Helper()
	for _, c := range r.NewNodeClaims {
		for _, q := range c.Pods {
			if q == p {
				it, _ := c.CheapestOffering()
				t.Fatalf("pod %s scheduled (on %v)", p.Name, it.Name)
			}
		}
	}
}

func wantLabel(t *testing.T, n node, key, value string) {
	t.Helper()
	if n.labels[key] != value {
		t.Errorf("node %s (%s): %s=%q, want %q", n.name, n.it.Name, key, n.labels[key], value)
	}
}

// launchOverrides are the offerings CreateFleet is asked for: the first
// MaxLaunchTypes types of the claim's launch order.
func launchOverrides(c *scheduling.NewNodeClaim) []scheduling.LaunchOffering {
	reqs := scheduling.RequirementsFromNodePool(c.Requirements)
	zones, cts := reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel)
	minValues := false
	for _, r := range c.Requirements {
		minValues = minValues || r.MinValues != nil
	}
	_, offs := scheduling.LaunchOrder(c.InstanceTypes, func(o *scheduling.Offering) bool {
		return o.Available && zones.Has(o.Zone) && cts.Has(o.CapacityType)
	}, minValues, c.RequestedCPUMilli())
	return offs
}

func TestConformanceInstanceTypeProvisioning(t *testing.T) {
	conformance.Run(t, itCase("should not launch AWS Pod ENI on a t3"), func(t *testing.T) {
		w := newITWorld(t)
		p := pod(selector(wellknown.InstanceTypeLabel, "t3.large"), requests(string(wellknown.ResourceAWSPodENI), "1"))
		expectNotScheduled(t, w.provision(t, p), p)
	})
	conformance.Run(t, itCase("should not remove expensive metal instanceTypeOptions if any of the requirement with minValues is provided"), func(t *testing.T) {
		w := newITWorld(t)
		one := 1
		w.pool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeSpot}, MinValues: &one}}
		p := pod(requests("cpu", "1"))
		r := w.provision(t, p)
		expectScheduled(t, r, p)
		metal := false
		for _, o := range launchOverrides(r.NewNodeClaims[0]) {
			metal = metal || strings.Contains(o.Type.Name, "metal")
		}
		if !metal {
			t.Error("no metal type among the launch's overrides")
		}
	})
	for _, tc := range []struct {
		spec    string
		exclude func(name string) bool
	}{
		{"should de-prioritize metal", func(n string) bool { return strings.Contains(n, "metal") }},
		{"should de-prioritize gpu types", func(n string) bool { return strings.HasPrefix(n, "g") }},
	} {
		conformance.Run(t, itCase(tc.spec), func(t *testing.T) {
			w := newITWorld(t)
			p := pod(requests("cpu", "1"))
			r := w.provision(t, p)
			expectScheduled(t, r, p)
			for _, o := range launchOverrides(r.NewNodeClaims[0]) {
				if tc.exclude(o.Type.Name) {
					t.Errorf("%s among the launch's overrides", o.Type.Name)
				}
			}
		})
	}
	conformance.Run(t, itCase("should launch on metal"), func(t *testing.T) {
		w := newITWorld(t)
		w.pool.Spec.Template.Spec.Requirements = append(w.pool.Spec.Template.Spec.Requirements, req(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpExists))
		p := pod(selector(wellknown.InstanceSizeLabel, "metal"), requests("cpu", "1"))
		expectScheduled(t, w.provision(t, p), p)
	})
	conformance.Run(t, itCase("should launch vpc.amazonaws.com/pod-eni on a compatible instance type"), func(t *testing.T) {
		w := newITWorld(t)
		p := pod(requests(string(wellknown.ResourceAWSPodENI), "1"))
		n := expectScheduled(t, w.provision(t, p), p)
		if q := n.it.Capacity[wellknown.ResourceAWSPodENI]; q.Sign() <= 0 {
			t.Errorf("%s is not trunking compatible", n.it.Name)
		}
	})
	conformance.Run(t, itCase("should launch pod in flex instance type"), func(t *testing.T) {
		w := newITWorld(t)
		p := pod(selector(wellknown.InstanceCapabilityFlexLabel, "true"))
		n := expectScheduled(t, w.provision(t, p), p)
		wantLabel(t, n, wellknown.InstanceCapabilityFlexLabel, "true")
		if !strings.Contains(n.it.Name, "flex") {
			t.Errorf("%s is not a flex type", n.it.Name)
		}
	})
	conformance.Run(t, itCase("should not launch pod when flex instances are disallowed"), func(t *testing.T) {
		w := newITWorld(t)
		w.pool.Spec.Template.Spec.Requirements = append(w.pool.Spec.Template.Spec.Requirements, req(wellknown.InstanceCapabilityFlexLabel, corev1.NodeSelectorOpNotIn, "true"))
		p := pod(selector(wellknown.InstanceCapabilityFlexLabel, "true"))
		expectNotScheduled(t, w.provision(t, p), p)
	})
	conformance.Run(t, itCase("should launch pod in non-flex instances"), func(t *testing.T) {
		w := newITWorld(t)
		p := pod(selector(wellknown.InstanceCapabilityFlexLabel, "false"))
		n := expectScheduled(t, w.provision(t, p), p)
		wantLabel(t, n, wellknown.InstanceCapabilityFlexLabel, "false")
		if strings.Contains(n.it.Name, "flex") {
			t.Errorf("%s is a flex type", n.it.Name)
		}
	})
	conformance.Run(t, itCase("should launch vpc.amazonaws.com/PrivateIPv4Address on a compatible instance type"), func(t *testing.T) {
		w := newITWorld(t)
		w.family = catalog.FamilyWindows2022
		p := pod(requests(string(wellknown.ResourcePrivateIPv4), "1"))
		n := expectScheduled(t, w.provision(t, p), p)
		if q := n.it.Capacity[wellknown.ResourcePrivateIPv4]; q.Sign() <= 0 {
			t.Errorf("%s has no private IPv4 addresses for pods", n.it.Name)
		}
	})

	// Accelerators: pods that fit one node share it, others get their own.
	for _, tc := range []struct {
		spec, typ string
		resource  corev1.ResourceName
		counts    []string
		nodes     int
		onlyType  bool // the suite's NodePool allows this type only
	}{
		{"should launch instances for nvidia.com/gpu resource requests", "g5.12xlarge", wellknown.ResourceNVIDIAGPU, []string{"1", "2", "4"}, 2, false},
		{"should launch instances for habana.ai/gaudi resource requests", "dl1.24xlarge", wellknown.ResourceHabanaGaudi, []string{"1", "2", "4"}, 1, false},
		{"should launch instances for aws.amazon.com/neuron resource requests", "inf2.24xlarge", wellknown.ResourceAWSNeuron, []string{"2", "2", "4"}, 2, false},
		{"should launch trn1 instances for aws.amazon.com/neuron resource requests", "trn1.2xlarge", wellknown.ResourceAWSNeuron, []string{"1"}, 1, true},
		{"should launch inf2 instances for aws.amazon.com/neuroncore resource requests", "inf2.xlarge", wellknown.ResourceAWSNeuronCore, []string{"2"}, 1, true},
		{"should launch instances for vpc.amazonaws.com/efa resource requests", "dl1.24xlarge", wellknown.ResourceEFA, []string{"1", "2"}, 1, true},
		{"should launch instances for amd.com/gpu resource requests", "g4ad.16xlarge", wellknown.ResourceAMDGPU, []string{"1", "2", "4"}, 2, false},
	} {
		conformance.Run(t, itCase(tc.spec), func(t *testing.T) {
			w := newITWorld(t)
			if tc.onlyType {
				// The suite replaces the NodePool's requirements (so
				// its capacity type is open too).
				w.pool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpIn, tc.typ)}
			}
			var pods []*corev1.Pod
			for _, n := range tc.counts {
				pods = append(pods, pod(requests(string(tc.resource), n)))
			}
			r := w.provision(t, pods...)
			nodes := map[string]bool{}
			for _, p := range pods {
				n := expectScheduled(t, r, p)
				wantLabel(t, n, wellknown.InstanceTypeLabel, tc.typ)
				nodes[n.name] = true
			}
			if len(nodes) != tc.nodes {
				t.Errorf("%d nodes, want %d", len(nodes), tc.nodes)
			}
		})
	}
	conformance.Run(t, itCase("should not launch instances w/ instance storage for ephemeral storage resource requests when exceeding blockDeviceMapping"), func(t *testing.T) {
		w := newITWorld(t)
		p := pod(requests("ephemeral-storage", "5000Gi"))
		expectNotScheduled(t, w.provision(t, p), p)
	})
	conformance.Run(t, itCase("should launch instances w/ instance storage for ephemeral storage resource requests when disks are mounted for ephemeral-storage"), func(t *testing.T) {
		w := newITWorld(t)
		raid := awsv1.InstanceStorePolicyRAID0
		w.nc.Spec.InstanceStorePolicy = &raid
		p := pod(requests("ephemeral-storage", "5000Gi"))
		n := expectScheduled(t, w.provision(t, p), p)
		wantLabel(t, n, wellknown.InstanceTypeLabel, "m6idn.32xlarge")
		if q := n.it.Capacity[corev1.ResourceEphemeralStorage]; q.Cmp(resource.MustParse("7600G")) != 0 {
			t.Errorf("ephemeral-storage capacity %s, want 7600G", q.String())
		}
	})
	conformance.Run(t, itCase("should launch instances in local zones"), func(t *testing.T) {
		w := newITWorld(t)
		w.zones = []string{"test-zone-1a-local"}
		p := pod(func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: wellknown.ZoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"test-zone-1a-local"}}},
			}}}}}
		})
		expectScheduled(t, w.provision(t, p), p)
	})
}

func TestConformanceInstanceTypeLabels(t *testing.T) {
	common := func(w *itWorld, zone string) map[string]string {
		return map[string]string{
			wellknown.NodePoolLabel: w.pool.Name, wellknown.ZoneLabel: zone, wellknown.OSLabel: "linux", wellknown.ArchLabel: "amd64",
			wellknown.CapacityTypeLabel: "on-demand", wellknown.RegionLabel: "us-west-2",
			wellknown.InstanceTenancyLabel: "default", wellknown.TopologyZoneIDLabel: "tstz1-1a",
			// deprecated labels
			corev1.LabelFailureDomainBetaRegion: "us-west-2",
			corev1.LabelFailureDomainBetaZone:   zone, "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
			wellknown.EBSCSIZoneLabel: zone,
		}
	}
	g4dn := map[string]string{
		wellknown.InstanceTypeLabel: "g4dn.8xlarge", corev1.LabelInstanceType: "g4dn.8xlarge",
		wellknown.InstanceHypervisorLabel: "nitro", wellknown.InstanceEncryptionInTransitSupportedLabel: "true",
		wellknown.InstanceCategoryLabel: "g", wellknown.InstanceCapabilityFlexLabel: "false", wellknown.InstanceGenerationLabel: "4",
		wellknown.InstanceFamilyLabel: "g4dn", wellknown.InstanceSizeLabel: "8xlarge", wellknown.InstanceCPULabel: "32",
		wellknown.InstanceCPUManufacturerLabel: "intel", wellknown.InstanceCPUSustainedClockSpeedMhzLabel: "2500",
		wellknown.InstanceMemoryLabel: "131072", wellknown.InstanceEBSBandwidthLabel: "9500", wellknown.InstanceNetworkBandwidthLabel: "50000",
		wellknown.InstanceGPUNameLabel: "t4", wellknown.InstanceGPUManufacturerLabel: "nvidia", wellknown.InstanceGPUCountLabel: "1",
		wellknown.InstanceGPUMemoryLabel: "16384", wellknown.InstanceLocalNVMeLabel: "900",
	}
	inf2 := map[string]string{
		wellknown.InstanceTypeLabel: "inf2.xlarge", corev1.LabelInstanceType: "inf2.xlarge",
		wellknown.InstanceHypervisorLabel: "nitro", wellknown.InstanceEncryptionInTransitSupportedLabel: "true",
		wellknown.InstanceCategoryLabel: "inf", wellknown.InstanceCapabilityFlexLabel: "false", wellknown.InstanceGenerationLabel: "2",
		wellknown.InstanceFamilyLabel: "inf2", wellknown.InstanceSizeLabel: "xlarge", wellknown.InstanceCPULabel: "4",
		wellknown.InstanceCPUSustainedClockSpeedMhzLabel: "3600", wellknown.InstanceCPUManufacturerLabel: "amd",
		wellknown.InstanceMemoryLabel: "16384", wellknown.InstanceEBSBandwidthLabel: "10000", wellknown.InstanceNetworkBandwidthLabel: "2083",
		wellknown.InstanceAcceleratorNameLabel: "inferentia2", wellknown.InstanceAcceleratorManufacturerLabel: "aws", wellknown.InstanceAcceleratorCountLabel: "1",
	}
	merge := func(ms ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	conformance.Run(t, itCase("should support individual instance type labels"), func(t *testing.T) {
		w := newITWorld(t)
		sel := merge(common(w, "test-zone-1a"), g4dn, map[string]string{
			// The suite's g4dn.8xlarge also carries inferentia2 labels
			// (its TODO: a fake-data slip); inf2 carries them here.
			wellknown.InstanceAcceleratorNameLabel: "inferentia2", wellknown.InstanceAcceleratorManufacturerLabel: "aws", wellknown.InstanceAcceleratorCountLabel: "1",
		})
		var pods []*corev1.Pod
		for k, v := range sel {
			pods = append(pods, pod(selector(k, v)))
		}
		r := w.provision(t, pods...)
		for _, p := range pods {
			expectScheduled(t, r, p)
		}
		// The windows-build label, on the suite's Windows NodePool.
		win := newITWorld(t)
		win.family = catalog.FamilyWindows2022
		p := pod(selector(wellknown.WindowsBuildLabel, catalog.WindowsBuild(catalog.FamilyWindows2022)))
		expectScheduled(t, win.provision(t, p), p)
	})
	conformance.Run(t, itCase("should support combined instance type labels"), func(t *testing.T) {
		w := newITWorld(t)
		p := pod(selector(flatten(merge(common(w, "test-zone-1a"), g4dn))...))
		n := expectScheduled(t, w.provision(t, p), p)
		wantLabel(t, n, wellknown.InstanceTypeLabel, "g4dn.8xlarge")
	})
	conformance.Run(t, itCase("should support instance type labels with accelerator"), func(t *testing.T) {
		w := newITWorld(t)
		p := pod(selector(flatten(merge(common(w, "test-zone-1a"), inf2))...))
		n := expectScheduled(t, w.provision(t, p), p)
		wantLabel(t, n, wellknown.InstanceTypeLabel, "inf2.xlarge")
	})
}

func flatten(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k, v)
	}
	return out
}

func TestConformanceInstanceTypeOfferings(t *testing.T) {
	const od, spot = wellknown.CapacityTypeOnDemand, wellknown.CapacityTypeSpot
	neuron := func(n string) podOpt { return requests(string(wellknown.ResourceAWSNeuron), n) }

	// Insufficient Capacity Error Cache: the first solve picks the
	// offering the launch then finds out of capacity (marked), the
	// second solve works around the mark.
	conformance.Run(t, itCase("Insufficient Capacity Error Cache > should launch instances of different type on second reconciliation attempt with Insufficient Capacity Error Cache fallback"), func(t *testing.T) {
		w := newITWorld(t)
		pods := []*corev1.Pod{pod(selector(wellknown.ZoneLabel, "test-zone-1a"), neuron("1")), pod(selector(wellknown.ZoneLabel, "test-zone-1a"), neuron("1"))}
		// Karpenter's first attempt packs both onto one inf2.24xlarge
		// ($6.49/h) and is refused; Karpless's scheduler already opens
		// two inf2.xlarge ($0.76/h each) for them, the outcome Karpenter
		// reaches on its second attempt, which is what is checked.
		w.marks.mark(od, "inf2.24xlarge", "test-zone-1a")
		r := w.provision(t, pods...)
		nodes := map[string]bool{}
		for _, p := range pods {
			n := expectScheduled(t, r, p)
			wantLabel(t, n, wellknown.InstanceAcceleratorNameLabel, "inferentia2")
			nodes[n.name] = true
		}
		if len(nodes) != 2 {
			t.Errorf("%d nodes, want 2", len(nodes))
		}
	})
	for _, tc := range []struct{ spec, typ string }{
		{"should launch instances in a different zone on second reconciliation attempt with Insufficient Capacity Error Cache fallback", "g5.12xlarge"},
		{"should launch instances in a different zone on second reconciliation attempt with Insufficient Capacity Error Cache fallback (Habana)", "dl1.24xlarge"},
	} {
		conformance.Run(t, itCase("Insufficient Capacity Error Cache > "+tc.spec), func(t *testing.T) {
			w := newITWorld(t)
			res := wellknown.ResourceNVIDIAGPU
			if tc.typ == "dl1.24xlarge" {
				res = wellknown.ResourceHabanaGaudi
				// The fake offers dl1.24xlarge in 1a and 1b only.
				w.prices.Offered = func(it, zone string) bool { return it != "dl1.24xlarge" || zone != "test-zone-1c" }
			}
			p := pod(selector(wellknown.InstanceTypeLabel, tc.typ), requests(string(res), "1"), preferZone("test-zone-1a"))
			wantLabel(t, expectScheduled(t, w.provision(t, p), p), wellknown.ZoneLabel, "test-zone-1a")
			w.marks.mark(od, tc.typ, "test-zone-1a")
			n := expectScheduled(t, w.provision(t, p), p)
			wantLabel(t, n, wellknown.InstanceTypeLabel, tc.typ)
			wantLabel(t, n, wellknown.ZoneLabel, "test-zone-1b")
		})
	}
	conformance.Run(t, itCase("Insufficient Capacity Error Cache > should launch smaller instances than optimal if larger instance launch results in Insufficient Capacity Error"), func(t *testing.T) {
		w := newITWorld(t)
		w.marks.mark(od, "m5.xlarge", "test-zone-1a")
		w.pool.Spec.Template.Spec.Requirements = append(w.pool.Spec.Template.Spec.Requirements, req(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpIn, "m5.large", "m5.xlarge"))
		pods := []*corev1.Pod{pod(requests("cpu", "1"), selector(wellknown.ZoneLabel, "test-zone-1a")), pod(requests("cpu", "1"), selector(wellknown.ZoneLabel, "test-zone-1a"))}
		r := w.provision(t, pods...)
		for _, p := range pods {
			wantLabel(t, expectScheduled(t, r, p), wellknown.InstanceTypeLabel, "m5.large")
		}
	})
	conformance.Run(t, itCase("Insufficient Capacity Error Cache > should launch instances on later reconciliation attempt with Insufficient Capacity Error Cache expiry"), func(t *testing.T) {
		w := newITWorld(t)
		w.prices.Offered = func(it, zone string) bool { return it != "inf2.24xlarge" || zone == "test-zone-1a" }
		w.marks.mark(od, "inf2.24xlarge", "test-zone-1a")
		p := pod(selector(wellknown.InstanceTypeLabel, "inf2.24xlarge"), neuron("2"))
		expectNotScheduled(t, w.provision(t, p), p)
		w.marks = marks{} // the mark expired
		wantLabel(t, expectScheduled(t, w.provision(t, p), p), wellknown.InstanceTypeLabel, "inf2.24xlarge")
	})
	conformance.Run(t, itCase("Insufficient Capacity Error Cache > should launch on-demand capacity if flexible to both spot and on-demand, but spot is unavailable"), func(t *testing.T) {
		w := newITWorld(t)
		for _, name := range fakeTypeNames {
			w.marks.mark(spot, name, "test-zone-1a")
		}
		w.marks.mark(spot, "dl1.24xlarge", "test-zone-1a")
		w.pool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			req(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, spot, od), req(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "test-zone-1a"),
		}
		p := pod()
		wantLabel(t, expectScheduled(t, w.provision(t, p), p), wellknown.CapacityTypeLabel, od)
	})
	conformance.Run(t, itCase("Insufficient Capacity Error Cache > should return all instance types, even though with no offerings due to Insufficient Capacity Error"), func(t *testing.T) {
		w := newITWorld(t)
		for _, ct := range []string{od, spot} {
			for _, z := range fakeZones {
				w.marks.mark(ct, "m5.xlarge", z)
			}
		}
		for _, o := range w.typeNamed(t, "m5.xlarge").Offerings {
			if o.Available {
				t.Errorf("m5.xlarge %s in %s is available", o.CapacityType, o.Zone)
			}
		}
	})
	available := func(it *scheduling.InstanceType) []scheduling.Offering {
		var out []scheduling.Offering
		for _, o := range it.Offerings {
			if o.Available {
				out = append(out, o)
			}
		}
		return out
	}
	conformance.Run(t, itCase("Insufficient Capacity Error Cache > should not return an offering when marking an offering as unavailable in the Insufficient Capacity Error Cache"), func(t *testing.T) {
		w := newITWorld(t)
		if n := len(available(w.typeNamed(t, "m5.large"))); n != 6 {
			t.Fatalf("%d available offerings, want 6", n)
		}
		w.marks.mark(spot, "m5.xlarge", "test-zone-1a")
		w.marks.mark(spot, "m5.xlarge", "test-zone-1b")
		if n := len(available(w.typeNamed(t, "m5.large"))); n != 6 {
			t.Fatalf("%d available offerings, want 6", n)
		}
		w.marks.mark(spot, "m5.large", "test-zone-1a")
		if n := len(available(w.typeNamed(t, "m5.large"))); n != 5 {
			t.Fatalf("%d available offerings, want 5", n)
		}
		w.marks.mark(od, "m5.large", "test-zone-1b")
		w.marks.mark(od, "m5.large", "test-zone-1c")
		offs := available(w.typeNamed(t, "m5.large"))
		if len(offs) != 3 {
			t.Fatalf("%d available offerings, want 3", len(offs))
		}
		for _, o := range offs {
			if (o.CapacityType == spot && o.Zone == "test-zone-1a") || (o.CapacityType == od && o.Zone != "test-zone-1a") {
				t.Errorf("%s in %s is available", o.CapacityType, o.Zone)
			}
		}
	})
	conformance.Run(t, itCase("Insufficient Capacity Error Cache > should not return a capacity type when marking a capacity type as unavailable in the Insufficient Capacity Error Cache"), func(t *testing.T) {
		w := newITWorld(t)
		cts := func() map[string]bool {
			m := map[string]bool{}
			for _, it := range w.types(t) {
				for _, o := range available(it) {
					m[o.CapacityType] = true
				}
			}
			return m
		}
		if got := cts(); len(got) != 2 || !got[od] || !got[spot] {
			t.Fatalf("capacity types %v, want on-demand and spot", got)
		}
		w.marks[spot+"/*/*"] = true // unavailable.Cache.MarkCapacityType
		if got := cts(); len(got) != 1 || !got[od] {
			t.Fatalf("capacity types %v, want on-demand only", got)
		}
	})
	conformance.Run(t, itCase("Insufficient Capacity Error Cache > should not return a zone when marking a zone as unavailable in the Insufficient Capacity Error Cache"), func(t *testing.T) {
		w := newITWorld(t)
		// The suite's class resolves one subnet per zone.
		w.nc.Status.Subnets = []awsv1.Subnet{{ID: "subnet-test1", Zone: "test-zone-1a"}, {ID: "subnet-test2", Zone: "test-zone-1b"}, {ID: "subnet-test3", Zone: "test-zone-1c"}}
		zones := func() map[string]bool {
			m := map[string]bool{}
			for _, it := range w.types(t) {
				for _, o := range available(it) {
					m[o.Zone] = true
				}
			}
			return m
		}
		if got := zones(); len(got) != 3 || !got["test-zone-1a"] || !got["test-zone-1b"] || !got["test-zone-1c"] {
			t.Fatalf("zones %v, want test-zone-1a, 1b and 1c", got)
		}
		// unavailable.Cache.MarkSubnet, as a launch that met
		// InsufficientFreeAddressesInSubnet marks each subnet of the zone.
		for _, s := range w.nc.Status.Subnets {
			if s.Zone == "test-zone-1a" {
				w.subnetsOut[s.ID] = true
			}
		}
		if got := zones(); len(got) != 2 || !got["test-zone-1b"] || !got["test-zone-1c"] {
			t.Fatalf("zones %v, want test-zone-1b and 1c", got)
		}
	})

	conformance.Run(t, itCase("CapacityType > should default to on-demand"), func(t *testing.T) {
		w := newITWorld(t)
		p := pod()
		wantLabel(t, expectScheduled(t, w.provision(t, p), p), wellknown.CapacityTypeLabel, od)
	})
	conformance.Run(t, itCase("CapacityType > should launch spot capacity if flexible to both spot and on demand"), func(t *testing.T) {
		w := newITWorld(t)
		w.pool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, spot, od)}
		p := pod()
		wantLabel(t, expectScheduled(t, w.provision(t, p), p), wellknown.CapacityTypeLabel, spot)
	})
	spotQuote := Prices{Spot: map[string]map[string]float64{"m5.large": {"test-zone-1a": 0.004}}}
	conformance.Run(t, itCase("CapacityType > should fail to launch capacity when there is no zonal availability for spot"), func(t *testing.T) {
		w := newITWorld(t)
		w.prices = spotQuote
		w.pool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			req(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, spot), req(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpIn, "m5.large"),
			req(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "test-zone-1b"),
		}
		p := pod()
		expectNotScheduled(t, w.provision(t, p), p)
	})
	conformance.Run(t, itCase("CapacityType > should succeed to launch spot instance when zonal availability exists"), func(t *testing.T) {
		w := newITWorld(t)
		w.prices = spotQuote
		w.pool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			req(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, spot), req(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpIn, "m5.large"),
		}
		p := pod()
		wantLabel(t, expectScheduled(t, w.provision(t, p), p), wellknown.NodePoolLabel, w.pool.Name)
	})
	conformance.Run(t, itCase("Offerings > should create a single offering per instance pool"), func(t *testing.T) {
		w := newITWorld(t)
		seen := map[string]bool{}
		for _, it := range w.types(t) {
			for _, o := range it.Offerings {
				k := it.Name + "/" + o.Zone + "/" + o.CapacityType + "/" + o.ReservationID
				if seen[k] {
					t.Errorf("two offerings for %s", k)
				}
				seen[k] = true
			}
		}
	})

	const tenancy = wellknown.InstanceTenancyLabel
	conformance.Run(t, itCase("Tenancy > Should use default tenancy when no requirement is given for tenancy"), func(t *testing.T) {
		w := newITWorld(t)
		p := pod()
		wantLabel(t, expectScheduled(t, w.provision(t, p), p), tenancy, "default")
	})
	conformance.Run(t, itCase("Tenancy > Should use default tenancy if tenancy requirement specifies both default and dedicated tenancies"), func(t *testing.T) {
		w := newITWorld(t)
		w.pool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req(tenancy, corev1.NodeSelectorOpIn, "default", "dedicated")}
		p := pod()
		wantLabel(t, expectScheduled(t, w.provision(t, p), p), tenancy, "default")
	})
	conformance.Run(t, itCase("Tenancy > Should launch with default tenancy when required"), func(t *testing.T) {
		w := newITWorld(t)
		p := pod(selector(tenancy, "default"))
		wantLabel(t, expectScheduled(t, w.provision(t, p), p), tenancy, "default")
	})
	conformance.Run(t, itCase("Tenancy > Should launch with dedicated tenancy when required"), func(t *testing.T) {
		w := newITWorld(t)
		p := pod(selector(tenancy, "dedicated"))
		wantLabel(t, expectScheduled(t, w.provision(t, p), p), tenancy, "dedicated")
	})
	for _, tc := range []struct{ entry, np, pod string }{{"dedicated np", "dedicated", "default"}, {"default np", "default", "dedicated"}} {
		conformance.Run(t, itCase("Tenancy > does not allow tenancy violations > "+tc.entry), func(t *testing.T) {
			w := newITWorld(t)
			w.pool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req(tenancy, corev1.NodeSelectorOpIn, tc.np)}
			p := pod(selector(tenancy, tc.pod))
			expectNotScheduled(t, w.provision(t, p), p)
		})
	}

	for _, tc := range []struct {
		entry, state string
	}{{"when the capacity block is active", "active"}, {"when the capacity block is expiring", "expiring"}} {
		conformance.Run(t, itCase("Capacity Blocks > should create an offering for a capacity block > "+tc.entry), func(t *testing.T) {
			w := newITWorld(t)
			w.nc.Status.Subnets = []awsv1.Subnet{{ID: "subnet-test1", Zone: "test-zone-1a"}, {ID: "subnet-test2", Zone: "test-zone-1b"}, {ID: "subnet-test3", Zone: "test-zone-1c"}}
			w.nc.Status.CapacityReservations = []awsv1.CapacityReservation{{
				AvailabilityZone: "test-zone-1a", ID: "cr-123", InstanceType: "c6g.large", ReservationType: "capacity-block", State: tc.state,
			}}
			var reserved []scheduling.Offering
			for _, o := range w.typeNamed(t, "c6g.large").Offerings {
				if o.CapacityType == wellknown.CapacityTypeReserved {
					reserved = append(reserved, o)
				}
			}
			if len(reserved) != 1 {
				t.Fatalf("%d reserved offerings, want 1", len(reserved))
			}
			o := reserved[0]
			if o.Zone != "test-zone-1a" || o.ReservationType != "capacity-block" || o.ReservationID != "cr-123" || o.ReservationCapacity != 1 {
				t.Errorf("offering %+v", o)
			}
			if o.Available != (tc.state != "expiring") {
				t.Errorf("available = %v in state %s", o.Available, tc.state)
			}
		})
	}
}

func TestConformanceInstanceTypeCompatibility(t *testing.T) {
	const compat = "Instance Type and NodeClass Compatibility > "
	a1 := func(t *testing.T) *itWorld {
		w := newITWorld(t)
		full, _ := catalog.Load()
		it, _ := full.Get("a1.medium")
		w.cat = catalog.New("us-west-2", []*catalog.InstanceType{it})
		w.prices.Offered = func(_, zone string) bool { return zone != "test-zone-1c" }
		return w
	}
	for _, tc := range []struct {
		entry, family string
		available     bool
	}{{"when AMI is AL2023", catalog.FamilyAL2023, false}, {"when AMI is BottleRocket", catalog.FamilyBottlerocket, true}} {
		conformance.Run(t, itCase(compat+"AMI Compatibility > should mark availability of a1 instance type offerings based on AMI > "+tc.entry), func(t *testing.T) {
			w := a1(t)
			w.family = tc.family
			it := w.typeNamed(t, "a1.medium")
			if len(it.Offerings) == 0 {
				t.Fatal("a1.medium has no offerings")
			}
			for _, o := range it.Offerings {
				if o.Available != tc.available {
					t.Errorf("a1.medium %s in %s: available %v, want %v", o.CapacityType, o.Zone, o.Available, tc.available)
				}
			}
		})
	}
	efaOnly := func(cards ...int32) []*awsv1.NetworkInterface {
		out := []*awsv1.NetworkInterface{{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface}}
		for _, c := range cards {
			out = append(out, &awsv1.NetworkInterface{NetworkCardIndex: c, DeviceIndex: map[bool]int32{true: 1, false: 0}[c == 0], InterfaceType: awsv1.InterfaceTypeEFAOnly})
		}
		return out
	}
	countAvailable := func(it *scheduling.InstanceType) int {
		n := 0
		for _, o := range it.Offerings {
			if o.Available {
				n++
			}
		}
		return n
	}
	conformance.Run(t, itCase(compat+"Network Interfaces > should mark instance type offering as available when it supports network interface configuration"), func(t *testing.T) {
		w := newITWorld(t)
		before := countAvailable(w.typeNamed(t, "dl1.24xlarge"))
		w.nc.Spec.NetworkInterfaces = efaOnly(0)
		if after := countAvailable(w.typeNamed(t, "dl1.24xlarge")); after != before || after == 0 {
			t.Errorf("%d available offerings, %d before the interfaces", after, before)
		}
	})
	conformance.Run(t, itCase(compat+"Network Interfaces > should mark instance type offering as unavailable when it does not support network interface configuration"), func(t *testing.T) {
		w := newITWorld(t)
		w.nc.Spec.NetworkInterfaces = efaOnly(0, 1, 2, 3, 4) // dl1.24xlarge supports 4 EFAs
		if n := countAvailable(w.typeNamed(t, "dl1.24xlarge")); n != 0 {
			t.Errorf("%d available offerings, want none", n)
		}
	})
}

// TestConformanceInstanceTypeZonalShift ports the zonal shift case: the
// offerings of a zone ARC shifts the cluster away from are unavailable
// (zonalshift.Zones.Unavailable, which the launch path's Cloud applies).
func TestConformanceInstanceTypeZonalShift(t *testing.T) {
	conformance.Run(t, itCase("should mark offerings as unavailable for zones shifted away from"), func(t *testing.T) {
		w := newITWorld(t)
		for i, z := range fakeZones {
			w.nc.Status.Subnets = append(w.nc.Status.Subnets, awsv1.Subnet{ID: fmt.Sprintf("subnet-test%d", i+1), Zone: z, ZoneID: "tstz1-" + strings.TrimPrefix(z, "test-zone-")})
		}
		available := func(shifted zonalshift.Zones) []scheduling.Offering {
			t.Helper()
			cfg := catalog.NodeConfigFor(w.nc, w.family)
			types, err := Build(w.cat, cfg, w.zones, w.prices, shifted.Unavailable(w.nc, Unavailable(w.nc, w.marks.unavailable, nil)))
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range WithReservations(types, w.nc, func(string) int { return 1 }, shifted.Unavailable(w.nc, w.marks.unavailable)) {
				if it.Name != "m5.large" {
					continue
				}
				var out []scheduling.Offering
				for _, o := range it.Offerings {
					if o.Available {
						out = append(out, o)
					}
				}
				return out
			}
			t.Fatal("no m5.large")
			return nil
		}
		if got := available(nil); len(got) != 6 { // 3 zones x 2 capacity types
			t.Fatalf("before the shift: %d available offerings, want 6", len(got))
		}
		got := available(zonalshift.Zones{"tstz1-1a": true})
		if len(got) != 4 {
			t.Errorf("during the shift: %d available offerings, want 4", len(got))
		}
		for _, o := range got {
			if o.Zone == "test-zone-1a" {
				t.Errorf("offering %s/%s available in the shifted zone", o.CapacityType, o.Zone)
			}
		}
		if got := available(zonalshift.Zones{}); len(got) != 6 {
			t.Errorf("after the shift: %d available offerings, want 6", len(got))
		}
	})
}
