package scheduling

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1's volume cases: pkg/controllers/provisioning/suite_test.go
// "Volume Topology Requirements" and pkg/controllers/provisioning/scheduling/suite_test.go
// "VolumeUsage", ported whole. Storage objects are as Karpenter's test
// helpers make them (a claim that names its volume carries
// pv.kubernetes.io/bind-completed; a volume is a CSI one of test.driver);
// a node Karpenter provisioned in an earlier step is an existing Node here,
// with its pods and its CSINode.
const provisioningSuiteFile = "pkg/controllers/provisioning/suite_test.go"

const fakeCSIProvider = "fake.csi.provider"

func strPtr(s string) *string { return &s }

var (
	waitForConsumer = storagev1.VolumeBindingWaitForFirstConsumer
	immediateMode   = storagev1.VolumeBindingImmediate
)

// fakeSC is test.StorageClass: provisioner test-provisioner unless given,
// allowed topologies of one zone term when zones are given.
func fakeSC(name, provisioner string, mode *storagev1.VolumeBindingMode, zones ...string) *storagev1.StorageClass {
	if provisioner == "" {
		provisioner = "test-provisioner"
	}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: mode}
	if len(zones) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: wellknown.ZoneLabel, Values: zones}}}}
	}
	return sc
}

// defaultSC marks a class the cluster default, created at t.
func defaultSC(sc *storagev1.StorageClass, t time.Time) *storagev1.StorageClass {
	sc.Annotations = map[string]string{defaultClassAnnotation: "true"}
	sc.CreationTimestamp = metav1.NewTime(t)
	return sc
}

// fakePV is test.PersistentVolume: a CSI volume of test.driver (or the
// driver given), in one term of the zones given.
func fakePV(name, driver string, zones ...string) *corev1.PersistentVolume {
	if driver == "" {
		driver = "test.driver"
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "test-handle"}},
	}}
	if len(zones) > 0 {
		pv.Spec.NodeAffinity = pvAffinity([]corev1.NodeSelectorRequirement{expr(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, zones...)})
	}
	return pv
}

func pvAffinity(terms ...[]corev1.NodeSelectorRequirement) *corev1.VolumeNodeAffinity {
	ns := &corev1.NodeSelector{}
	for _, t := range terms {
		ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
	}
	return &corev1.VolumeNodeAffinity{Required: ns}
}

// fakePVC is test.PersistentVolumeClaim in the default namespace: a claim
// that names its volume is marked bound.
func fakePVC(name string, class *string, volume string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class, VolumeName: volume}}
	if volume != "" {
		c.Annotations = map[string]string{bindCompletedAnnotation: "yes"}
	}
	return c
}

// withClaims mounts persistent volume claims.
func withClaims(names ...string) podOpt {
	return func(p *corev1.Pod) {
		for i, n := range names {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("vol-%d", i), VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: n}}})
		}
	}
}

// withEphemeral adds an ephemeral volume "tmp-ephemeral" of the class
// given (nil: none named); its claim is <pod>-tmp-ephemeral.
func withEphemeral(class *string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "tmp-ephemeral", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class}},
		}}})
	}
}

func ephemeralClaim(p *corev1.Pod) string { return p.Name + "-tmp-ephemeral" }

// provisioned turns the claim that took pod p into the node Karpenter's
// ExpectProvisioned registers (initialized, in the zone given: the fake
// launches in the first offering's zone), with p bound to it.
func provisioned(t *testing.T, r *Results, p *corev1.Pod, name, zone string) *Node {
	t.Helper()
	c := claimOf(r, p)
	if c == nil {
		t.Fatalf("pod %s not on a new claim: %s", p.Name, reasonOf(r, p))
	}
	it, _ := c.CheapestOffering()
	labels := launchedLabels(c)
	labels[wellknown.ZoneLabel] = zone
	labels[wellknown.HostnameLabel] = name
	labels[wellknown.InitializedLabel] = "true"
	bound := p.DeepCopy()
	bound.Spec.NodeName = name
	return &Node{Name: name, NodeClaim: name, NodePool: c.NodePool, Labels: labels, Allocatable: it.Allocatable.DeepCopy(), Capacity: it.Capacity.DeepCopy(), Pods: []*corev1.Pod{bound}}
}

func csiNode(name string, limits map[string]int32) *storagev1.CSINode {
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for d, n := range limits {
		cn.Spec.Drivers = append(cn.Spec.Drivers, storagev1.CSINodeDriver{Name: d, NodeID: "fake-node-id", Allocatable: &storagev1.VolumeNodeResources{Count: &n}})
	}
	return cn
}

// newClaims counts the NodeClaims a solve creates.
func newClaims(r *Results) int { return len(r.NewNodeClaims) }

func TestConformanceVolumeTopologyRequirements(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/provisioning", File: provisioningSuiteFile, Spec: "Provisioning > Volume Topology Requirements > " + spec}
	}
	in := corev1.NodeSelectorOpIn
	pool := func() []*karpv1.NodePool { return []*karpv1.NodePool{mkPool("default")} }
	// The Context's StorageClass: zones 2 and 3, WaitForFirstConsumer.
	sc := func() *storagev1.StorageClass { return fakeSC("test-sc", "", &waitForConsumer, fakeZone2, fakeZone3) }
	run := func(t *testing.T, s *Snapshot, want func(*testing.T, *Results)) {
		t.Helper()
		want(t, solve(t, s))
	}
	sched := func(p *corev1.Pod, zone string) func(*testing.T, *Results) {
		return func(t *testing.T, r *Results) {
			t.Helper()
			_, labels := expectScheduled(t, nil, r, p)
			if zone != "" {
				expectLabel(t, labels, wellknown.ZoneLabel, zone)
			}
		}
	}
	pending := func(p *corev1.Pod) func(*testing.T, *Results) {
		return func(t *testing.T, r *Results) { t.Helper(); expectNotScheduled(t, r, p) }
	}

	conformance.Run(t, c("should not schedule if invalid pvc"), func(t *testing.T) {
		p := fakePod(withClaims("invalid"))
		run(t, fakeSnapshot(nil, pool(), p), pending(p))
	})
	boundTo := func(class string) (*Snapshot, *corev1.Pod) {
		pvc := fakePVC("claim", strPtr(class), "test-volume")
		p := fakePod(withClaims("claim"))
		s := fakeSnapshot(nil, pool(), p)
		s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{pvc}
		s.PersistentVolumes = []*corev1.PersistentVolume{fakePV("test-volume", "")}
		return s, p
	}
	unbound := func(class string) (*Snapshot, *corev1.Pod) {
		p := fakePod(withClaims("claim"))
		s := fakeSnapshot(nil, pool(), p)
		s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{fakePVC("claim", strPtr(class), "")}
		return s, p
	}
	conformance.Run(t, c("should schedule with an empty storage class if the pvc is bound"), func(t *testing.T) {
		s, p := boundTo("")
		run(t, s, sched(p, ""))
	})
	conformance.Run(t, c("should not schedule with an empty storage class if the pvc is not bound"), func(t *testing.T) {
		s, p := unbound("")
		run(t, s, pending(p))
	})
	conformance.Run(t, c("should schedule with a missing storage class if the pvc is bound"), func(t *testing.T) {
		s, p := boundTo("missing-storage-class")
		run(t, s, sched(p, ""))
	})
	conformance.Run(t, c("should not schedule with a missing storage class if the pvc is not bound"), func(t *testing.T) {
		s, p := unbound("missing-storage-class")
		run(t, s, pending(p))
	})
	// Karpenter provisions the invalid pod, then the valid one; one solve
	// of both here must do the same for each.
	invalidThenValid := func(t *testing.T, invalid *corev1.Pod, claims ...*corev1.PersistentVolumeClaim) {
		valid := fakePod()
		s := fakeSnapshot(nil, pool(), invalid, valid)
		s.PersistentVolumeClaims = claims
		r := solve(t, s)
		expectNotScheduled(t, r, invalid)
		expectScheduled(t, s, r, valid)
	}
	conformance.Run(t, c("should schedule valid pods when a pod with an invalid pvc is encountered (pvc)"), func(t *testing.T) {
		invalidThenValid(t, fakePod(withClaims("invalid")))
	})
	conformance.Run(t, c("should schedule valid pods when a pod with an invalid pvc is encountered (storage class)"), func(t *testing.T) {
		invalidThenValid(t, fakePod(withClaims("claim")), fakePVC("claim", strPtr("invalid-storage-class"), ""))
	})
	conformance.Run(t, c("should schedule valid pods when a pod with an invalid pvc is encountered (volume name)"), func(t *testing.T) {
		invalidThenValid(t, fakePod(withClaims("claim")), fakePVC("claim", nil, "invalid-volume-name"))
	})
	zone13 := nodeRequirements(expr(wellknown.ZoneLabel, in, fakeZone1, fakeZone3))
	zone1 := nodeRequirements(expr(wellknown.ZoneLabel, in, fakeZone1))
	// classPod is a pod with a claim of the Context's class, persistent or
	// ephemeral, bound to volume when one is given.
	classPod := func(ephemeral bool, volume *corev1.PersistentVolume, opts ...podOpt) (*Snapshot, *corev1.Pod) {
		class := sc()
		var p *corev1.Pod
		var pvc *corev1.PersistentVolumeClaim
		volName := ""
		if volume != nil {
			volName = volume.Name
		}
		if ephemeral {
			p = fakePod(append(opts, withEphemeral(&class.Name))...)
			pvc = fakePVC(ephemeralClaim(p), &class.Name, volName)
		} else {
			p = fakePod(append(opts, withClaims("claim"))...)
			pvc = fakePVC("claim", &class.Name, volName)
		}
		s := fakeSnapshot(nil, pool(), p)
		s.StorageClasses = []*storagev1.StorageClass{class}
		s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{pvc}
		if volume != nil {
			s.PersistentVolumes = []*corev1.PersistentVolume{volume}
		}
		return s, p
	}
	for _, eph := range []bool{false, true} {
		suffix := ""
		if eph {
			suffix = " (ephemeral volume)"
		}
		conformance.Run(t, c("should schedule to storage class zones if volume does not exist"+suffix), func(t *testing.T) {
			s, p := classPod(eph, nil, zone13)
			run(t, s, sched(p, fakeZone3))
		})
		conformance.Run(t, c("should not schedule if storage class zones are incompatible"+suffix), func(t *testing.T) {
			s, p := classPod(eph, nil, zone1)
			run(t, s, pending(p))
		})
		conformance.Run(t, c("should schedule to volume zones if volume already bound"+suffix), func(t *testing.T) {
			s, p := classPod(eph, fakePV("pv", "", fakeZone3))
			run(t, s, sched(p, fakeZone3))
		})
		conformance.Run(t, c("should not schedule if volume zones are incompatible"+suffix), func(t *testing.T) {
			s, p := classPod(eph, fakePV("pv", "", fakeZone3), zone1)
			run(t, s, pending(p))
		})
	}
	hostnamePV := func(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
		pv.Spec.NodeAffinity = pvAffinity([]corev1.NodeSelectorRequirement{expr(wellknown.HostnameLabel, in, "random-node")})
		return pv
	}
	local := func() *corev1.PersistentVolume {
		pv := hostnamePV(fakePV("local", ""))
		pv.Spec.CSI, pv.Spec.Local = nil, &corev1.LocalVolumeSource{Path: "/mnt/local-disks"}
		return pv
	}
	hostPath := func() *corev1.PersistentVolume {
		pv := hostnamePV(fakePV("hostpath", ""))
		pv.Spec.CSI, pv.Spec.HostPath = nil, &corev1.HostPathVolumeSource{Path: "/mnt/local-disks"}
		return pv
	}
	for _, eph := range []bool{false, true} {
		title := "should ignore hostname affinity scheduling when using local path volumes"
		if eph {
			title += " (ephemeral volume)"
		}
		for _, e := range []struct {
			entry string
			pv    func() *corev1.PersistentVolume
		}{{"when using local volumes", local}, {"when using hostpath volumes", hostPath}} {
			conformance.Run(t, c(title+" > "+e.entry), func(t *testing.T) {
				s, p := classPod(eph, e.pv())
				// The local-path class of the table: no provisioner.
				s.StorageClasses = append(s.StorageClasses, fakeSC("local-path", "kubernetes.io/no-provisioner", nil))
				run(t, s, sched(p, ""))
			})
		}
	}
	conformance.Run(t, c("should not ignore hostname affinity when using non-local path volumes"), func(t *testing.T) {
		s, p := classPod(false, hostnamePV(fakePV("pv", "")))
		run(t, s, pending(p))
	})
	conformance.Run(t, c("should not relax an added volume topology zone node-selector away"), func(t *testing.T) {
		s, p := classPod(false, fakePV("pv", "", fakeZone3), requiredAffinity(
			[]corev1.NodeSelectorRequirement{expr("example.com/label", in, "unsupported")},
			[]corev1.NodeSelectorRequirement{expr(wellknown.CapacityTypeLabel, in, wellknown.CapacityTypeOnDemand)},
		))
		run(t, s, sched(p, fakeZone3))
	})
}

func TestConformanceVolumeUsage(t *testing.T) {
	c := func(spec string, differs ...string) conformance.Case {
		cs := conformance.Case{Suite: "core/provisioning/scheduling", File: schedulingSuiteFile, Spec: "Scheduling > VolumeUsage > " + spec}
		if len(differs) > 0 {
			cs.Differs = differs[0]
		}
		return cs
	}
	in := corev1.NodeSelectorOpIn
	// The Describe's BeforeEach: one large type.
	types := func() []*InstanceType {
		return []*InstanceType{fakeType("instance-type", fakeTypeOpts{resources: rl("cpu", "1024", "pods", "1024")})}
	}
	pools := func() []*karpv1.NodePool { return []*karpv1.NodePool{fakePool()} }
	// first provisions an initial pod (with the options given) and returns
	// the snapshot of the next step: its node, with the CSINode's limits.
	first := func(t *testing.T, limits map[string]int32, setup func(*Snapshot), opts ...podOpt) (*Snapshot, *Node) {
		t.Helper()
		initial := fakePod(opts...)
		s := fakeSnapshot(types(), pools(), initial)
		if setup != nil {
			setup(s)
		}
		n := provisioned(t, solve(t, s), initial, "node-1", fakeZone1)
		s.Pods = nil
		s.Nodes = []*Node{n}
		if limits != nil {
			s.CSINodes = []*storagev1.CSINode{csiNode(n.Name, limits)}
		}
		return s, n
	}

	conformance.Run(t, c("should launch multiple nodes if required due to volume limits"), func(t *testing.T) {
		s, _ := first(t, map[string]int32{fakeCSIProvider: 10}, nil)
		s.StorageClasses = []*storagev1.StorageClass{fakeSC("my-storage-class", fakeCSIProvider, &waitForConsumer, fakeZone1)}
		for i := range 6 {
			a, b := fmt.Sprintf("my-claim-a-%d", i), fmt.Sprintf("my-claim-b-%d", i)
			s.PersistentVolumeClaims = append(s.PersistentVolumeClaims, fakePVC(a, strPtr("my-storage-class"), ""), fakePVC(b, strPtr("my-storage-class"), ""))
			s.Pods = append(s.Pods, fakePod(withClaims(a, b)))
		}
		r := solve(t, s)
		if len(r.Unschedulable) > 0 || newClaims(r) != 1 {
			t.Fatalf("%d new NodeClaims, unschedulable %v; want one more node (the first takes 5 pods of 2 volumes, its CSINode's limit)", newClaims(r), r.Unschedulable)
		}
	})
	conformance.Run(t, c("should launch a single node if all pods use the same PVC"), func(t *testing.T) {
		s, _ := first(t, map[string]int32{fakeCSIProvider: 10}, nil)
		s.StorageClasses = []*storagev1.StorageClass{fakeSC("my-storage-class", fakeCSIProvider, nil, fakeZone1)}
		s.PersistentVolumes = []*corev1.PersistentVolume{fakePV("my-volume", "", fakeZone1)}
		s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{fakePVC("my-claim", strPtr("my-storage-class"), "my-volume")}
		for range 100 {
			s.Pods = append(s.Pods, fakePod(withClaims("my-claim")))
		}
		r := solve(t, s)
		if len(r.Unschedulable) > 0 || newClaims(r) != 0 {
			t.Fatalf("%d new NodeClaims, unschedulable %v; want all on the first node", newClaims(r), r.Unschedulable)
		}
	})
	conformance.Run(t, c("should not fail for NFS volumes"), func(t *testing.T) {
		s, _ := first(t, nil, nil)
		pv := fakePV("my-volume", "", fakeZone1)
		pv.Spec.CSI, pv.Spec.NFS = nil, &corev1.NFSVolumeSource{Server: "fake.server", Path: "/some/path"}
		pv.Spec.StorageClassName = "nfs"
		s.PersistentVolumes = []*corev1.PersistentVolume{pv}
		s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{fakePVC("my-claim", strPtr(""), "my-volume")}
		for range 5 {
			s.Pods = append(s.Pods, fakePod(withClaims("my-claim", "my-claim")))
		}
		r := solve(t, s)
		if len(r.Unschedulable) > 0 || newClaims(r) != 0 {
			t.Fatalf("%d new NodeClaims, unschedulable %v; want all on the first node", newClaims(r), r.Unschedulable)
		}
	})
	antiZone := func(app string) podOpt {
		return func(p *corev1.Pod) {
			p.Labels["app"] = app
			podAntiAffinity(wellknown.ZoneLabel, map[string]string{"app": app})(p)
		}
	}
	differentZones := func(t *testing.T, s *Snapshot, r *Results, a, b *corev1.Pod) {
		t.Helper()
		_, la := expectScheduled(t, s, r, a)
		_, lb := expectScheduled(t, s, r, b)
		za, zb := la[wellknown.ZoneLabel], lb[wellknown.ZoneLabel]
		for _, z := range []string{za, zb} {
			if z != fakeZone1 && z != fakeZone2 {
				t.Fatalf("zone %s, want test-zone-1 or test-zone-2", z)
			}
		}
		if za == zb {
			t.Fatalf("both pods in %s", za)
		}
	}
	conformance.Run(t, c("should schedule pods using a PV with multiple zones"), func(t *testing.T) {
		s := fakeSnapshot(types(), pools())
		var pods []*corev1.Pod
		for i := range 2 {
			pv := fakePV(fmt.Sprintf("multi-zone-pv-%d", i), "")
			pv.Spec.NodeAffinity = pvAffinity([]corev1.NodeSelectorRequirement{expr(wellknown.ZoneLabel, in, fakeZone1)}, []corev1.NodeSelectorRequirement{expr(wellknown.ZoneLabel, in, fakeZone2)})
			pvc := fakePVC(fmt.Sprintf("multi-zone-pvc-%d", i), nil, pv.Name)
			s.PersistentVolumes = append(s.PersistentVolumes, pv)
			s.PersistentVolumeClaims = append(s.PersistentVolumeClaims, pvc)
			pods = append(pods, fakePod(withClaims(pvc.Name), antiZone("multi-zone-app")))
		}
		s.Pods = pods
		differentZones(t, s, solve(t, s), pods[0], pods[1])
	})
	for _, e := range []struct {
		entry     string
		localPath bool
	}{{"for local volumes", true}, {"for hostpath volumes", false}} {
		conformance.Run(t, c("should preserve unconstrained PV alternatives after ignoring hostname affinity > "+e.entry), func(t *testing.T) {
			pv := fakePV("hostname-or-zone-pv", "")
			pv.Spec.CSI = nil
			if e.localPath {
				pv.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/local-disks"}
			} else {
				pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/mnt/local-disks"}
			}
			pv.Spec.NodeAffinity = pvAffinity([]corev1.NodeSelectorRequirement{expr(wellknown.HostnameLabel, in, "existing-host")}, []corev1.NodeSelectorRequirement{expr(wellknown.ZoneLabel, in, "invalid-zone")})
			p := fakePod(withClaims("hostname-or-zone-pvc"))
			s := fakeSnapshot(types(), pools(), p)
			s.PersistentVolumes = []*corev1.PersistentVolume{pv}
			s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{fakePVC("hostname-or-zone-pvc", nil, pv.Name)}
			expectScheduled(t, s, solve(t, s), p)
		})
	}
	conformance.Run(t, c("should schedule pods using a StorageClass with multiple zones in AllowedTopologies"), func(t *testing.T) {
		sc := fakeSC("multi-zone-sc", "", &waitForConsumer)
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{
			{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: wellknown.ZoneLabel, Values: []string{fakeZone1}}}},
			{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: wellknown.ZoneLabel, Values: []string{fakeZone2}}}},
		}
		s := fakeSnapshot(types(), pools())
		s.StorageClasses = []*storagev1.StorageClass{sc}
		for i := range 2 {
			pvc := fakePVC(fmt.Sprintf("multi-zone-pvc-%d", i), &sc.Name, "")
			s.PersistentVolumeClaims = append(s.PersistentVolumeClaims, pvc)
			s.Pods = append(s.Pods, fakePod(withClaims(pvc.Name), antiZone("multi-zone-sc-app")))
		}
		differentZones(t, s, solve(t, s), s.Pods[0], s.Pods[1])
	})
	conformance.Run(t, c("should schedule pods when a valid multi-volume topology alternative remains after pruning disjoint branches"), func(t *testing.T) {
		term := func(kv ...string) corev1.TopologySelectorTerm {
			var t corev1.TopologySelectorTerm
			for i := 0; i+1 < len(kv); i += 2 {
				t.MatchLabelExpressions = append(t.MatchLabelExpressions, corev1.TopologySelectorLabelRequirement{Key: kv[i], Values: []string{kv[i+1]}})
			}
			return t
		}
		scA, scB := fakeSC("pruned-overlap-a", "", &waitForConsumer), fakeSC("pruned-overlap-b", "", &waitForConsumer)
		scA.AllowedTopologies = []corev1.TopologySelectorTerm{term(fakeExoticKey, "required"), term(fakeExoticKey, "optional")}
		scB.AllowedTopologies = []corev1.TopologySelectorTerm{
			term(wellknown.ZoneLabel, fakeZone1, fakeExoticKey, "optional"),
			term(wellknown.ZoneLabel, fakeZone2, fakeExoticKey, "required"),
		}
		p := fakePod(withClaims("pruned-overlap-pvc-a", "pruned-overlap-pvc-b"))
		s := fakeSnapshot(fakeInstanceTypes(5), pools(), p)
		s.StorageClasses = []*storagev1.StorageClass{scA, scB}
		s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{fakePVC("pruned-overlap-pvc-a", &scA.Name, ""), fakePVC("pruned-overlap-pvc-b", &scB.Name, "")}
		_, labels := expectScheduled(t, s, solve(t, s), p)
		expectLabel(t, labels, wellknown.ZoneLabel, fakeZone1)
		expectLabel(t, labels, fakeExoticKey, "optional")
	})
	// secondGoesElsewhere provisions a pod with the volume opts give, sets
	// the first node's CSINode limits, and expects a second such pod on a
	// new node.
	secondGoesElsewhere := func(t *testing.T, classes []*storagev1.StorageClass, limits map[string]int32, claimClass *string, ephemeral bool) {
		t.Helper()
		mk := func() (*corev1.Pod, *corev1.PersistentVolumeClaim) {
			if ephemeral {
				p := fakePod(withEphemeral(claimClass))
				return p, fakePVC(ephemeralClaim(p), claimClass, "")
			}
			p := fakePod()
			pvc := fakePVC("claim-"+p.Name, claimClass, "")
			withClaims(pvc.Name)(p)
			return p, pvc
		}
		p1, c1 := mk()
		s := fakeSnapshot(types(), pools(), p1)
		s.StorageClasses = classes
		s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{c1}
		n := provisioned(t, solve(t, s), p1, "node-1", fakeZone1)
		p2, c2 := mk()
		s.Pods, s.Nodes = []*corev1.Pod{p2}, []*Node{n}
		s.CSINodes = []*storagev1.CSINode{csiNode(n.Name, limits)}
		s.PersistentVolumeClaims = append(s.PersistentVolumeClaims, c2)
		r := solve(t, s)
		if where, _ := expectScheduled(t, s, r, p2); where == n.Name {
			t.Fatalf("second pod on the first node, whose CSINode's limit its volume exceeds")
		}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	conformance.Run(t, c("should launch nodes for pods with ephemeral volume using the specified storage class name"), func(t *testing.T) {
		secondGoesElsewhere(t, []*storagev1.StorageClass{
			fakeSC("my-storage-class", fakeCSIProvider, &waitForConsumer, fakeZone1),
			defaultSC(fakeSC("default-storage-class", "other-provider", &waitForConsumer, fakeZone1), now),
		}, map[string]int32{fakeCSIProvider: 1, "other-provider": 10}, strPtr("my-storage-class"), true)
	})
	conformance.Run(t, c("should launch nodes for pods with ephemeral volume using a default storage class"), func(t *testing.T) {
		secondGoesElsewhere(t, []*storagev1.StorageClass{
			defaultSC(fakeSC("default-storage-class", fakeCSIProvider, &waitForConsumer, fakeZone1), now),
		}, map[string]int32{fakeCSIProvider: 1}, nil, true)
	})
	conformance.Run(t, c("should launch nodes for pods with ephemeral volume using the newest storage class"), func(t *testing.T) {
		secondGoesElsewhere(t, []*storagev1.StorageClass{
			defaultSC(fakeSC("default-storage-class", "other-provider", &waitForConsumer, fakeZone1), now),
			defaultSC(fakeSC("newer-default-storage-class", fakeCSIProvider, &waitForConsumer, fakeZone1), now.Add(2*time.Second)),
		}, map[string]int32{fakeCSIProvider: 1, "other-provider": 10}, nil, true)
	})
	unsupported := "Karpenter's UnsupportedProvisioners and UnsupportedTopologyKeys are package variables only its tests fill (the AWS provider leaves them empty); Karpless has no such lists, so a pod with such a volume is scheduled as Karpenter's AWS build schedules it"
	conformance.Run(t, c("should not launch nodes for pod with storageClass that uses an unsupported provisioner", unsupported), func(t *testing.T) {})
	conformance.Run(t, c("should not launch nodes for pod with bound persistentVolume that uses an unsupported provisioner", unsupported), func(t *testing.T) {})
	conformance.Run(t, c("should not launch nodes for pod with storageClass that uses an unsupported topology key"), func(t *testing.T) {
		// Without Karpenter's test-only list, the AWS build reads the EBS
		// CSI zone key as the zone: zones no NodePool offers.
		sc := fakeSC("default-storage-class", "ebs.csi.eks.amazonaws.com", &waitForConsumer)
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: wellknown.EBSCSIZoneLabel, Values: []string{"us-west-2a", "us-west-2b"}}}}}
		p := fakePod(withClaims("tmp-ephemeral"))
		s := fakeSnapshot(types(), pools(), p)
		s.StorageClasses = []*storagev1.StorageClass{sc}
		s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{fakePVC("tmp-ephemeral", &sc.Name, "")}
		expectNotScheduled(t, solve(t, s), p)
	})
	pendingWith := func(t *testing.T, s *Snapshot, p *corev1.Pod) {
		t.Helper()
		r := solve(t, s)
		expectNotScheduled(t, r, p)
		if newClaims(r) != 0 {
			t.Fatalf("%d NodeClaims, want none", newClaims(r))
		}
	}
	otherSC := func(mode *storagev1.VolumeBindingMode) *storagev1.StorageClass {
		return fakeSC("default-storage-class", "other-provider", mode, fakeZone1)
	}
	conformance.Run(t, c("should not launch nodes for pod with unbound volume for volumeBindingMode immediate"), func(t *testing.T) {
		p := fakePod(withClaims("tmp-ephemeral"))
		s := fakeSnapshot(types(), pools(), p)
		s.StorageClasses = []*storagev1.StorageClass{otherSC(&immediateMode)}
		s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{fakePVC("tmp-ephemeral", strPtr("default-storage-class"), "")}
		pendingWith(t, s, p)
	})
	conformance.Run(t, c("should not launch nodes for pod with deleting persistentVolumeClaim"), func(t *testing.T) {
		p := fakePod(withClaims("tmp-ephemeral"))
		s := fakeSnapshot(types(), pools(), p)
		s.StorageClasses = []*storagev1.StorageClass{otherSC(&waitForConsumer)}
		pvc := fakePVC("tmp-ephemeral", strPtr("default-storage-class"), "")
		pvc.DeletionTimestamp = &metav1.Time{Time: now}
		s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{pvc}
		pendingWith(t, s, p)
	})
	conformance.Run(t, c("should not launch nodes for pod with bound persistentVolume that is marked for deletion"), func(t *testing.T) {
		p := fakePod(withEphemeral(nil))
		pv := fakePV("pv", "other-provider")
		pv.DeletionTimestamp = &metav1.Time{Time: now}
		s := fakeSnapshot(types(), pools(), p)
		s.PersistentVolumes = []*corev1.PersistentVolume{pv}
		s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{fakePVC(ephemeralClaim(p), nil, pv.Name)}
		pendingWith(t, s, p)
	})
	conformance.Run(t, c("should not launch nodes for pod with Lost persistentVolumeClaim"), func(t *testing.T) {
		p := fakePod(withClaims("tmp-ephemeral"))
		s := fakeSnapshot(types(), pools(), p)
		s.StorageClasses = []*storagev1.StorageClass{otherSC(&waitForConsumer)}
		pvc := fakePVC("tmp-ephemeral", strPtr("default-storage-class"), "")
		pvc.Status.Phase = corev1.ClaimLost
		s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{pvc}
		pendingWith(t, s, p)
	})
	for _, e := range []struct {
		entry     string
		annotated bool
	}{{"when pv.kubernetes.io/bind-completed is missing", false}, {"when pv.kubernetes.io/bind-completed is present", true}} {
		conformance.Run(t, c("should handle pods with PVCs with defined volumeName > "+e.entry), func(t *testing.T) {
			p := fakePod(withClaims("tmp-ephemeral"))
			pv := fakePV("pv", "other-provider")
			pvc := fakePVC("tmp-ephemeral", strPtr("default-storage-class"), pv.Name)
			if !e.annotated {
				delete(pvc.Annotations, bindCompletedAnnotation)
			}
			s := fakeSnapshot(types(), pools(), p)
			s.StorageClasses = []*storagev1.StorageClass{otherSC(&waitForConsumer)}
			s.PersistentVolumes = []*corev1.PersistentVolume{pv}
			s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{pvc}
			r := solve(t, s)
			if e.annotated {
				expectScheduled(t, s, r, p)
			} else {
				expectNotScheduled(t, r, p)
			}
		})
	}
	for _, e := range []struct{ entry, class string }{{"non-existent storage class", "non-existent"}, {"explicitly disabled storage class (empty string)", ""}} {
		conformance.Run(t, c("should launch nodes for pods with ephemeral volume without a storage class when the PVC is bound > "+e.entry), func(t *testing.T) {
			p := fakePod(withEphemeral(strPtr(e.class)))
			s := fakeSnapshot(types(), pools(), p)
			s.PersistentVolumes = []*corev1.PersistentVolume{fakePV("test-pv", "")}
			s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{fakePVC(ephemeralClaim(p), strPtr(e.class), "test-pv")}
			r := solve(t, s)
			expectScheduled(t, s, r, p)
			if newClaims(r) != 1 {
				t.Fatalf("%d NodeClaims, want 1", newClaims(r))
			}
		})
		conformance.Run(t, c("should not launch nodes for pods with ephemeral volume without a storage class when the PVC is unbound > "+e.entry), func(t *testing.T) {
			p := fakePod(withEphemeral(strPtr(e.class)))
			pendingWith(t, fakeSnapshot(types(), pools(), p), p)
		})
	}
	inTree := func() []*storagev1.StorageClass {
		return []*storagev1.StorageClass{defaultSC(fakeSC("in-tree-storage-class", "kubernetes.io/aws-ebs", &waitForConsumer, fakeZone1), now)}
	}
	conformance.Run(t, c("CSIMigration > should launch nodes for pods with non-dynamic PVC using a migrated PVC/PV"), func(t *testing.T) {
		secondGoesElsewhere(t, inTree(), map[string]int32{"ebs.csi.aws.com": 1}, strPtr("in-tree-storage-class"), false)
	})
	conformance.Run(t, c("CSIMigration > should launch nodes for pods with ephemeral volume using a migrated PVC/PV"), func(t *testing.T) {
		secondGoesElsewhere(t, inTree(), map[string]int32{"ebs.csi.aws.com": 1}, strPtr("in-tree-storage-class"), true)
	})
}

// The EBS CSI driver's zone key is the zone (the AWS provider's
// NormalizedLabels): volume topology and node selectors on it place pods
// in that zone.
func TestEBSCSIZoneIsTheZone(t *testing.T) {
	pv := fakePV("pv", "ebs.csi.aws.com")
	pv.Spec.NodeAffinity = pvAffinity([]corev1.NodeSelectorRequirement{expr(wellknown.EBSCSIZoneLabel, corev1.NodeSelectorOpIn, fakeZone3)})
	byVolume := fakePod(withClaims("claim"))
	bySelector := fakePod(nodeSelector(wellknown.EBSCSIZoneLabel, fakeZone2))
	sc := fakeSC("gp3", "ebs.csi.aws.com", &waitForConsumer)
	sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: wellknown.EBSCSIZoneLabel, Values: []string{fakeZone1}}}}}
	byClass := fakePod(withClaims("unbound"))
	s := fakeSnapshot(nil, []*karpv1.NodePool{fakePool()}, byVolume, bySelector, byClass)
	s.PersistentVolumes = []*corev1.PersistentVolume{pv}
	s.StorageClasses = []*storagev1.StorageClass{sc}
	s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{fakePVC("claim", nil, "pv"), fakePVC("unbound", &sc.Name, "")}
	r := solve(t, s)
	for p, zone := range map[*corev1.Pod]string{byVolume: fakeZone3, bySelector: fakeZone2, byClass: fakeZone1} {
		_, labels := expectScheduled(t, s, r, p)
		expectLabel(t, labels, wellknown.ZoneLabel, zone)
	}
}
