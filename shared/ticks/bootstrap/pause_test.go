package bootstrap

import (
	"testing"

	"context"
	"github.com/aws/aws-lambda-go/cfn"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/pause"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// TestPauseSwitchSurvivesDeploys: the first deploy creates the switch,
// not paused; a redeploy (an Update without Paused) leaves it as a person
// set it, paused or not; a deploy with Paused "true" turns it on. The
// controllers may read it and not write it.
func TestPauseSwitchSurvivesDeploys(t *testing.T) {
	e := kubetest.Need(t, env)
	reset(t, e.Clients)
	ctx := testCtx(t)
	// Each deploy writes the function's settings (PAUSED from -c paused)
	// and sends CloudFormation's request.
	deploy := func(typ cfn.RequestType, paused bool) {
		t.Helper()
		r := newRig(nil, func(c *HandlerConfig) {
			c.Engine = nil
			c.Options = Options{ClusterName: testCluster, NodeRoleName: "KarpenterNodeRole-" + testCluster, Pause: paused}
			c.Connect = func(context.Context) (*kube.Clients, error) { return e.Clients, nil }
		})
		if a := r.run(t, ctx, typ, PhysicalID(testCluster)); a.Status != "SUCCESS" {
			t.Fatalf("%s paused=%v: %+v", typ, paused, a)
		}
	}
	switchIs := func(when string, want bool) pause.State {
		t.Helper()
		st, err := pause.Read(ctx, e.Clients.Core.CoreV1(), DefaultNamespace)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if !st.Exists || st.Paused != want {
			t.Fatalf("%s: switch %+v, want exists and paused=%v", when, st, want)
		}
		return st
	}
	person := func(paused bool) {
		t.Helper()
		if _, err := pause.Set(ctx, e.Clients.Core.CoreV1(), DefaultNamespace, pause.Change{Paused: paused, By: "alice"}, nil); err != nil {
			t.Fatal(err)
		}
	}

	deploy(cfn.RequestCreate, false)
	switchIs("first deploy", false)

	person(true)
	deploy(cfn.RequestUpdate, false)
	if st := switchIs("redeploy after karpless pause", true); st.ChangedBy != "alice" {
		t.Errorf("the redeploy rewrote the switch: %+v", st)
	}

	person(false)
	deploy(cfn.RequestUpdate, false)
	switchIs("redeploy after karpless resume", false)

	deploy(cfn.RequestUpdate, true)
	if st := switchIs("deploy with -c paused=true", true); st.ChangedBy != "cdk deploy -c paused=true" {
		t.Errorf("changedBy %q", st.ChangedBy)
	}
	// The next deploy without the key leaves it paused.
	deploy(cfn.RequestUpdate, false)
	switchIs("redeploy without paused", true)

	// A first deploy with -c paused=true comes up paused.
	reset(t, e.Clients)
	deploy(cfn.RequestCreate, true)
	switchIs("first deploy with -c paused=true", true)

	// The controllers read it; they cannot change it.
	c := controllerClients(t, e, DefaultControllersGroup)
	if st, err := pause.Read(ctx, c.Core.CoreV1(), DefaultNamespace); err != nil || !st.Paused {
		t.Fatalf("read as the controllers: %+v, %v", st, err)
	}
	if _, err := pause.Set(ctx, c.Core.CoreV1(), DefaultNamespace, pause.Change{Paused: false, By: "a function"}, nil); !apierrors.IsForbidden(err) {
		t.Errorf("resume as the controllers: want Forbidden, got %v", err)
	}

	// Removing the stack removes the switch.
	deploy(cfn.RequestDelete, false)
	if st, err := pause.Read(ctx, e.Clients.Core.CoreV1(), DefaultNamespace); err != nil || st.Exists {
		t.Errorf("after Delete: %+v, %v", st, err)
	}
}
