package whatif

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube"
)

// secretish builds a cluster whose objects carry what must never reach a
// snapshot file.
func secretish(t *testing.T) *fixture {
	f := newFixture(t)
	_, nc := f.node("n1", "default", "m5.xlarge", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
	nc.Annotations = map[string]string{
		wellknown.NodePoolHashAnnotation: "42", "karpless.dev/pod-fingerprint": "1-abc",
		"kubectl.kubernetes.io/last-applied-configuration": `{"secret":"x"}`,
	}
	nc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	p := f.pod("web", "api", "500m", "1Gi", "n1")
	p.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true", "vault.hashicorp.com/agent-inject-secret": "db"}
	p.Spec.Containers[0].Image = "registry.example.com/api:1"
	p.Spec.Containers[0].Command = []string{"/api", "--password=hunter2"}
	p.Spec.Containers[0].Args = []string{"--token=s3cr3t"}
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "DB_PASSWORD", Value: "hunter2"}}
	f.pod("web", "pending", "3", "2Gi", "")
	class := f.snap.NodeClasses[0]
	class.Spec.UserData = new("#!/bin/bash\nexport API_KEY=s3cr3t")
	class.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"spec":{"userData":"export API_KEY=s3cr3t"}}`
	f.pdb("web", "api", 1)
	f.snap.PDBs[0].Annotations = map[string]string{"owner": "team-a"}
	f.market.Unavailable = []Mark{{CapacityType: "spot", InstanceType: "m5.2xlarge", Zone: zoneA, Until: t0.Add(time.Minute)}}
	return f
}

func TestFileRoundTrip(t *testing.T) {
	f := secretish(t)
	file := NewFile(f.snap, f.market, t0, "context test (https://example:6443)", "kube-system")
	for _, compress := range []bool{false, true} {
		var b bytes.Buffer
		if err := file.Write(&b, compress); err != nil {
			t.Fatal(err)
		}
		raw := b.String()
		if !compress {
			for _, secret := range []string{"hunter2", "s3cr3t", "registry.example.com", `"kubectl.kubernetes.io/last-applied-configuration":`, "vault.hashicorp.com", "team-a", `"managedFields":`} {
				if strings.Contains(raw, secret) {
					t.Errorf("the file contains %q", secret)
				}
			}
			for _, kept := range []string{`"kind": "KarplessSnapshot"`, `"version": 1`, "karpenter.sh/nodepool-hash", "karpless.dev/pod-fingerprint", "karpenter.sh/do-not-disrupt", `"redacted"`} {
				if !strings.Contains(raw, kept) {
					t.Errorf("the file lacks %q", kept)
				}
			}
		}
		got, err := ReadFile(&b)
		if err != nil {
			t.Fatal(err)
		}
		if !got.TakenAt.Equal(t0) || got.Source != file.Source || !reflect.DeepEqual(got.Market.Unavailable, f.market.Unavailable) || got.Market.Book == nil {
			t.Errorf("header %+v", got)
		}
		// The saved snapshot answers the questions as the live one does.
		live, saved := f.world(), mustWorld(t, got.Input())
		if a, b := live.Simulate(), saved.Simulate(); !sameJSON(t, a, b) {
			t.Errorf("simulate differs:\nlive  %s\nsaved %s", js(t, a), js(t, b))
		}
		for _, q := range [][2]string{{"web", "pending"}} {
			a, errA := live.ExplainPod(q[0], q[1])
			b, errB := saved.ExplainPod(q[0], q[1])
			if errA != nil || errB != nil || !sameJSON(t, a, b) {
				t.Errorf("explain pod differs: %v %v\nlive  %s\nsaved %s", errA, errB, js(t, a), js(t, b))
			}
		}
		a, errA := live.ExplainNodeClaim("claim-n1")
		c, errB := saved.ExplainNodeClaim("claim-n1")
		if errA != nil || errB != nil || !sameJSON(t, a, c) {
			t.Errorf("explain nodeclaim differs: %v %v\nlive  %s\nsaved %s", errA, errB, js(t, a), js(t, c))
		}
	}
	// The live snapshot is untouched.
	if f.snap.Pods[0].Spec.Containers[0].Env == nil || f.snap.NodeClasses[0].Spec.UserData == nil {
		t.Error("NewFile modified the snapshot")
	}
}

func TestReadFileRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"kind":"Pod","version":1}`, `kind "Pod", want "KarplessSnapshot"`},
		{`{"kind":"KarplessSnapshot","version":7}`, "snapshot file version 7 is not supported"},
		{`not json`, "not a snapshot file"},
	} {
		if _, err := ReadFile(strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestDecodeMarks(t *testing.T) {
	got := decodeMarks(map[string]string{
		"spot_m5.large_us-east-1a":       "2026-05-04T12:03:00Z",
		"on-demand_c5.xlarge_us-east-1b": "2026-05-04T11:00:00Z",
		"garbage":                        "2026-05-04T12:03:00Z",
		"spot_m5.large_us-east-1b":       "yesterday",
	})
	want := []Mark{
		{CapacityType: "on-demand", InstanceType: "c5.xlarge", Zone: "us-east-1b", Until: time.Date(2026, 5, 4, 11, 0, 0, 0, time.UTC)},
		{CapacityType: "spot", InstanceType: "m5.large", Zone: "us-east-1a", Until: time.Date(2026, 5, 4, 12, 3, 0, 0, time.UTC)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("marks %+v", got)
	}
	// A live mark takes the offering out; an expired one does not.
	f := newFixture(t)
	f.market.Unavailable = []Mark{
		{CapacityType: "spot", InstanceType: "m5.large", Zone: zoneB, Until: t0.Add(time.Minute)},
		{CapacityType: "spot", InstanceType: "m5.large", Zone: zoneA, Until: t0.Add(-time.Minute)},
	}
	f.pod("web", "api", "1", "1Gi", "")
	r, err := f.world().ExplainPod("web", "api")
	if err != nil {
		t.Fatal(err)
	}
	if l := r.Placement.New.Launch; l == nil || l.InstanceType != "m5.large" || l.Zone != zoneA || l.PricePerHour != 0.040 {
		t.Errorf("launch %+v", l)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "1 offering(s) marked unavailable") {
		t.Errorf("notes %v", r.Notes)
	}
}

func TestPreflightUnreachable(t *testing.T) {
	c, err := kube.NewClients(&rest.Config{Host: "http://127.0.0.1:1", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = Preflight(context.Background(), c)
	var u *UnreachableError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "cannot reach the cluster's API server http://127.0.0.1:1") {
		t.Errorf("preflight: %v", err)
	}
	if _, err := Read(context.Background(), c, "kube-system", ""); !errors.As(err, &u) {
		t.Errorf("read: %v", err)
	}
}

func mustWorld(t *testing.T, in Input) *World {
	t.Helper()
	w, err := New(in)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sameJSON(t *testing.T, a, b any) bool { return js(t, a) == js(t, b) }

func TestPreflightCRDsMissing(t *testing.T) {
	cs := fake.NewClientset()
	disc := cs.Discovery().(*fakediscovery.FakeDiscovery)
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: "karpenter.sh/v1", APIResources: []metav1.APIResource{{Name: "nodepools"}}}}
	err := Preflight(context.Background(), &kube.Clients{Core: cs, Config: &rest.Config{Host: "https://example"}})
	var m *CRDsMissingError
	if !errors.As(err, &m) || strings.Join(m.Missing, ",") != "nodeclaims.karpenter.sh/v1,ec2nodeclasses.karpenter.k8s.aws/v1" {
		t.Errorf("preflight: %v", err)
	}
	disc.Resources = append(disc.Resources,
		&metav1.APIResourceList{GroupVersion: "karpenter.sh/v1", APIResources: []metav1.APIResource{{Name: "nodeclaims"}}},
		&metav1.APIResourceList{GroupVersion: "karpenter.k8s.aws/v1", APIResources: []metav1.APIResource{{Name: "ec2nodeclasses"}}})
	disc.Resources[0].APIResources = append(disc.Resources[0].APIResources, metav1.APIResource{Name: "nodeclaims"})
	if err := Preflight(context.Background(), &kube.Clients{Core: cs, Config: &rest.Config{}}); err != nil {
		t.Errorf("preflight with the CRDs: %v", err)
	}
}
