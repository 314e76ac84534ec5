package provisioning_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/config"
	"github.com/karpless/karpless/shared/ice"
	"github.com/karpless/karpless/shared/pricing"
	"github.com/karpless/karpless/shared/provisioning"
	"github.com/karpless/karpless/shared/kube/kubetest"
	"github.com/karpless/karpless/shared/lifecycle"
	"github.com/karpless/karpless/shared/localaws"
	"github.com/karpless/karpless/shared/localrun"
	"github.com/karpless/karpless/shared/podutil"
	"github.com/karpless/karpless/shared/wellknown"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m, &env, kubetest.Options{Scheduler: true}))
}

// world is one scenario's emulator and engines on the package's API server.
type world struct {
	t   *testing.T
	e   *kubetest.Env
	emu *localaws.Emulator
	app *app.Env
	ns  string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	e := kubetest.Need(t, env)
	emu, err := localaws.New(localaws.Config{
		ClusterName:  "karpless-test",
		PendingDelay: 300 * time.Millisecond, JoinDelay: 300 * time.Millisecond, ReadyDelay: 300 * time.Millisecond,
		TerminateDelay: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	if err := emu.ConnectCluster(e.Clients, "", nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	emu.Start(ctx)
	a, err := localrun.NewEnv(emu, e.Clients, localrun.Options{MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, e: e, emu: emu, app: a, ns: e.Namespace(t)}
}

func (w *world) pods(n int, cpu string, mutate func(*corev1.Pod)) []*corev1.Pod {
	w.t.Helper()
	var out []*corev1.Pod
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i), Namespace: w.ns, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}},
		}
		if mutate != nil {
			mutate(p)
		}
		created, err := w.e.Clients.Core.CoreV1().Pods(w.ns).Create(context.Background(), p, metav1.CreateOptions{})
		if err != nil {
			w.t.Fatal(err)
		}
		out = append(out, created)
	}
	return out
}

// waitUnschedulable waits until kube-scheduler has marked every pod of the
// namespace unschedulable (what the provisioner acts on).
func (w *world) waitUnschedulable(n int) {
	w.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := w.e.Clients.Core.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		c := 0
		for i := range l.Items {
			if podutil.IsUnschedulable(&l.Items[i]) {
				c++
			}
		}
		return c >= n, nil
	})
	if err != nil {
		w.t.Fatalf("pods not marked unschedulable: %v", err)
	}
}

// converge runs provisioner passes until every pod of the namespace runs.
func (w *world) converge(timeout time.Duration) {
	w.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := w.app.Provisioner().Pass(ctx); err != nil {
			w.t.Logf("pass: %v", err)
		}
		l, err := w.e.Clients.Core.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			w.t.Fatal(err)
		}
		running := 0
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running == len(l.Items) {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%d of %d pods running after %s", running, len(l.Items), timeout)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (w *world) claims() []karpv1.NodeClaim {
	l, err := w.e.Clients.NodeClaims.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return l.Items
}

// assertNoLeaks checks that every live instance of the cluster belongs to
// exactly one live NodeClaim and every launched claim has its instance.
func (w *world) assertNoLeaks() {
	w.t.Helper()
	byID := map[string]string{}
	for _, nc := range w.claims() {
		if id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID); id != "" {
			if other, dup := byID[id]; dup {
				w.t.Errorf("instance %s claimed by %s and %s", id, other, nc.Name)
			}
			byID[id] = nc.Name
		}
	}
	live := w.emu.Instances(func(i localaws.Instance) bool { return i.State == "pending" || i.State == "running" })
	for _, i := range live {
		if _, ok := byID[i.ID]; !ok {
			w.t.Errorf("leaked instance %s (%s, tags %v)", i.ID, i.InstanceType, i.Tags)
		}
	}
	if len(live) != len(byID) {
		w.t.Errorf("%d live instances for %d launched NodeClaims", len(live), len(byID))
	}
}

func cleanupCluster(t *testing.T, w *world) {
	t.Cleanup(func() {
		ctx := context.Background()
		// No kube-controller-manager runs here, so a deleted namespace never
		// empties: remove the pods, or the next test would provision for them.
		_ = w.e.Clients.Core.CoreV1().Pods(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}, metav1.ListOptions{})
		for _, nc := range w.claims() {
			nc.Finalizers = nil
			_, _ = w.e.Clients.NodeClaims.Update(ctx, &nc, metav1.UpdateOptions{})
			_ = w.e.Clients.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{})
		}
		nodes, _ := w.e.Clients.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, n := range nodes.Items {
			n.Finalizers = nil
			_, _ = w.e.Clients.Core.CoreV1().Nodes().Update(ctx, &n, metav1.UpdateOptions{})
			_ = w.e.Clients.Core.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		}
		_ = w.e.Clients.NodePools.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = w.e.Clients.EC2NodeClasses.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		cms := w.e.Clients.Core.CoreV1().ConfigMaps(config.DefaultNamespace)
		_ = cms.Delete(ctx, ice.ConfigMapName, metav1.DeleteOptions{})
		_ = cms.Delete(ctx, pricing.ConfigMapName, metav1.DeleteOptions{})
		_ = w.e.Clients.Core.CoordinationV1().Leases(config.DefaultNamespace).Delete(ctx, provisioning.LeaseName, metav1.DeleteOptions{})
	})
}

func TestPendingPodsBecomeRunningOnNewNodes(t *testing.T) {
	w := newWorld(t)
	cleanupCluster(t, w)
	ctx := context.Background()
	if err := localrun.Apply(ctx, w.e.Clients, localrun.DefaultNodeClass("karpless-test", ""), localrun.DefaultNodePool("default")); err != nil {
		t.Fatal(err)
	}
	w.pods(12, "1", nil)
	w.waitUnschedulable(12)
	start := time.Now()
	w.converge(90 * time.Second)
	t.Logf("12 pending pods running on new nodes after %s", time.Since(start).Round(100*time.Millisecond))

	claims := w.claims()
	if len(claims) == 0 {
		t.Fatal("no NodeClaims")
	}
	for _, nc := range claims {
		for _, c := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, karpv1.ConditionTypeReady} {
			if !lifecycle.IsTrue(&nc, c) {
				t.Errorf("nodeclaim %s: %s is not true", nc.Name, c)
			}
		}
		for _, l := range []string{wellknown.NodePoolLabel, wellknown.InstanceTypeLabel, wellknown.ZoneLabel, wellknown.CapacityTypeLabel} {
			if nc.Labels[l] == "" {
				t.Errorf("nodeclaim %s has no %s label", nc.Name, l)
			}
		}
	}
	if got := w.emu.CallCount("CreateFleet"); got != len(claims) {
		t.Errorf("%d CreateFleet calls for %d NodeClaims", got, len(claims))
	}
	w.assertNoLeaks()
	for _, i := range w.emu.Instances(nil) {
		for _, k := range []string{wellknown.ClusterTagKey("karpless-test"), wellknown.NodePoolTagKey, wellknown.EKSClusterNameTagKey, wellknown.NodeClaimTagKey, wellknown.EC2NodeClassTagKey, wellknown.NameTagKey} {
			if _, ok := i.Tags[k]; !ok {
				t.Errorf("instance %s lacks tag %s: %v", i.ID, k, i.Tags)
			}
		}
	}
}
