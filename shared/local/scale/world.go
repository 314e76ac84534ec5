// Package scale builds clusters of thousands of nodes on the local API
// server and the emulator, for the functions' scale benchmarks. Launching
// that many nodes through the provisioner would take hours on a test
// machine; instead one node is provisioned for real and then cloned: its
// instance in the emulator, its NodeClaim and its Node (a plain object, no
// kubelet behind it), each clone with its own name, address and zone. Pods
// are written bound and Running, owned by ReplicaSets, as a settled
// cluster's are.
package scale

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/eksauth"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
)

// Cluster is the emulated cluster's name.
const Cluster = "karpless-scale"

// InstanceType is the only type the pool allows: with every node of one
// type, packed to its allocatable CPU, no consolidation can pay, so a
// steady cluster stays as built.
const InstanceType = "m5.xlarge"

// setupWorkers is how many writes the builder keeps in flight: the local
// API server on a shared 2-core machine is saturated well before that.
const setupWorkers = 32

// Options size the cluster.
type Options struct {
	Nodes, Pods int
	// Namespace holds the pods (created if missing).
	Namespace string
	// Log receives the builder's progress.
	Log *slog.Logger
}

// World is a built cluster and the engines that act on it.
type World struct {
	Emu *emulator.Emulator
	// App builds the functions' engines; its Kubernetes clients have the
	// deployed rate limits (eksauth.DefaultQPS and DefaultBurst).
	App *app.Env
	// Setup is an unthrottled client for the benchmark's own writes.
	Setup     *kube.Clients
	Namespace string
	// Instances are the nodes' instances, the template's first.
	Instances []emulator.Instance
	// PodCPU is each pod's CPU request.
	PodCPU resource.Quantity
}

// Build provisions one node through the provisioner, clones it to
// o.Nodes, and writes o.Pods pods spread evenly over them. cfg is the
// local API server's (its QPS is raised for the setup only).
func Build(ctx context.Context, cfg *rest.Config, o Options) (*World, error) {
	if o.Nodes <= 0 || o.Pods%o.Nodes != 0 {
		return nil, fmt.Errorf("scale: %d pods do not spread evenly over %d nodes", o.Pods, o.Nodes)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	setupCfg := rest.CopyConfig(cfg)
	setupCfg.QPS, setupCfg.Burst = 2000, 4000
	setup, err := kube.NewClients(setupCfg)
	if err != nil {
		return nil, err
	}
	engineCfg := rest.CopyConfig(cfg)
	engineCfg.QPS, engineCfg.Burst = eksauth.DefaultQPS, eksauth.DefaultBurst // as deployed
	engine, err := kube.NewClients(engineCfg)
	if err != nil {
		return nil, err
	}
	hostility := emulator.NoHostility()
	emu, err := emulator.New(emulator.Config{
		ClusterName: Cluster, Hostility: &hostility,
		PendingDelay: 100 * time.Millisecond, JoinDelay: 100 * time.Millisecond, ReadyDelay: 100 * time.Millisecond,
		TerminateDelay: time.Second, PodGracePeriodCap: time.Second,
	})
	if err != nil {
		return nil, err
	}
	if err := emu.ConnectCluster(setup, "", nil); err != nil {
		emu.Close()
		return nil, err
	}
	emu.Start(ctx)
	a, err := deploy.NewEnv(emu, engine, deploy.Options{Identity: "provisioner"})
	if err != nil {
		emu.Close()
		return nil, err
	}
	w := &World{Emu: emu, App: a, Setup: setup, Namespace: o.Namespace}
	if err := w.build(ctx, o); err != nil {
		emu.Close()
		return nil, err
	}
	return w, nil
}

// Close stops the emulator. The API server's objects stay (the package's
// control plane goes with the test binary).
func (w *World) Close() { w.Emu.Close() }

func (w *World) build(ctx context.Context, o Options) error {
	start := time.Now()
	pool := deploy.DefaultNodePool("default", karpv1.NodeSelectorRequirementWithMinValues{
		Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{InstanceType},
	})
	// Every node is a consolidation candidate at once, so a full pass
	// evaluates them all.
	pool.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	pool.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	if err := deploy.Apply(ctx, w.Setup, deploy.DefaultNodeClass(Cluster, ""), pool); err != nil {
		return err
	}
	if err := w.namespace(ctx); err != nil {
		return err
	}
	claim, node, err := w.provisionTemplate(ctx)
	if err != nil {
		return err
	}
	// From here on nothing is launched through the emulator's kubelet:
	// its loop would step five times a second over 50,000 watched pods.
	w.Emu.Stop()
	o.Log.Info("template node provisioned", "node", node.Name, "after", time.Since(start).Round(time.Second))
	tmpl, ok := w.Emu.Instance(instanceID(node))
	if !ok {
		return fmt.Errorf("scale: the template node %s has no instance", node.Name)
	}
	names := make([]string, o.Nodes-1)
	tags := make([]map[string]string, o.Nodes-1)
	for k := range names {
		names[k] = fmt.Sprintf("%s-s%05d", pool.Name, k+1)
		tags[k] = map[string]string{wellknown.NodeClaimTagKey: names[k], "Name": names[k]}
	}
	clones, err := w.Emu.CloneInstances(tmpl.ID, tags)
	if err != nil {
		return err
	}
	w.Instances = append([]emulator.Instance{tmpl}, clones...)
	nodeNames := []string{node.Name}
	for _, c := range clones {
		nodeNames = append(nodeNames, c.PrivateDNSName)
	}
	err = parallel(ctx, len(clones), func(ctx context.Context, k int) error {
		return w.cloneNode(ctx, claim, node, names[k], clones[k])
	})
	if err != nil {
		return err
	}
	o.Log.Info("nodes cloned", "nodes", o.Nodes, "after", time.Since(start).Round(time.Second))
	perNode := o.Pods / o.Nodes
	alloc := node.Status.Allocatable[corev1.ResourceCPU]
	// Packed to the last millicore a pod's share allows: no node's pods
	// fit in the room left on the others.
	w.PodCPU = *resource.NewMilliQuantity(alloc.MilliValue()/int64(perNode), resource.DecimalSI)
	if err := w.writePods(ctx, nodeNames, perNode); err != nil {
		return err
	}
	o.Log.Info("pods written", "pods", o.Pods, "after", time.Since(start).Round(time.Second))
	return nil
}

func (w *World) namespace(ctx context.Context) error {
	core := w.Setup.Core.CoreV1()
	_, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", w.Namespace, err)
	}
	// No controller manager runs here to create it, and admission wants it.
	_, err = core.ServiceAccounts(w.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default service account: %w", err)
	}
	return nil
}

// provisionTemplate runs provisioner ticks on one pending pod until the
// NodeClaim it gets is initialized, and deletes the pod.
func (w *World) provisionTemplate(ctx context.Context) (*karpv1.NodeClaim, *corev1.Node, error) {
	pods := w.Setup.Core.CoreV1().Pods(w.Namespace)
	seed := PendingPod("seed", resource.MustParse("1"), nil)
	created, err := pods.Create(ctx, seed, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the seed pod: %w", err)
	}
	if err := markUnschedulable(ctx, w.Setup, created); err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := w.App.Provisioner().Run(tctx, "scale-setup")
		cancel()
		if err != nil && ctx.Err() != nil {
			return nil, nil, err
		}
		l, err := w.Setup.NodeClaims.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, err
		}
		for i := range l.Items {
			c := &l.Items[i]
			if c.IsTrue(karpv1.ConditionTypeInitialized) && c.Status.NodeName != "" {
				n, err := w.Setup.Core.CoreV1().Nodes().Get(ctx, c.Status.NodeName, metav1.GetOptions{})
				if err != nil {
					return nil, nil, err
				}
				if err := pods.Delete(ctx, seed.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil && !apierrors.IsNotFound(err) {
					return nil, nil, err
				}
				return c, n, nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return nil, nil, errors.New("scale: the template node was not initialized within 3 minutes")
}

// cloneNode writes the NodeClaim and Node of a cloned instance: copies of
// the template's, renamed, in the instance's zone.
func (w *World) cloneNode(ctx context.Context, claim *karpv1.NodeClaim, node *corev1.Node, name string, inst emulator.Instance) error {
	zoned := func(labels map[string]string) {
		if _, ok := labels[wellknown.ZoneLabel]; ok {
			labels[wellknown.ZoneLabel] = inst.Zone
		}
		if _, ok := labels[wellknown.TopologyZoneIDLabel]; ok {
			labels[wellknown.TopologyZoneIDLabel] = inst.ZoneID
		}
	}
	c := claim.DeepCopy()
	c.ObjectMeta = metav1.ObjectMeta{
		Name: name, Labels: c.Labels, Annotations: c.Annotations, Finalizers: c.Finalizers, OwnerReferences: c.OwnerReferences,
	}
	zoned(c.Labels)
	status := c.Status
	status.ProviderID, status.NodeName = inst.ProviderID(), inst.PrivateDNSName
	got, err := w.Setup.NodeClaims.Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating nodeclaim %s: %w", name, err)
	}
	got.Status = status
	if got, err = w.Setup.NodeClaims.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the status of nodeclaim %s: %w", name, err)
	}
	n := node.DeepCopy()
	n.ObjectMeta = metav1.ObjectMeta{
		Name: inst.PrivateDNSName, Labels: n.Labels, Annotations: n.Annotations, Finalizers: n.Finalizers,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: got.Name, UID: got.UID, BlockOwnerDeletion: new(true),
		}},
	}
	zoned(n.Labels)
	n.Labels[wellknown.HostnameLabel] = inst.PrivateDNSName
	n.Annotations[emulator.InstanceIDAnnotation] = inst.ID
	n.Spec.ProviderID = inst.ProviderID()
	nstatus := n.Status
	nstatus.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: inst.PrivateIP},
		{Type: corev1.NodeInternalDNS, Address: inst.PrivateDNSName},
		{Type: corev1.NodeHostName, Address: inst.PrivateDNSName},
	}
	made, err := w.Setup.Core.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating node %s: %w", n.Name, err)
	}
	made.Status = nstatus
	if _, err := w.Setup.Core.CoreV1().Nodes().UpdateStatus(ctx, made, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the status of node %s: %w", n.Name, err)
	}
	return nil
}

// Settle runs disruption passes, with the unthrottled client, until the
// NodeClaims' disruption status (conditions, pod event times and
// fingerprints) is written and a pass finds nothing to change: a settled
// cluster's claims carry it already, and writing it for thousands of
// claims at the deployed rate would take minutes.
func (w *World) Settle(ctx context.Context) error {
	fast, err := deploy.NewEnv(w.Emu, w.Setup, deploy.Options{Identity: "provisioner"})
	if err != nil {
		return err
	}
	// Each pass writes for at most timing.StatusWriteBudget: thousands of
	// claims take a few passes on a loaded machine.
	for range 40 {
		s, err := fast.Disrupter().Run(ctx, "scale-settle")
		if err != nil {
			return fmt.Errorf("settling: %w", err)
		}
		if len(s.Commands) > 0 {
			return fmt.Errorf("settling: the built cluster was disrupted: %+v", s.Commands)
		}
		if s.StatusUpdates == 0 && s.StatusLeft == 0 {
			return nil
		}
	}
	return errors.New("settling: the claims' status still changes after 40 passes")
}

// podsPerReplicaSet groups the pods under owners, as Deployments do.
const podsPerReplicaSet = 100

// writePods writes perNode pods on each node, bound and Running, owned by
// ReplicaSets (of Deployments) of podsPerReplicaSet pods each.
func (w *World) writePods(ctx context.Context, nodes []string, perNode int) error {
	total := len(nodes) * perNode
	sets := (total + podsPerReplicaSet - 1) / podsPerReplicaSet
	owners := make([]metav1.OwnerReference, sets)
	err := parallel(ctx, sets, func(ctx context.Context, k int) error {
		ref, err := w.replicaSet(ctx, fmt.Sprintf("web-%04d", k))
		owners[k] = ref
		return err
	})
	if err != nil {
		return err
	}
	now := metav1.Now()
	return parallel(ctx, total, func(ctx context.Context, k int) error {
		owner := owners[k/podsPerReplicaSet]
		p := PendingPod(fmt.Sprintf("%s-%05d", owner.Name, k%podsPerReplicaSet), w.PodCPU, nil)
		p.Labels["app"] = owner.Name
		p.OwnerReferences = []metav1.OwnerReference{owner}
		// Round robin: a ReplicaSet's pods are spread, as the scheduler's
		// default spreading leaves them.
		p.Spec.NodeName = nodes[k%len(nodes)]
		made, err := w.Setup.Core.CoreV1().Pods(w.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating pod %s: %w", p.Name, err)
		}
		made.Status = corev1.PodStatus{
			Phase: corev1.PodRunning, StartTime: &now, HostIP: "10.0.0.1", PodIP: "10.1." + strconv.Itoa(k/250%250) + "." + strconv.Itoa(k%250),
			QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "app", Image: "registry.local/app:1", ImageID: "registry.local/app@sha256:0", Ready: true, Started: new(true),
				ContainerID: "containerd://" + strconv.Itoa(k), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			}},
		}
		if _, err := w.Setup.Core.CoreV1().Pods(w.Namespace).UpdateStatus(ctx, made, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("starting pod %s: %w", p.Name, err)
		}
		return nil
	})
}

// replicaSet writes a Deployment and its ReplicaSet (no controller runs
// here: they are owners only) and returns the reference pods carry.
func (w *World) replicaSet(ctx context.Context, name string) (metav1.OwnerReference, error) {
	labels := map[string]string{"app": name}
	replicas := int32(podsPerReplicaSet)
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: PendingPod("t", w.PodCPU, nil).Spec}
	d, err := w.Setup.Core.AppsV1().Deployments(w.Namespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("creating deployment %s: %w", name, err)
	}
	rs, err := w.Setup.Core.AppsV1().ReplicaSets(w.Namespace).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: new(true), BlockOwnerDeletion: new(true),
		}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("creating replicaset %s: %w", name, err)
	}
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: new(true), BlockOwnerDeletion: new(true)}, nil
}

// PendingPod is a pod of the benchmark's shape: one container requesting
// cpu and 256Mi, a short grace period.
func PendingPod(name string, cpu resource.Quantity, labels map[string]string) *corev1.Pod {
	l := map[string]string{}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
		},
	}
}

// AddPending writes n pods that kube-scheduler found no room for
// (PodScheduled False, Unschedulable), each requesting cpu, labelled set=name.
func (w *World) AddPending(ctx context.Context, name string, n int, cpu resource.Quantity) error {
	return parallel(ctx, n, func(ctx context.Context, k int) error {
		p := PendingPod(fmt.Sprintf("%s-%05d", name, k), cpu, map[string]string{"set": name})
		made, err := w.Setup.Core.CoreV1().Pods(w.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating pod %s: %w", p.Name, err)
		}
		return markUnschedulable(ctx, w.Setup, made)
	})
}

func markUnschedulable(ctx context.Context, kc *kube.Clients, p *corev1.Pod) error {
	p.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient cpu.", LastTransitionTime: metav1.Now(),
	}}
	if _, err := kc.Core.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("marking pod %s unschedulable: %w", p.Name, err)
	}
	return nil
}

func instanceID(n *corev1.Node) string { return n.Annotations[emulator.InstanceIDAnnotation] }

// parallel runs f for 0..n-1 with setupWorkers in flight and returns the
// first error (the rest are cancelled).
func parallel(ctx context.Context, n int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(setupWorkers, n) {
		wg.Go(func() {
			for k := range next {
				if err := f(ctx, k); err != nil {
					cancel(err)
				}
			}
		})
	}
	for k := range n {
		select {
		case next <- k:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
