package emulator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube"
)

// InstanceIDAnnotation marks the Nodes the emulator's fake kubelet owns.
const InstanceIDAnnotation = "localaws.karpless.dev/instance-id"

// notReadyTaint is what the node lifecycle controller puts on a node that
// is not ready yet; the local control plane runs without it, so the
// emulator does its job for its own nodes.
var notReadyTaint = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}

// Step applies everything due at the clock's current time: instance state
// transitions, message expiry, Node registration and readiness, Node
// removal for terminated instances, and the fake kubelet's pod updates,
// on pods it lists then (so a test that calls it right after a change sees
// the change acted on). Tests with a fake clock call it after moving the
// clock.
func (e *Emulator) Step(ctx context.Context) error { return e.step(ctx, false) }

// StepWatched is Step with the fake kubelet reading the bound pods from its
// watch's cache (WatchPods), as a real kubelet does, instead of listing
// them: it is what Start runs five times a second, and what the soak runs
// every turn. Until the watch has synced it lists.
func (e *Emulator) StepWatched(ctx context.Context) error { return e.step(ctx, true) }

// podWatch is the fake kubelet's informer on the pods bound to nodes.
type podWatch struct {
	lister corev1listers.PodLister
	synced cache.InformerSynced
}

// WatchPods starts a watch of the pods bound to nodes for StepWatched, and
// returns what stops it and waits for its goroutines. Start's loop runs
// one. Without a connected cluster it does nothing.
func (e *Emulator) WatchPods(ctx context.Context) (stop func()) {
	e.mu.Lock()
	kc := e.kube
	e.mu.Unlock()
	if kc == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(kc.Core, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.nodeName!="
	}))
	pods := f.Core().V1().Pods()
	w := &podWatch{lister: pods.Lister(), synced: pods.Informer().HasSynced}
	f.Start(ctx.Done())
	e.mu.Lock()
	e.podWatch = w
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		if e.podWatch == w {
			e.podWatch = nil
		}
		e.mu.Unlock()
		cancel()
		f.Shutdown()
	}
}

func (e *Emulator) step(ctx context.Context, watched bool) error {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.mu.Lock()
	now := e.now()
	e.advance(now)
	kc := e.kube
	type join struct {
		inst *instance
		node *corev1.Node
	}
	type gone struct {
		inst            *instance
		node, id, state string
	}
	var joins []join
	var readies []*instance
	var gones []gone
	ours := map[string]*instance{}
	goneNodes := map[string]bool{}
	if kc != nil {
		for _, i := range e.world.instances {
			alive := i.State == StateRunning
			switch {
			case i.nodeState == nodeNone && alive && !now.Before(i.runningAt.Add(e.cfg.JoinDelay)):
				joins = append(joins, join{i, e.nodeFor(i, now)})
			case i.nodeState == nodeRegistered && alive && !now.Before(i.nodeAt.Add(e.cfg.ReadyDelay)):
				readies = append(readies, i)
			case (i.nodeState == nodeRegistered || i.nodeState == nodeReady) && !alive && i.State != StatePending:
				gones = append(gones, gone{i, i.NodeName, i.ID, i.State})
			}
			switch {
			case i.NodeName != "" && (i.nodeState == nodeRegistered || i.nodeState == nodeReady) && alive:
				ours[i.NodeName] = i
			case i.NodeName != "" && !alive:
				goneNodes[i.NodeName] = true
			}
		}
	}
	e.mu.Unlock()
	// EC2 reuses private addresses, so a new instance can register a node
	// name a terminated one had: the live instance owns the name.
	for name := range ours {
		delete(goneNodes, name)
	}
	if kc == nil {
		return nil
	}
	var errs []error
	for _, j := range joins {
		if err := e.register(ctx, kc, j.inst, j.node, now); err != nil {
			errs = append(errs, err)
			continue
		}
		ours[j.node.Name] = j.inst
	}
	for _, i := range readies {
		if err := e.markReady(ctx, kc, i, now); err != nil {
			errs = append(errs, err)
		}
	}
	for _, g := range gones {
		err := kc.Core.CoreV1().Nodes().Delete(ctx, g.node, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting node %s: %w", g.node, err))
			continue
		}
		e.mu.Lock()
		g.inst.nodeState = nodeGone
		e.mu.Unlock()
		e.log.Info("node removed", "node", g.node, "instance", g.id, "state", g.state)
	}
	if err := e.syncPods(ctx, kc, now, ours, goneNodes, watched); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// register creates the instance's Node as its kubelet would.
func (e *Emulator) register(ctx context.Context, kc *kube.Clients, i *instance, node *corev1.Node, now time.Time) error {
	_, err := kc.Core.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, gerr := kc.Core.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if gerr != nil || existing.Annotations[InstanceIDAnnotation] != i.ID {
			return fmt.Errorf("registering node %s for %s: a node of that name exists", node.Name, i.ID)
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("registering node %s for %s: %w", node.Name, i.ID, err)
	}
	e.mu.Lock()
	i.NodeName, i.nodeState, i.nodeAt = node.Name, nodeRegistered, now
	e.mu.Unlock()
	e.log.Info("node registered", "node", node.Name, "instance", i.ID, "type", i.InstanceType)
	return nil
}

// markReady sets Ready=True and lifts the not-ready taint.
func (e *Emulator) markReady(ctx context.Context, kc *kube.Clients, i *instance, now time.Time) error {
	nodes := kc.Core.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, i.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		setReady(n, true, now)
		e.mu.Lock()
		for _, c := range i.conditions {
			setCondition(n, c)
		}
		e.mu.Unlock()
		_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err == nil {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := nodes.Get(ctx, i.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			kept := n.Spec.Taints[:0]
			for _, t := range n.Spec.Taints {
				if !(t.Key == notReadyTaint.Key && t.Effect == notReadyTaint.Effect) {
					kept = append(kept, t)
				}
			}
			if len(kept) == len(n.Spec.Taints) {
				return nil
			}
			n.Spec.Taints = kept
			_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
	}
	if apierrors.IsNotFound(err) {
		// Deleted by someone else; the kubelet does not come back here.
		e.mu.Lock()
		i.nodeState = nodeGone
		e.mu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("marking node %s ready: %w", i.NodeName, err)
	}
	e.mu.Lock()
	i.nodeState = nodeReady
	e.mu.Unlock()
	e.log.Info("node ready", "node", i.NodeName, "instance", i.ID)
	return nil
}

func setReady(n *corev1.Node, ready bool, now time.Time) {
	t := metav1.NewTime(now)
	c := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastHeartbeatTime: t, LastTransitionTime: t,
		Reason: "KubeletNotReady", Message: "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized",
	}
	if ready {
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"
	}
	for k, x := range n.Status.Conditions {
		if x.Type == corev1.NodeReady {
			n.Status.Conditions[k] = c
			return
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, c)
}

// SetNodeCondition makes the instance's node report c, as a kubelet that
// lost its container runtime (Ready False) or the EKS node monitoring
// agent (KernelReady, AcceleratedHardwareReady, ...) would, and keeps it
// there: the fake kubelet no longer writes that condition itself. A zero
// LastTransitionTime means now on the emulator's clock. The node must
// have registered.
func (e *Emulator) SetNodeCondition(ctx context.Context, instanceID string, c corev1.NodeCondition) error {
	e.mu.Lock()
	i, ok := e.world.instByID[instanceID]
	if !ok {
		e.mu.Unlock()
		return fmt.Errorf("emulator: no instance %s", instanceID)
	}
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = metav1.NewTime(e.now())
	}
	c.LastHeartbeatTime = metav1.NewTime(e.now())
	kept := i.conditions[:0]
	for _, x := range i.conditions {
		if x.Type != c.Type {
			kept = append(kept, x)
		}
	}
	i.conditions = append(kept, c)
	name, kc := i.NodeName, e.kube
	e.mu.Unlock()
	if name == "" || kc == nil {
		return fmt.Errorf("emulator: instance %s has no node", instanceID)
	}
	nodes := kc.Core.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		setCondition(n, c)
		_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting condition %s on node %s: %w", c.Type, name, err)
	}
	return nil
}

func setCondition(n *corev1.Node, c corev1.NodeCondition) {
	for k, x := range n.Status.Conditions {
		if x.Type == c.Type {
			n.Status.Conditions[k] = c
			return
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, c)
}

// nodeFor builds the Node a kubelet on the instance would register, with
// the labels the kubelet, the AWS cloud controller and the user data give
// it; callers hold e.mu.
func (e *Emulator) nodeFor(i *instance, now time.Time) *corev1.Node {
	t, _ := e.cfg.Catalog.Get(i.InstanceType)
	arch := "amd64"
	if t != nil {
		arch = t.Arch
	}
	name := i.PrivateDNSName
	family := familyForCatalog(i.family)
	win, isWindows := windowsServer[family]
	nodeOS := "linux"
	if isWindows {
		nodeOS = "windows"
	}
	labels := map[string]string{}
	for k, v := range i.boot.Labels {
		labels[k] = v
	}
	if isWindows {
		// The kubelet of a Windows node labels it with its build.
		labels[wellknown.WindowsBuildLabel] = win.build
	}
	for k, v := range map[string]string{
		wellknown.HostnameLabel: name, wellknown.ArchLabel: arch, wellknown.OSLabel: nodeOS,
		"beta.kubernetes.io/arch": arch, "beta.kubernetes.io/os": nodeOS,
		wellknown.InstanceTypeLabel: i.InstanceType, corev1.LabelInstanceType: i.InstanceType,
		wellknown.ZoneLabel: i.Zone, wellknown.RegionLabel: e.cfg.Region,
		corev1.LabelFailureDomainBetaZone: i.Zone, corev1.LabelFailureDomainBetaRegion: e.cfg.Region,
		wellknown.TopologyZoneIDLabel: i.ZoneID,
		"k8s.io/cloud-provider-aws":   e.clusterHash("ccm", 32),
	} {
		labels[k] = v
	}
	taints := append([]corev1.Taint(nil), i.boot.Taints...)
	taints = append(taints, e.cfg.StartupTaints...)
	taints = append(taints, notReadyTaint)
	cfg := catalog.NodeConfig{
		Family: family, MaxPods: i.boot.MaxPods,
		KubeReserved: i.boot.KubeReserved, SystemReserved: i.boot.SystemReserved, EvictionHard: i.boot.EvictionHard,
	}
	if i.lt != nil {
		if gib, ok := i.lt.volumes[catalog.EphemeralDevice(cfg.Family)]; ok {
			q := resource.MustParse(fmt.Sprintf("%dGi", gib))
			cfg.EphemeralStorage = &q
		}
	}
	var capacity, allocatable corev1.ResourceList
	if t != nil {
		c, alloc, err := t.Resources(cfg)
		if err != nil {
			c = t.Capacity(cfg)
			alloc = c
		}
		capacity, allocatable = c, alloc
	}
	if capacity != nil {
		capacity["hugepages-1Gi"], capacity["hugepages-2Mi"] = resource.MustParse("0"), resource.MustParse("0")
		allocatable["hugepages-1Gi"], allocatable["hugepages-2Mi"] = resource.MustParse("0"), resource.MustParse("0")
	}
	kernelArch := "x86_64"
	if arch == "arm64" {
		kernelArch = "aarch64"
	}
	osImage, kernel := "Amazon Linux 2023.8.20260801", "6.1.147-172.266.amzn2023."+kernelArch
	switch i.family {
	case "AL2":
		osImage, kernel = "Amazon Linux 2", "5.10.240-238.955.amzn2."+kernelArch
	case "Bottlerocket":
		osImage, kernel = "Bottlerocket OS 1.45.0 (aws-k8s-"+e.cfg.KubernetesVersion+")", "6.1.147"
	}
	if isWindows {
		osImage, kernel = win.osImage, win.build+".4946"
	}
	ts := metav1.NewTime(now)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: labels,
			Annotations: map[string]string{
				InstanceIDAnnotation:                                     i.ID,
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: i.ProviderID(), Taints: taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: ts, LastTransitionTime: ts, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: ts, LastTransitionTime: ts, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: ts, LastTransitionTime: ts, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: i.PrivateIP},
				{Type: corev1.NodeInternalDNS, Address: name},
				{Type: corev1.NodeHostName, Address: name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: e.hexID("machine", 32), SystemUUID: "ec2" + e.hexID("uuid", 29), BootID: e.uuid(),
				KernelVersion: kernel, OSImage: osImage, ContainerRuntimeVersion: "containerd://1.7.27",
				KubeletVersion: "v" + e.cfg.KubernetesVersion + ".0-eks-" + e.clusterHash("eks-build", 7), KubeProxyVersion: "",
				OperatingSystem: nodeOS, Architecture: arch,
			},
		},
	}
	setReady(node, false, now)
	return node
}

// clusterHash is a hex string fixed for the cluster (same on every node).
func (e *Emulator) clusterHash(kind string, n int) string {
	h := sha256.Sum256([]byte(kind + "/" + e.cfg.ClusterName + "/" + e.cfg.KubernetesVersion))
	return hex.EncodeToString(h[:])[:n]
}

// familyForCatalog maps an image family to the catalog's AMI family; a
// Windows image names its server release, Windows user data on an image
// the emulator does not know is taken for 2022.
func familyForCatalog(f string) string {
	switch f {
	case "AL2", "Bottlerocket", "Custom", catalog.FamilyWindows2019, catalog.FamilyWindows2022, catalog.FamilyWindows2025:
		return f
	case "Windows":
		return catalog.FamilyWindows2022
	}
	return catalog.FamilyAL2023
}

// windowsServer is what a Windows node reports per server release: the
// build (node.kubernetes.io/windows-build, which Karpenter's windows
// aliases require) and the OS image.
var windowsServer = map[string]struct{ build, osImage string }{
	catalog.FamilyWindows2019: {"10.0.17763", "Windows Server 2019 Datacenter"},
	catalog.FamilyWindows2022: {"10.0.20348", "Windows Server 2022 Datacenter"},
	catalog.FamilyWindows2025: {"10.0.26100", "Windows Server 2025 Datacenter"},
}

// syncPods is the fake kubelet: pods bound to the emulator's running nodes
// become Running; pods being deleted there are removed once their grace
// period (capped) has passed on the clock; pods left on the nodes of
// terminated instances are removed, as pod garbage collection would.
func (e *Emulator) syncPods(ctx context.Context, kc *kube.Clients, now time.Time, ours map[string]*instance, gone map[string]bool, watched bool) error {
	if len(ours) == 0 && len(gone) == 0 {
		return nil
	}
	pods, cached, err := e.boundPods(ctx, kc, watched)
	if err != nil {
		return err
	}
	var errs []error
	seen := map[types.UID]bool{}
	for _, pod := range pods {
		client := kc.Core.CoreV1().Pods(pod.Namespace)
		if cached && (gone[pod.Spec.NodeName] || ours[pod.Spec.NodeName] != nil) {
			pod = pod.DeepCopy() // the cache's objects are shared
		}
		switch {
		case gone[pod.Spec.NodeName]:
			// kube-controller-manager's pod GC does this for a pod whose
			// node is gone: Failed, with the reason, then deleted.
			if err := finishPod(ctx, client, pod, now, &corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByPodGC", Message: "PodGC: node no longer exists"}); err != nil {
				errs = append(errs, err)
			}
		case ours[pod.Spec.NodeName] != nil && pod.DeletionTimestamp != nil:
			seen[pod.UID] = true
			if e.podDeleting == nil {
				e.podDeleting = map[types.UID]time.Time{}
			}
			first, ok := e.podDeleting[pod.UID]
			if !ok {
				first = now
				e.podDeleting[pod.UID] = now
			}
			grace := e.cfg.PodGracePeriodCap
			if g := pod.DeletionGracePeriodSeconds; g != nil && time.Duration(*g)*time.Second < grace {
				grace = time.Duration(*g) * time.Second
			}
			if now.Before(first.Add(grace)) {
				continue
			}
			if err := finishPod(ctx, client, pod, now, nil); err != nil {
				errs = append(errs, err)
			}
		case ours[pod.Spec.NodeName] != nil && needsStart(pod):
			e.mu.Lock()
			ip := e.podIP(ours[pod.Spec.NodeName], pod)
			e.mu.Unlock()
			startPod(pod, ip, now)
			if _, err := client.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("starting pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
		}
	}
	for uid := range e.podDeleting {
		if !seen[uid] {
			delete(e.podDeleting, uid)
		}
	}
	return errors.Join(errs...)
}

// boundPods are the pods bound to nodes: from the watch's cache when
// watched and the watch has synced (cached), else listed now.
func (e *Emulator) boundPods(ctx context.Context, kc *kube.Clients, watched bool) (pods []*corev1.Pod, cached bool, err error) {
	if watched {
		e.mu.Lock()
		w := e.podWatch
		e.mu.Unlock()
		if w != nil && w.synced() {
			if pods, err := w.lister.List(labels.Everything()); err == nil {
				return pods, true, nil
			}
		}
	}
	l, err := kc.Core.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
	if err != nil {
		return nil, false, fmt.Errorf("listing bound pods: %w", err)
	}
	pods = make([]*corev1.Pod, len(l.Items))
	for i := range l.Items {
		pods[i] = &l.Items[i]
	}
	return pods, false, nil
}

// finishPod ends a pod as the kubelet does once its containers are
// killed: the terminal phase is written first (a Job's tracking finalizer
// is only released for a pod in one), then the pod is deleted for good.
// A pod gone or changed meanwhile is left to the next step.
func finishPod(ctx context.Context, client corev1client.PodInterface, pod *corev1.Pod, now time.Time, cond *corev1.PodCondition) error {
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		stopPod(pod, now, cond)
		if _, err := client.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return nil
			}
			return fmt.Errorf("stopping pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	err := client.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// stopPod writes the status of a pod whose containers were killed: Failed,
// not ready, each container terminated by SIGKILL (exit code 137).
func stopPod(pod *corev1.Pod, now time.Time, cond *corev1.PodCondition) {
	ts := metav1.NewTime(now)
	pod.Status.Phase = corev1.PodFailed
	for k, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			pod.Status.Conditions[k].Status, pod.Status.Conditions[k].LastTransitionTime = corev1.ConditionFalse, ts
		}
	}
	if cond != nil {
		cond.LastTransitionTime = ts
		pod.Status.Conditions = append(pod.Status.Conditions, *cond)
	}
	for k, c := range pod.Status.ContainerStatuses {
		var started metav1.Time
		if c.State.Running != nil {
			started = c.State.Running.StartedAt
		}
		pod.Status.ContainerStatuses[k].Ready = false
		pod.Status.ContainerStatuses[k].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", StartedAt: started, FinishedAt: ts}}
	}
}

func needsStart(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if pod.Status.Phase != corev1.PodRunning {
		return true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status != corev1.ConditionTrue
		}
	}
	return true
}

// podIP gives a pod an address: the node's for host-network pods, else
// one from 100.64.0.0/10 (a VPC CNI custom-networking range). Callers hold e.mu.
func (e *Emulator) podIP(i *instance, pod *corev1.Pod) string {
	if pod.Spec.HostNetwork {
		return i.PrivateIP
	}
	if pod.Status.PodIP != "" {
		return pod.Status.PodIP
	}
	e.world.podIP++
	n := e.world.podIP
	return netip.AddrFrom4([4]byte{100, byte(64 + (n>>16)&63), byte(n >> 8), byte(n)}).String()
}

func startPod(pod *corev1.Pod, ip string, now time.Time) {
	ts := metav1.NewTime(now)
	hostIP := ip
	pod.Status.Phase = corev1.PodRunning
	if pod.Status.StartTime == nil {
		pod.Status.StartTime = &ts
	}
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	if pod.Status.HostIP == "" {
		pod.Status.HostIP, pod.Status.HostIPs = hostIP, []corev1.HostIP{{IP: hostIP}}
	}
	set := func(t corev1.PodConditionType) {
		for k, c := range pod.Status.Conditions {
			if c.Type == t {
				if c.Status != corev1.ConditionTrue {
					pod.Status.Conditions[k].Status, pod.Status.Conditions[k].LastTransitionTime = corev1.ConditionTrue, ts
				}
				return
			}
		}
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: ts})
	}
	for _, t := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled} {
		set(t)
	}
	pod.Status.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: "containerd://" + shortHash(pod.Name+c.Name),
			Ready: true, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: ts, FinishedAt: ts}},
		})
	}
	pod.Status.ContainerStatuses = nil
	started := true
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: "containerd://" + shortHash(pod.Name+c.Name),
			Ready: true, Started: &started, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ts}},
		})
	}
}

func imageID(image string) string {
	repo, _, _ := strings.Cut(image, ":")
	return repo + "@sha256:" + shortHash(image) + shortHash(image+"x")
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}
