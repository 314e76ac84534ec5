package emulatortest_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/emulator/emulatortest"
	"github.com/karpless/karpless/shared/local/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m, &env, kubetest.Options{Scheduler: true}))
}

const nodeConfig = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

# Karpenter Generated NodeConfig
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: karpless-local
    cidr: 10.100.0.0/16
  kubelet:
    config:
      maxPods: 29
      registerWithTaints:
      - effect: NoExecute
        key: karpenter.sh/unregistered
    flags:
    - --node-labels="karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=on-demand,karpenter.sh/nodepool=%s"

--//--
`

// TestFleetNodesPods launches a fleet and follows it into the cluster:
// instances become Nodes with a kubelet's labels and the user data's
// taints, turn Ready, run the pods the scheduler binds to them, finish
// deleted pods, and leave with their pods when terminated.
func TestFleetNodesPods(t *testing.T) {
	k := kubetest.Need(t, env)
	ns := k.Namespace(t)
	pool := kubetest.Name(t)
	ctx := context.Background()
	clk := emulatortest.FakeClock()
	e := emulatortest.New(t, k.Clients, clk)
	cfg := e.Config()
	c := ec2.NewFromConfig(emulatortest.CarefulAWSConfig(t, e, "provisioner"))
	core := k.Clients.Core.CoreV1()

	var image string
	for _, im := range e.Images() {
		if im.Family == "AL2023" && im.Arch == "x86_64" && im.Variant == "standard" && im.Release == emulator.CurrentEKSRelease {
			image = im.ID
		}
	}
	var subnets []ec2types.FleetLaunchTemplateOverridesRequest
	for _, s := range e.Subnets() {
		if s.Tags[wellknown.DiscoveryTagKey] != "" {
			subnets = append(subnets, ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: "m5.large", SubnetId: aws.String(s.ID), AvailabilityZone: aws.String(s.Zone)})
		}
	}
	ud := strings.ReplaceAll(nodeConfig, "%s", pool)
	if _, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("karpenter.k8s.aws/" + pool),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image), UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(ud)))},
	}); err != nil {
		t.Fatal(err)
	}
	// EC2 finds a new template by name after a while.
	emulatortest.Settle(t, e, clk)
	out, err := c.CreateFleet(ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant, ClientToken: aws.String("nodeclaim-" + pool),
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(2), DefaultTargetCapacityType: "on-demand"},
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("karpenter.k8s.aws/" + pool), Version: aws.String("$Latest")},
			Overrides:                   subnets,
		}},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: "instance", Tags: []ec2types.Tag{{Key: aws.String(wellknown.NodePoolTagKey), Value: aws.String(pool)}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, fi := range out.Instances {
		ids = append(ids, fi.InstanceIds...)
	}
	if len(ids) != 2 {
		t.Fatalf("launched %v, errors %+v", ids, out.Errors)
	}
	// A pending pod waits for the pool's nodes.
	pod := &corev1.Pod{
		// A Job's pods carry a tracking finalizer, released only once
		// the pod is in a terminal phase.
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Finalizers: []string{jobTracking}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{wellknown.NodePoolLabel: pool},
			TerminationGracePeriodSeconds: aws.Int64(30),
			Containers: []corev1.Container{{Name: "app", Image: "public.ecr.aws/nginx/nginx:1.27", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			}}},
		},
	}
	if _, err := core.Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	emulatortest.Step(t, e, clk, cfg.PendingDelay)
	if n := len(e.Instances(emulator.Running)); n != 2 {
		t.Fatalf("%d running instances", n)
	}
	emulatortest.Step(t, e, clk, cfg.JoinDelay)
	i, _ := e.Instance(ids[0])
	node, err := core.Nodes().Get(ctx, i.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node of %s: %v", ids[0], err)
	}
	it, _ := catalogGet("m5.large")
	wantAlloc, _ := it.Allocatable(catalog.NodeConfig{Family: catalog.FamilyAL2023, MaxPods: aws.Int32(29)})
	if node.Spec.ProviderID != "aws:///"+i.Zone+"/"+i.ID || node.Name != i.PrivateDNSName ||
		node.Labels[wellknown.NodePoolLabel] != pool || node.Labels[wellknown.InstanceTypeLabel] != "m5.large" ||
		node.Labels[wellknown.ZoneLabel] != i.Zone || node.Labels[wellknown.TopologyZoneIDLabel] != i.ZoneID ||
		node.Labels[wellknown.HostnameLabel] != node.Name || node.Labels[wellknown.ArchLabel] != "amd64" ||
		node.Annotations[emulator.InstanceIDAnnotation] != i.ID ||
		node.Status.Allocatable.Pods().Value() != 29 || !node.Status.Allocatable.Memory().Equal(*wantAlloc.Memory()) ||
		!hasTaint(node, wellknown.UnregisteredTaintKey) || !hasTaint(node, corev1.TaintNodeNotReady) || ready(node) {
		t.Errorf("registered node wrong: labels %v taints %v allocatable %v conditions %v", node.Labels, node.Spec.Taints, node.Status.Allocatable, node.Status.Conditions)
	}
	emulatortest.Step(t, e, clk, cfg.ReadyDelay)
	for _, id := range ids {
		i, _ := e.Instance(id)
		n, err := core.Nodes().Get(ctx, i.NodeName, metav1.GetOptions{})
		if err != nil || !ready(n) || hasTaint(n, corev1.TaintNodeNotReady) || !hasTaint(n, wellknown.UnregisteredTaintKey) {
			t.Fatalf("node %s after ReadyDelay: %v %v %v", i.NodeName, err, n.Status.Conditions, n.Spec.Taints)
		}
		// Registration (Karpless's job) lifts the unregistered taint.
		n.Spec.Taints = nil
		if _, err := core.Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The real scheduler binds the pod; the fake kubelet runs it.
	var bound *corev1.Pod
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := core.Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		bound = p
		return p.Spec.NodeName != "", nil
	}); err != nil {
		t.Fatalf("pod not scheduled: %v", err)
	}
	emulatortest.Step(t, e, clk, time.Second)
	p, err := core.Pods(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || !podReady(p) || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("pod on %s: %v %+v", bound.Spec.NodeName, err, p.Status)
	}
	// Deleting: the kubelet finishes termination after the grace period,
	// capped at PodGracePeriodCap on the clock.
	if err := core.Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	emulatortest.Step(t, e, clk, time.Second)
	if _, err := core.Pods(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("pod gone before its grace period: %v", err)
	}
	emulatortest.Step(t, e, clk, cfg.PodGracePeriodCap)
	finished(t, core, ns, "web", "")

	// Terminating an instance removes its Node and its pods.
	victim, _ := e.Instance(ids[1])
	stray := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: ns, Finalizers: []string{jobTracking}},
		Spec:       corev1.PodSpec{NodeName: victim.NodeName, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := core.Pods(ns).Create(ctx, stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	emulatortest.Step(t, e, clk, time.Second)
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[1:]}); err != nil {
		t.Fatal(err)
	}
	emulatortest.Step(t, e, clk, time.Second)
	if _, err := core.Nodes().Get(ctx, victim.NodeName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node of a terminated instance: %v", err)
	}
	finished(t, core, ns, "stray", "DeletionByPodGC")

	// ids[0] is referenced by no NodeClaim: a leak until one claims it.
	leaks, err := e.Leaks(ctx, k.Clients)
	if err != nil || len(leaks) != 1 || leaks[0].ID != ids[0] {
		t.Fatalf("leaks %v %v", leaks, err)
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: pool, Labels: map[string]string{wellknown.NodePoolLabel: pool}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
		},
	}
	created, err := k.Clients.NodeClaims.Create(ctx, nc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Clients.NodeClaims.Delete(context.Background(), pool, metav1.DeleteOptions{}) })
	first, _ := e.Instance(ids[0])
	created.Status.ProviderID = first.ProviderID()
	if _, err := k.Clients.NodeClaims.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	emulatortest.AssertNoLeaks(t, e, k.Clients)
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]}); err != nil {
		t.Fatal(err)
	}
	emulatortest.Step(t, e, clk, cfg.TerminateDelay)
	if n := len(e.Instances(emulator.NotTerminated)); n != 0 {
		t.Errorf("%d instances left", n)
	}
}

// TestStartLoop runs the world loop on the real clock, as `karpless local
// up` does, with short delays.
// TestStartLoop runs the world on the real clock: an instance becomes a
// Ready node, the fake kubelet runs a pod bound to it from its watch (no
// pod LIST once the watch has synced), and the node goes with the
// instance.
func TestStartLoop(t *testing.T) {
	k := kubetest.Need(t, env)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var podLists atomic.Int64
	counted := rest.CopyConfig(k.Clients.Config)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTrip(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods" && r.URL.Query().Get("watch") != "true" {
				podLists.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	kc, err := kube.NewClients(counted)
	if err != nil {
		t.Fatal(err)
	}
	e := emulatortest.New(t, kc, nil, func(c *emulator.Config) {
		c.PendingDelay, c.JoinDelay, c.ReadyDelay = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	})
	e.Start(ctx)
	c := ec2.NewFromConfig(emulatortest.CarefulAWSConfig(t, e, ""))
	var image string
	for _, im := range e.Images() {
		if im.Family == "Bottlerocket" && im.Arch == "arm64" && im.Variant == "standard" {
			image = im.ID
		}
	}
	out, err := c.RunInstances(ctx, &ec2.RunInstancesInput{
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: "m6g.large", ImageId: aws.String(image),
		UserData: aws.String(base64.StdEncoding.EncodeToString([]byte("[settings.kubernetes.node-labels]\n'team' = 'blue'\n"))),
	})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		i, _ := e.Instance(id)
		if i.NodeName == "" {
			return false, nil
		}
		n, err := k.Clients.Core.CoreV1().Nodes().Get(ctx, i.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return ready(n) && n.Labels["team"] == "blue" && n.Labels[wellknown.ArchLabel] == "arm64", nil
	}); err != nil {
		t.Fatalf("node never became ready: %v", err)
	}
	i, _ := e.Instance(id)
	ns := k.Namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: ns},
		Spec:       corev1.PodSpec{NodeName: i.NodeName, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := k.Clients.Core.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := k.Clients.Core.CoreV1().Pods(ns).Get(ctx, "bound", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		t.Fatalf("bound pod never ran: %v", err)
	}
	before := podLists.Load()
	time.Sleep(2 * time.Second) // ten steps of the loop, with a node and a pod
	if n := podLists.Load() - before; n != 0 {
		t.Errorf("the loop listed pods %d times in 2 s with its watch synced", n)
	}
	// EC2 may not know the instance yet (Hostility.DescribeLagMax, on the
	// real clock here): retry until it does, as a careful client would.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "InvalidInstanceID.NotFound" {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		i, _ := e.Instance(id)
		_, err := k.Clients.Core.CoreV1().Nodes().Get(ctx, i.NodeName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("node not removed: %v", err)
	}
}

func catalogGet(name string) (*catalog.InstanceType, bool) {
	c, err := catalog.Load()
	if err != nil {
		return nil, false
	}
	return c.Get(name)
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

const jobTracking = "batch.kubernetes.io/job-tracking"

// finished checks that a pod the kubelet (or, for a node gone, pod GC)
// ended is Failed and deleted, with the condition's reason if any, then
// releases its finalizer as the Job controller would, and sees it go.
func finished(t *testing.T, core corev1client.CoreV1Interface, ns, name, reason string) {
	t.Helper()
	ctx := context.Background()
	p, err := core.Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	if p.Status.Phase != corev1.PodFailed || p.DeletionTimestamp == nil || ptr.Deref(p.DeletionGracePeriodSeconds, -1) != 0 {
		t.Errorf("pod %s ended as %s (deleting %v, grace %v), want Failed and deleted for good", name, p.Status.Phase, p.DeletionTimestamp, ptr.Deref(p.DeletionGracePeriodSeconds, -1))
	}
	if reason != "" && !slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.DisruptionTarget && c.Reason == reason
	}) {
		t.Errorf("pod %s conditions %v, want DisruptionTarget %s", name, p.Status.Conditions, reason)
	}
	p.Finalizers = nil
	if _, err := core.Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Pods(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod %s still there once its finalizer is gone: %v", name, err)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
