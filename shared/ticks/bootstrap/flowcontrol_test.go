package bootstrap

import (
	"net/http"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/karpless/karpless/shared/local/kubetest"
)

// TestFlowSchemasClassifyTheFunctions: after Install, the two FlowSchemas
// exist with Karpenter's levels and precedences, and the API server
// classifies requests by them (its X-Kubernetes-PF-* answer headers): a
// controller's lease request at leader-election, its other requests and
// the watcher's at workload-high; someone outside both groups stays in
// global-default. Uninstall removes them.
func TestFlowSchemasClassifyTheFunctions(t *testing.T) {
	e := kubetest.Need(t, env)
	reset(t, e.Clients)
	ctx := testCtx(t)
	o := Options{}.withDefaults()
	if _, err := Install(ctx, e.Clients, o); err != nil {
		t.Fatal(err)
	}
	fsAPI := e.Clients.Core.FlowcontrolV1().FlowSchemas()
	uid := map[string]string{}
	for _, want := range []struct {
		name, level string
		precedence  int32
	}{
		{LeaderElectionFlowSchema, LeaderElectionPriorityLevel, 200},
		{WorkloadFlowSchema, WorkloadPriorityLevel, 1000},
	} {
		fs, err := fsAPI.Get(ctx, want.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fs.Spec.PriorityLevelConfiguration.Name != want.level || fs.Spec.MatchingPrecedence != want.precedence ||
			fs.Spec.DistinguisherMethod == nil || fs.Spec.DistinguisherMethod.Type != flowcontrolv1.FlowDistinguisherMethodByUserType {
			t.Errorf("%s: spec %+v", want.name, fs.Spec)
		}
		groups := map[string]bool{}
		for _, s := range fs.Spec.Rules[0].Subjects {
			if s.Kind == flowcontrolv1.SubjectKindGroup {
				groups[s.Group.Name] = true
			}
		}
		if len(groups) != 2 || !groups[DefaultControllersGroup] || !groups[WatcherGroup] {
			t.Errorf("%s: subjects %+v, want the groups %s and %s", want.name, fs.Spec.Rules[0].Subjects, DefaultControllersGroup, WatcherGroup)
		}
		uid[want.name] = string(fs.UID)
	}
	plc := map[string]string{}
	for _, name := range []string{LeaderElectionPriorityLevel, WorkloadPriorityLevel, "global-default"} {
		l, err := e.Clients.Core.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the API server's suggested level %s: %v", name, err)
		}
		plc[name] = string(l.UID)
	}
	globalDefault, err := fsAPI.Get(ctx, "global-default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// get sends a GET as user in groups and returns the FlowSchema and
	// priority level the API server classified it in.
	get := func(user string, groups []string, path string) (flowSchema, level string) {
		t.Helper()
		cfg := rest.CopyConfig(e.Cluster.RESTConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID), resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID)
	}
	leasePath := "/apis/coordination.k8s.io/v1/namespaces/" + o.Namespace + "/leases/karpless-provisioning"
	for _, tc := range []struct {
		what, user string
		groups     []string
		path       string
		fs, level  string
	}{
		{"a controller's lease", "karpless:provisioner", []string{o.ControllersGroup}, leasePath, uid[LeaderElectionFlowSchema], plc[LeaderElectionPriorityLevel]},
		{"a controller's pod list", "karpless:provisioner", []string{o.ControllersGroup}, "/api/v1/pods?limit=1", uid[WorkloadFlowSchema], plc[WorkloadPriorityLevel]},
		{"a controller's NodeClaims", "karpless:disruption", []string{o.ControllersGroup}, "/apis/karpenter.sh/v1/nodeclaims", uid[WorkloadFlowSchema], plc[WorkloadPriorityLevel]},
		{"a controller's discovery", "karpless:interruption", []string{o.ControllersGroup}, "/version", uid[WorkloadFlowSchema], plc[WorkloadPriorityLevel]},
		{"the watcher's pods", "karpless:watcher", []string{WatcherGroup}, "/api/v1/pods?limit=1", uid[WorkloadFlowSchema], plc[WorkloadPriorityLevel]},
		{"the watcher's lease", "karpless:watcher", []string{WatcherGroup}, leasePath, uid[LeaderElectionFlowSchema], plc[LeaderElectionPriorityLevel]},
		{"a person's kubectl", "alice", nil, "/api/v1/pods?limit=1", string(globalDefault.UID), plc["global-default"]},
	} {
		fs, level := get(tc.user, tc.groups, tc.path)
		if fs != tc.fs || level != tc.level {
			t.Errorf("%s: classified in FlowSchema %q, level %q; want %q, %q", tc.what, fs, level, tc.fs, tc.level)
		}
	}

	if _, err := Uninstall(ctx, e.Clients, o); err != nil {
		t.Fatal(err)
	}
	for _, name := range FlowSchemas() {
		if _, err := fsAPI.Get(ctx, name, metav1.GetOptions{}); err == nil {
			t.Errorf("FlowSchema %s left after Uninstall", name)
		}
	}
}
