package shadow

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/kube"
)

const ns = "kube-system"

// own is what the functions own (app.ShadowOwn, which a test in app
// checks).
var own = Own{
	Leases:     []string{"karpless-provisioning", "karpless-disruption"},
	ConfigMaps: []string{"karpless-unavailable-offerings", "karpless-pricing", "karpless-disruption", "karpless-shadow-provisioner", "karpless-shadow-disruption"},
}

// recorder is the next transport: it answers 200 and remembers what
// reached it.
type recorder struct {
	mu   sync.Mutex
	seen []string
	body []byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var b []byte
	if req.Body != nil {
		b, _ = io.ReadAll(req.Body)
	}
	r.mu.Lock()
	r.seen = append(r.seen, req.Method+" "+req.URL.Path)
	r.body = b
	r.mu.Unlock()
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}")), Header: http.Header{}, Request: req}, nil
}

// TestKubeRefusesEveryOtherWrite: every write verb on every kind of
// object shadow mode must not touch is refused before it leaves, and the
// same verbs on its own Leases, state ConfigMaps and Events pass, as do
// reads of anything.
func TestKubeRefusesEveryOtherWrite(t *testing.T) {
	writes := []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	refused := []string{
		"/api/v1/nodes", "/api/v1/nodes/ip-10-0-1-1", "/api/v1/nodes/ip-10-0-1-1/status",
		"/api/v1/namespaces/web/pods", "/api/v1/namespaces/web/pods/web-1", "/api/v1/namespaces/web/pods/web-1/eviction",
		"/api/v1/namespaces/web/pods/web-1/binding", "/api/v1/namespaces/web/pods/web-1/status",
		"/apis/karpenter.sh/v1/nodeclaims", "/apis/karpenter.sh/v1/nodeclaims/general-abcde", "/apis/karpenter.sh/v1/nodeclaims/general-abcde/status",
		"/apis/karpenter.sh/v1/nodepools/general", "/apis/karpenter.sh/v1/nodepools/general/status",
		"/apis/karpenter.k8s.aws/v1/ec2nodeclasses/default", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/default/status",
		"/apis/karpenter.sh/v1alpha1/nodeoverlays/sp/status", "/apis/autoscaling.x-k8s.io/v1beta1/namespaces/web/capacitybuffers/b/status",
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodeclaims.karpenter.sh",
		"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/karpenter-leader-election",
		"/apis/coordination.k8s.io/v1/namespaces/web/leases/karpless-provisioning",
		"/api/v1/namespaces/kube-system/configmaps/karpless-pause",
		"/api/v1/namespaces/kube-system/configmaps/aws-auth",
		"/api/v1/namespaces/web/configmaps/karpless-pricing",
		"/api/v1/namespaces/kube-system/configmaps/karpless-pricing/status",
		"/api/v1/namespaces/kube-system/configmaps/karpless-anything", "/api/v1/namespaces/kube-system/configmaps/karpless-shadow-other",
		"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/karpless-someone-else",
		"/apis/apps/v1/namespaces/web/deployments/web", "/api/v1/namespaces/kube-system", "/api/v1/namespaces",
		"/apis/rbac.authorization.k8s.io/v1/clusterroles/karpless", "/version", "/",
	}
	allowed := []string{
		"/api/v1/namespaces/default/events", "/api/v1/namespaces/web/events/web-1.abc",
		"/apis/events.k8s.io/v1/namespaces/default/events",
		"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/karpless-provisioning",
		"/api/v1/namespaces/kube-system/configmaps/karpless-pricing",
		"/api/v1/namespaces/kube-system/configmaps/karpless-shadow-provisioner",
	}
	rt := func() (http.RoundTripper, *recorder) {
		next := &recorder{}
		return Kube(ns, own)(next), next
	}
	for _, m := range writes {
		for _, p := range refused {
			tr, next := rt()
			_, err := tr.RoundTrip(httptest.NewRequest(m, p, strings.NewReader("{}")))
			if !errors.Is(err, ErrRefused) || len(next.seen) > 0 {
				t.Errorf("%s %s: error %v, reached the server %v", m, p, err, next.seen)
			}
		}
		for _, p := range allowed {
			if m == http.MethodDelete && strings.Contains(p, "/events") {
				continue // below
			}
			if m != http.MethodPost && strings.HasSuffix(p, "/events") {
				continue // a collection is only created into: below
			}
			tr, next := rt()
			if _, err := tr.RoundTrip(httptest.NewRequest(m, p, strings.NewReader("{}"))); err != nil || len(next.seen) != 1 {
				t.Errorf("%s %s: error %v, reached the server %v", m, p, err, next.seen)
			}
		}
	}
	for _, p := range []string{"/api/v1/namespaces/default/events/x", "/apis/events.k8s.io/v1/namespaces/default/events/x"} {
		tr, _ := rt()
		if _, err := tr.RoundTrip(httptest.NewRequest(http.MethodDelete, p, nil)); !errors.Is(err, ErrRefused) {
			t.Errorf("DELETE %s: %v", p, err)
		}
	}
	// A whole collection: a DELETE (deletecollection), PUT or PATCH
	// without a name, even of the kinds shadow mode writes one by one.
	for _, m := range []string{http.MethodPut, http.MethodPatch, http.MethodDelete} {
		for _, p := range []string{
			"/api/v1/namespaces/kube-system/configmaps", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
			"/api/v1/namespaces/default/events", "/apis/events.k8s.io/v1/namespaces/default/events",
		} {
			tr, next := rt()
			if _, err := tr.RoundTrip(httptest.NewRequest(m, p+"?labelSelector=x", nil)); !errors.Is(err, ErrRefused) || len(next.seen) > 0 {
				t.Errorf("%s %s: error %v, reached the server %v", m, p, err, next.seen)
			}
		}
	}
	// Reads that act: exec, attach, port-forward, the proxies.
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodOptions} {
		for _, p := range []string{
			"/api/v1/namespaces/web/pods/web-1/exec", "/api/v1/namespaces/web/pods/web-1/attach",
			"/api/v1/namespaces/web/pods/web-1/portforward", "/api/v1/namespaces/web/pods/web-1/proxy/admin",
			"/api/v1/namespaces/web/pods/web-1/log", "/api/v1/nodes/ip-10-0-1-1/proxy/configz",
			"/api/v1/nodes/ip-10-0-1-1:10250/proxy/run/kube-system/p/c", "/api/v1/namespaces/web/services/web:80/proxy/delete-all",
			"/api/v1/proxy/nodes/ip-10-0-1-1/pods", "/api/v1/namespaces/web/pods/web-1/eviction",
		} {
			tr, next := rt()
			if _, err := tr.RoundTrip(httptest.NewRequest(m, p+"?command=rm", nil)); !errors.Is(err, ErrRefused) || len(next.seen) > 0 {
				t.Errorf("%s %s: error %v, reached the server %v", m, p, err, next.seen)
			}
		}
	}
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodOptions} {
		for _, p := range append(append(refused, allowed...), "/api/v1/pods?watch=true", "/apis", "/api/v1/namespaces/web/pods/web-1/status", "/openapi/v3") {
			if strings.HasSuffix(p, "/eviction") || strings.HasSuffix(p, "/binding") {
				continue // subresources that only act: refused above
			}
			tr, next := rt()
			if _, err := tr.RoundTrip(httptest.NewRequest(m, p, nil)); err != nil || len(next.seen) != 1 {
				t.Errorf("%s %s: error %v", m, p, err)
			}
		}
	}
}

// TestKubeThroughTheClients drives the shadow transport with the clients
// the functions use (protobuf for core types, JSON for Karpenter's): the
// writes the ticks make in active mode are refused, a create is judged
// by the name in its body, and the body of an allowed one arrives whole.
func TestKubeThroughTheClients(t *testing.T) {
	next := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = next.RoundTrip(r)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}))
	defer srv.Close()
	c, err := kube.NewClients(&rest.Config{Host: srv.URL, WrapTransport: Kube(ns, own)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	refusedCalls := map[string]func() error{
		"create nodeclaim": func() error {
			_, err := c.NodeClaims.Create(ctx, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{GenerateName: "general-"}}, metav1.CreateOptions{})
			return err
		},
		"delete nodeclaim": func() error { return c.NodeClaims.Delete(ctx, "general-abcde", metav1.DeleteOptions{}) },
		"taint node": func() error {
			_, err := c.Core.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{"spec":{"taints":[]}}`), metav1.PatchOptions{})
			return err
		},
		"evict pod": func() error {
			return c.Core.CoreV1().Pods("web").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "web"}})
		},
		"karpenter's lease": func() error {
			_, err := c.Core.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "karpenter-leader-election"}}, metav1.CreateOptions{})
			return err
		},
		"someone's configmap": func() error {
			_, err := c.Core.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "aws-auth"}}, metav1.CreateOptions{})
			return err
		},
		"the pause switch": func() error {
			_, err := c.Core.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "karpless-pause"}}, metav1.CreateOptions{})
			return err
		},
	}
	for what, call := range refusedCalls {
		if err := call(); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want refused", what, err)
		}
	}
	if len(next.seen) > 0 {
		t.Fatalf("refused writes reached the server: %v", next.seen)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "karpless-provisioning", Namespace: ns}}
	if _, err := c.Core.CoordinationV1().Leases(ns).Create(ctx, lease, metav1.CreateOptions{}); errors.Is(err, ErrRefused) {
		t.Errorf("own lease refused: %v", err)
	}
	if !bytes.Contains(next.body, []byte("karpless-provisioning")) {
		t.Errorf("the lease's body did not arrive whole: %q", next.body)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "karpless-unavailable-offerings", Namespace: ns}}
	if _, err := c.Core.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); errors.Is(err, ErrRefused) {
		t.Errorf("own configmap refused: %v", err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "general.", Namespace: "default"}}
	if _, err := c.Core.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); errors.Is(err, ErrRefused) {
		t.Errorf("event refused: %v", err)
	}
	if len(next.seen) != 3 {
		t.Errorf("allowed writes reached the server %d times: %v", len(next.seen), next.seen)
	}
}
