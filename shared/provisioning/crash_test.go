package provisioning_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/awsconfig"
	"github.com/karpless/karpless/shared/config"
	"github.com/karpless/karpless/shared/ice"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/lifecycle"
	"github.com/karpless/karpless/shared/localaws"
	"github.com/karpless/karpless/shared/localrun"
	"github.com/karpless/karpless/shared/localrun/localruntest"
	"github.com/karpless/karpless/shared/pricing"
	"github.com/karpless/karpless/shared/provisioning"
	"github.com/karpless/karpless/shared/wellknown"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

type killRT struct {
	next http.RoundTripper
	k    *localruntest.KillSwitch
}

func (r killRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		return r.next.RoundTrip(req) // Kubernetes reads change nothing
	}
	return r.k.Do("kube "+req.Method+" "+req.URL.Path, func() (*http.Response, error) { return r.next.RoundTrip(req) })
}

type killHTTP struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	k *localruntest.KillSwitch
}

func (c killHTTP) Do(req *http.Request) (*http.Response, error) {
	desc := "aws " + req.Header.Get("X-Amz-Target")
	if desc == "aws " {
		desc = "aws " + req.URL.Path
	}
	return c.k.Do(desc, func() (*http.Response, error) { return c.next.Do(req) })
}

// killableEnv is the provisioner's environment with both edges behind k.
func killableEnv(t *testing.T, w *localruntest.World, emu *localaws.Emulator, k *localruntest.KillSwitch) *app.Env {
	t.Helper()
	restCfg := rest.CopyConfig(w.E.Cluster.RESTConfig)
	if k != nil {
		restCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return killRT{next: rt, k: k} })
	}
	kc, err := kube.NewClients(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := localrun.NewEnv(emu, kc, localrun.Options{MaxAttempts: 1, Configure: func(c *config.Config) { c.WatchWindow = 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if k != nil {
		cfg := a.AWS.Config.Copy()
		cfg.HTTPClient = killHTTP{next: cfg.HTTPClient, k: k}
		a.AWS = awsconfig.NewClients(cfg)
	}
	return a
}

// resetWorld gives a scenario an empty account (same seed, so the same
// subnet and image ids) and a cluster with no NodeClaims or Karpless state.
func resetWorld(t *testing.T, w *localruntest.World) *localaws.Emulator {
	t.Helper()
	ctx := context.Background()
	for _, nc := range w.Claims() {
		nc.Finalizers = nil
		_, _ = w.E.Clients.NodeClaims.Update(ctx, &nc, metav1.UpdateOptions{})
		_ = w.E.Clients.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{})
	}
	_ = w.E.Clients.EC2NodeClasses.Delete(ctx, "default", metav1.DeleteOptions{})
	cms := w.E.Clients.Core.CoreV1().ConfigMaps(config.DefaultNamespace)
	_ = cms.Delete(ctx, ice.ConfigMapName, metav1.DeleteOptions{})
	_ = cms.Delete(ctx, pricing.ConfigMapName, metav1.DeleteOptions{})
	_ = w.E.Clients.Core.CoordinationV1().Leases(config.DefaultNamespace).Delete(ctx, provisioning.LeaseName, metav1.DeleteOptions{})
	emu, err := localaws.New(localaws.Config{ClusterName: localruntest.Cluster, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	// DescribeCluster answers with the API server, but no instance joins:
	// pods stay pending and each scenario stays fast.
	ca, err := os.ReadFile(w.E.Cluster.RESTConfig.TLSClientConfig.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := emu.ConnectCluster(nil, w.E.Cluster.RESTConfig.Host, ca); err != nil {
		t.Fatal(err)
	}
	if err := localrun.Apply(ctx, w.E.Clients, localrun.DefaultNodeClass(localruntest.Cluster, "")); err != nil {
		t.Fatal(err)
	}
	return emu
}

type outcome struct {
	claims, launched, liveInstances int
	problems                        []string
}

func inspect(w *localruntest.World, emu *localaws.Emulator) outcome {
	var o outcome
	byID := map[string]string{}
	for _, nc := range w.Claims() {
		o.claims++
		if lifecycle.IsTrue(&nc, karpv1.ConditionTypeLaunched) {
			o.launched++
		}
		if id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID); id != "" {
			if other, dup := byID[id]; dup {
				o.problems = append(o.problems, fmt.Sprintf("instance %s claimed by %s and %s", id, other, nc.Name))
			}
			byID[id] = nc.Name
		}
	}
	for _, i := range emu.Instances(func(i localaws.Instance) bool { return i.State == "pending" || i.State == "running" }) {
		o.liveInstances++
		if _, ok := byID[i.ID]; !ok {
			o.problems = append(o.problems, fmt.Sprintf("leaked instance %s tagged %s", i.ID, i.Tags[wellknown.NodeClaimTagKey]))
		}
	}
	return o
}

// TestKilledTickThenFreshTick kills the provisioner tick before and after
// each of its external calls in turn; a fresh tick must then leave exactly
// the instances an undisturbed tick launches, no leaked instance and no
// duplicate NodeClaim.
func TestKilledTickThenFreshTick(t *testing.T) {
	w := localruntest.New(t, env, "provisioner")
	ctx := context.Background()
	if err := localrun.Apply(ctx, w.E.Clients, nil, localrun.DefaultNodePool("default")); err != nil {
		t.Fatal(err)
	}
	// Two pods that must not share a node: two NodeClaims per tick.
	w.Pods("web", 2, "1", func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: wellknown.HostnameLabel, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		}}}}
	})
	w.WaitUnschedulable(2)

	// The undisturbed tick: how many calls, and what it achieves.
	emu := resetWorld(t, w)
	counter := &localruntest.KillSwitch{}
	if _, err := killableEnv(t, w, emu, counter).Provisioner().Run(ctx, "baseline"); err != nil {
		t.Fatal(err)
	}
	base := inspect(w, emu)
	if base.claims != 2 || base.launched != 2 || base.liveInstances != 2 || len(base.problems) > 0 {
		t.Fatalf("undisturbed tick: %+v", base)
	}
	calls := counter.Calls()
	t.Logf("an undisturbed tick makes %d external calls (Kubernetes writes and AWS calls)", len(calls))

	for at := 1; at <= len(calls); at++ {
		for _, after := range []bool{false, true} {
			when := "before"
			if after {
				when = "after"
			}
			name := fmt.Sprintf("%s call %d (%s)", when, at, calls[at-1])
			emu := resetWorld(t, w)
			k := &localruntest.KillSwitch{At: at, After: after}
			start := time.Now()
			_, _ = killableEnv(t, w, emu, k).Provisioner().Run(ctx, fmt.Sprintf("killed-%d-%s", at, when))
			if !k.Dead() {
				t.Errorf("%s: the kill point was never reached (%d calls)", name, len(k.Calls()))
				continue
			}
			// The dead tick's lease would expire before the next scheduled
			// tick; remove it rather than wait 30 s.
			_ = w.E.Clients.Core.CoordinationV1().Leases(config.DefaultNamespace).Delete(ctx, provisioning.LeaseName, metav1.DeleteOptions{})
			if _, err := killableEnv(t, w, emu, nil).Provisioner().Run(ctx, fmt.Sprintf("fresh-%d-%s", at, when)); err != nil {
				t.Errorf("%s: fresh tick: %v", name, err)
			}
			got := inspect(w, emu)
			if len(got.problems) > 0 || got.claims != base.claims || got.launched != base.launched || got.liveInstances != base.liveInstances {
				t.Errorf("%s: after a fresh tick %d claims (%d launched), %d live instances, problems %v; want %d/%d/%d",
					name, got.claims, got.launched, got.liveInstances, got.problems, base.claims, base.launched, base.liveInstances)
			}
			if testing.Verbose() {
				t.Logf("%s: ok in %s", name, time.Since(start).Round(time.Millisecond))
			}
		}
	}
}
