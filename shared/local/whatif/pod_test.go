package whatif

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/core/wellknown"
)

func TestExplainPod(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *fixture)
		pod   string
		check func(t *testing.T, r *PodReport, text string)
		// wantErr, when set, is the error ExplainPod must return.
		wantErr string
	}{
		{
			name:  "pending pod on an empty cluster needs a new claim, cheapest spot",
			setup: func(f *fixture) { f.pod("web", "api", "1", "2Gi", "") },
			pod:   "web/api",
			check: func(t *testing.T, r *PodReport, text string) {
				if r.State != PodPending || !r.Placed || r.Placement == nil || r.Placement.Kind != OnNewClaim {
					t.Fatalf("report %+v", r)
				}
				c := r.Placement.New
				// m5.large fits 1 cpu / 2Gi; its spot price is 0.035 in 1b.
				want := Offering{InstanceType: "m5.large", Zone: zoneB, CapacityType: wellknown.CapacityTypeSpot, PricePerHour: 0.035}
				if c.NodePool != "default" || c.Launch == nil || *c.Launch != want {
					t.Fatalf("claim %+v launch %+v", c, c.Launch)
				}
				if len(c.InstanceTypes) != 3 || c.InstanceTypes[0] != "m5.large" {
					t.Errorf("instance types %v", c.InstanceTypes)
				}
				for _, s := range []string{"Pod web/api (pending): needs a new NodeClaim of NodePool default: 3 instance type(s) fit; the launch would pick m5.large spot in us-east-1b at $0.0350/h",
					"[yes] default: NodePool default could launch a node for it", "3 instance type(s) fit: m5.large $0.0350/h",
					"ruled out, nodepool: NodePool default requires node.kubernetes.io/instance-type In [m5.2xlarge m5.large m5.xlarge]",
					"note: prices: spot prices and zone offerings from the pricing book", "note: catalog: instance types from the build: not read yet; on-demand prices from the build (us-east-1)"} {
					if !strings.Contains(text, s) {
						t.Errorf("text lacks %q:\n%s", s, text)
					}
				}
			},
		},
		{
			name: "pending pod that fits an existing node",
			setup: func(f *fixture) {
				f.node("n1", "default", "m5.xlarge", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.pod("web", "api", "1", "2Gi", "")
			},
			pod: "web/api",
			check: func(t *testing.T, r *PodReport, text string) {
				if r.Placement == nil || r.Placement.Kind != OnExistingNode || r.Placement.Node != "n1" || r.Placement.NodeClaim != "claim-n1" {
					t.Fatalf("placement %+v", r.Placement)
				}
				if !strings.Contains(r.Outcome, "fits existing node n1: nothing is launched") || len(r.Nodes) != 1 || !r.Nodes[0].Fits {
					t.Errorf("outcome %q nodes %+v", r.Outcome, r.Nodes)
				}
			},
		},
		{
			name: "pending pod that an in-flight claim was launched for",
			setup: func(f *fixture) {
				f.inFlight("n2", "default", "m5.large", zoneA, wellknown.CapacityTypeSpot)
				f.pod("web", "api", "1", "2Gi", "")
			},
			pod: "web/api",
			check: func(t *testing.T, r *PodReport, text string) {
				if r.Placement == nil || r.Placement.Kind != OnInFlightClaim || r.Placement.NodeClaim != "claim-n2" || r.Placement.Node != "" {
					t.Fatalf("placement %+v", r.Placement)
				}
				if !strings.Contains(r.Outcome, "goes to NodeClaim claim-n2 (NodePool default), launched for it and not ready yet") {
					t.Errorf("outcome %q", r.Outcome)
				}
			},
		},
		{
			name: "unschedulable: each NodePool says why, types grouped",
			setup: func(f *fixture) {
				gpu := f.pool("gpu")
				gpu.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
				f.pod("batch", "huge", "2", "100Gi", "")
			},
			pod: "batch/huge",
			check: func(t *testing.T, r *PodReport, text string) {
				if r.Placed || r.Placement != nil || !strings.HasPrefix(r.Outcome, "cannot be placed: ") {
					t.Fatalf("report %+v", r)
				}
				byPool := map[string]PoolVerdict{}
				for _, v := range r.NodePools {
					byPool[v.NodePool] = v
				}
				if v := byPool["gpu"]; v.CanLaunch || !strings.Contains(v.Reason, "taint nvidia.com/gpu=true:NoSchedule") {
					t.Errorf("gpu verdict %+v", v)
				}
				d := byPool["default"]
				if d.CanLaunch || len(d.Fitting) != 0 {
					t.Fatalf("default verdict %+v", d)
				}
				small := false
				for _, g := range d.RuledOut {
					if g.Category == "resources" {
						small = len(g.Types) == 3 && len(g.Details) == 3 && strings.Contains(g.Details[0], "pod needs 100Gi memory")
					}
				}
				if !small {
					t.Errorf("default ruled out %+v", d.RuledOut)
				}
				for _, s := range []string{"Pod batch/huge (pending): cannot be placed", "[no ] gpu: NodePool gpu has taint nvidia.com/gpu=true:NoSchedule, which the pod does not tolerate",
					"3 ruled out, resources: too small for the pod (m5.2xlarge: pod needs 100Gi memory"} {
					if !strings.Contains(text, s) {
						t.Errorf("text lacks %q:\n%s", s, text)
					}
				}
			},
		},
		{
			name: "unschedulable: the pod asks for an architecture no NodePool has",
			setup: func(f *fixture) {
				p := f.pod("web", "arm", "1", "1Gi", "")
				p.Spec.NodeSelector = map[string]string{wellknown.ArchLabel: "arm64"}
			},
			pod: "web/arm",
			check: func(t *testing.T, r *PodReport, text string) {
				if r.Placed || !strings.Contains(r.Outcome, "arm64") {
					t.Fatalf("outcome %q", r.Outcome)
				}
			},
		},
		{
			// As Karpenter: a node is leaving once it (or its NodeClaim) is
			// being deleted; its pods are provisioned for before eviction.
			name: "pod bound to a node being deleted is re-provisioned",
			setup: func(f *fixture) {
				n, _ := f.node("n1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				n.Spec.Taints = []corev1.Taint{wellknown.DisruptedNoScheduleTaint}
				n.DeletionTimestamp = new(metav1.NewTime(t0.Add(-time.Minute)))
				n.Finalizers = []string{wellknown.TerminationFinalizer}
				f.pod("web", "api", "1", "2Gi", "n1")
			},
			pod: "web/api",
			check: func(t *testing.T, r *PodReport, text string) {
				if r.State != PodLeavingNode || r.Placement == nil || r.Placement.Kind != OnNewClaim {
					t.Fatalf("report %+v", r)
				}
				if !strings.Contains(text, "bound to node n1, which is being deleted") {
					t.Errorf("text:\n%s", text)
				}
			},
		},
		{
			// The interruption function and the disruption controller delete
			// the NodeClaim first; the Node follows. Its pods are leaving too.
			name: "pod bound to a node whose NodeClaim is being deleted is re-provisioned",
			setup: func(f *fixture) {
				_, nc := f.node("n1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				nc.DeletionTimestamp = new(metav1.NewTime(t0.Add(-time.Minute)))
				nc.Finalizers = []string{wellknown.TerminationFinalizer}
				f.pod("web", "api", "1", "2Gi", "n1")
			},
			pod: "web/api",
			check: func(t *testing.T, r *PodReport, text string) {
				if r.State != PodLeavingNode || r.Placement == nil || r.Placement.Kind != OnNewClaim {
					t.Fatalf("report %+v", r)
				}
			},
		},
		{
			// A disruption command taints its candidates before it creates
			// their replacements: provisioning for their pods in between
			// would launch the same capacity twice. Only a node being
			// deleted is leaving.
			name: "pod bound to a node merely tainted karpenter.sh/disrupted is not re-provisioned",
			setup: func(f *fixture) {
				n, _ := f.node("n1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				n.Spec.Taints = []corev1.Taint{wellknown.DisruptedNoScheduleTaint}
				f.pod("web", "api", "1", "2Gi", "n1")
			},
			pod:     "web/api",
			wantErr: "pod web/api is not pending: it is bound to node n1 (NodeClaim claim-n1 of NodePool default)",
		},
		{
			name: "a pod the scheduler has not given up on yet is explained, with a note",
			setup: func(f *fixture) {
				p := f.pod("web", "new", "1", "1Gi", "")
				p.Status.Conditions = nil
			},
			pod: "web/new",
			check: func(t *testing.T, r *PodReport, text string) {
				if r.State != PodNotConsidered || !r.Placed || !strings.Contains(r.Notes[0], "kube-scheduler has not marked it Unschedulable yet") {
					t.Fatalf("report %+v", r)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.setup(f)
			ns, name, _ := strings.Cut(tc.pod, "/")
			r, err := f.world().ExplainPod(ns, name)
			if tc.wantErr != "" {
				var np *NotPendingError
				if !errors.As(err, &np) || err.Error() != tc.wantErr {
					t.Fatalf("ExplainPod: %v (report %+v); want %q", err, r, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			tc.check(t, r, b.String())
		})
	}
}

func TestExplainPodErrors(t *testing.T) {
	f := newFixture(t)
	f.node("n1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
	f.pod("web", "running", "1", "1Gi", "n1")
	w := f.world()
	_, err := w.ExplainPod("web", "ghost")
	var nf *PodNotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "pod web/ghost not found") {
		t.Errorf("missing pod: %v", err)
	}
	_, err = w.ExplainPod("web", "running")
	var np *NotPendingError
	if !errors.As(err, &np) || err.Error() != "pod web/running is not pending: it is bound to node n1 (NodeClaim claim-n1 of NodePool default)" {
		t.Errorf("bound pod: %v", err)
	}
}

func TestExplainPodWithoutBook(t *testing.T) {
	f := newFixture(t)
	f.market = Market{}
	f.pod("web", "api", "1", "2Gi", "")
	pool := f.poolNamed("default")
	pool.Spec.Template.Spec.Requirements[0].Values = []string{wellknown.CapacityTypeOnDemand}
	r, err := f.world().ExplainPod("web", "api")
	if err != nil {
		t.Fatal(err)
	}
	// No book: the catalog's on-demand price; the note says so.
	if l := r.Placement.New.Launch; l == nil || l.InstanceType != "m5.large" || l.PricePerHour != onDemand(t, "m5.large") {
		t.Fatalf("launch %+v", l)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "no pricing book (ConfigMap karpless-pricing)") {
		t.Errorf("notes %v", r.Notes)
	}
}
