package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/controlplane"
	"github.com/karpless/karpless/shared/ticks/disrupt"
	"github.com/karpless/karpless/shared/ticks/provision"
)

// The bounds TestLocalUpRunsFunctions holds `local up` to, with the
// schedules every 2 s instead of every minute. The emulator is as hostile
// as AWS: the first launch waits for IAM to propagate the new instance
// profile (5-20 s), and calls are throttled.
const (
	testScheduleRate = 2 * time.Second
	// From the Deployment's creation to every replica Running on a node
	// Karpless launched.
	deploymentRunningWithin = 90 * time.Second
	// From the interruption event's sending to its NodeClaim deleting.
	interruptionHandledWithin = 30 * time.Second
)

// TestLocalUpRunsFunctions shows `local up` behaving like a deployment:
// `kubectl apply` of a Deployment leads to its pods Running on new nodes
// with no `local tick` (the provisioner runs on its schedule), and an
// interruption event sent to the queue is handled with no `local tick`
// (the event source mapping feeds the interruption function).
func TestLocalUpRunsFunctions(t *testing.T) {
	kc, dir, stop := startLocalUp(t, testScheduleRate)
	defer stop()
	ctx := context.Background()

	replicas := int32(3)
	labels := map[string]string{"app": "inflate"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				}}}},
			},
		},
	}
	applied := time.Now()
	if _, err := kc.Core.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var running []corev1.Pod
	for {
		running = runningOnKarplessNodes(ctx, t, kc, labels)
		if len(running) == int(replicas) {
			break
		}
		if time.Since(applied) > deploymentRunningWithin {
			claims, _ := kc.NodeClaims.List(ctx, metav1.ListOptions{})
			t.Fatalf("%d of %d pods Running on Karpless nodes %s after the Deployment was created; %d NodeClaims", len(running), replicas, deploymentRunningWithin, len(claims.Items))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("the Deployment's %d pods Running on Karpless nodes %s after its creation, without a manual tick", replicas, time.Since(applied).Round(100*time.Millisecond))

	// An interruption: the mapping drains the queue into the function,
	// which deletes the instance's NodeClaim.
	node, err := kc.Core.CoreV1().Nodes().Get(ctx, running[0].Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := node.Spec.ProviderID[strings.LastIndex(node.Spec.ProviderID, "/")+1:]
	sent := time.Now()
	code, out, errs := runCLI(ctx, "local", "inject", "spot-interruption", id, "--terminate-after", "0", "--dir", dir)
	if code != 0 {
		t.Fatalf("inject: exit %d\n%s\n%s", code, out, errs)
	}
	for {
		l, err := kc.NodeClaims.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(l.Items, func(nc karpv1.NodeClaim) bool {
			return nc.Status.NodeName == node.Name && nc.DeletionTimestamp != nil
		}) {
			break
		}
		if time.Since(sent) > interruptionHandledWithin {
			t.Fatalf("the NodeClaim of %s (%s) is not deleting %s after its spot interruption was sent", node.Name, id, interruptionHandledWithin)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("the interruption of %s handled %s after it was sent, without a manual tick", id, time.Since(sent).Round(100*time.Millisecond))

	upOut := stop()
	for _, want := range []string{"scheduled", "function=" + provisionerName(), "rate=" + testScheduleRate.String(), "draining the interruption queue", `"msg":"interruption batch done","function":"interruption"`} {
		if !strings.Contains(upOut, want) {
			t.Errorf("the output of local up lacks %q", want)
		}
	}
	if strings.Contains(upOut, "still running 30 s after") {
		t.Errorf("invocations did not end when local up stopped:\n%s", upOut)
	}
}

func provisionerName() string { return schedules[0].name }

// runningOnKarplessNodes lists the pods matching labels that run on a
// node of a NodeClaim.
func runningOnKarplessNodes(ctx context.Context, t *testing.T, kc *kube.Clients, labels map[string]string) []corev1.Pod {
	t.Helper()
	pods, err := kc.Core.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: labels})})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := kc.NodeClaims.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, nc := range claims.Items {
		if nc.Status.NodeName != "" {
			nodes[nc.Status.NodeName] = true
		}
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && nodes[p.Spec.NodeName] {
			out = append(out, p)
		}
	}
	return out
}

// assertNothingRan checks that no function ran by itself: none took its
// lease, and there is no NodeClaim.
func assertNothingRan(ctx context.Context, t *testing.T, kc *kube.Clients) {
	t.Helper()
	for _, name := range []string{provision.LeaseName, disrupt.LeaseName} {
		if l, err := kc.Core.CoordinationV1().Leases(config.DefaultNamespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("lease %s exists (held by %v, error %v): a function ran with its trigger off", name, l.Spec.HolderIdentity, err)
		}
	}
	l, err := kc.NodeClaims.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 0 {
		t.Errorf("%d NodeClaims with the functions' triggers off and no tick", len(l.Items))
	}
}

// assertStopReleasesLeases runs the schedules of the environment in dir
// until a provisioner invocation holds its lease, stops them, and checks
// that the stop cancelled that invocation and that it released its lease,
// as Ctrl-C of `local up` does before the control plane stops. A pod no
// instance type fits keeps the invocation watching for its whole window
// (50 s), so the stop finds it in flight.
func assertStopReleasesLeases(ctx context.Context, t *testing.T, dir string, kc *kube.Clients) {
	t.Helper()
	st, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	huge := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "too-big", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10000")},
		}}}},
	}
	if _, err := kc.Core.CoreV1().Pods("default").Create(ctx, huge, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rt := newLambdaRuntime(st, "warn", io.Discard, io.Discard, slog.New(slog.DiscardHandler))
	stop, err := rt.runLambdas(ctx, activeSchedules(config.ResponsivenessEconomy), false, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	holder := func() string {
		l, err := kc.Core.CoordinationV1().Leases(config.DefaultNamespace).Get(ctx, provision.LeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	for deadline := time.Now().Add(30 * time.Second); holder() == ""; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			stop()
			t.Fatal("no scheduled provisioner invocation took its lease in 30 s")
		}
	}
	// The invocation that holds it watches until its window ends.
	time.Sleep(time.Second)
	held := holder()
	if held == "" {
		t.Fatal("the provisioner invocation did not keep its lease while a pod was pending")
	}
	began := time.Now()
	stop()
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("stopping the schedules took %s: the invocation in flight was not cancelled", took)
	}
	if h := holder(); h != "" {
		t.Errorf("the provisioning lease is still held by %s after the schedules stopped (held by %s before)", h, held)
	}
	t.Logf("stopping the schedules took %s; invocation %s released its lease", time.Since(began).Round(time.Millisecond), held)
}

// startLocalUp runs `local up` (all its defaults: the functions on their
// triggers) with the schedules every rate, and waits until it is up. stop
// cancels it, as Ctrl-C does, and returns its output once it has ended.
func startLocalUp(t *testing.T, rate time.Duration, args ...string) (*kube.Clients, string, func() string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a control plane")
	}
	if _, err := controlplane.FindBinDir(); err != nil {
		if os.Getenv("KARPLESS_REQUIRE_KUBE") == "1" || !errors.Is(err, controlplane.ErrNotBuilt) {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Setenv(ScheduleRateEnv, rate.String())
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	upDone := make(chan string, 1)
	go func() {
		code, out, errs := runCLI(ctx, append([]string{"local", "up", "--dir", dir}, args...)...)
		upDone <- strings.Join([]string{"exit " + strconv.Itoa(code), out, errs}, "\n")
	}()
	var result string
	stopped := false
	stop := func() string {
		if stopped {
			return result
		}
		stopped = true
		cancel()
		select {
		case result = <-upDone:
		case <-time.After(time.Minute):
			t.Error("local up did not stop in a minute")
		}
		if t.Failed() {
			t.Logf("local up:\n%s", result)
		}
		return result
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if _, err := readState(dir); err == nil {
			break
		}
		select {
		case out := <-upDone:
			cancel()
			t.Fatalf("local up ended early:\n%s", out)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatal("local up did not come up in 2 minutes")
		}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		stop()
		t.Fatal(err)
	}
	kc, err := kube.NewClients(rc)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	return kc, dir, stop
}
