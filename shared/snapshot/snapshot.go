// Package snapshot reads, in one pass per tick, the cluster objects a
// decision needs, paginated and protobuf-encoded, keeping only what is used.
package snapshot

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"
	"k8s.io/utils/clock"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/wellknown"
)

// PageSize is the list page size: large enough for few round trips, small
// enough to keep each decoded page modest in a 256 MiB Lambda.
const PageSize = 500

// Snapshot is the cluster as one tick sees it. Pods and Nodes are trimmed
// copies: only scheduling, disruption and termination fields are kept.
type Snapshot struct {
	// Pods are all pods that are not finished (pending and bound).
	Pods           []*corev1.Pod
	Nodes          []*corev1.Node
	NodeClaims     []*karpv1.NodeClaim
	NodePools      []*karpv1.NodePool
	NodeClasses    []*awsv1.EC2NodeClass
	DaemonSets     []*appsv1.DaemonSet
	PDBs           []*policyv1.PodDisruptionBudget
	PVCs           []*corev1.PersistentVolumeClaim
	PVs            []*corev1.PersistentVolume
	StorageClasses []*storagev1.StorageClass
	CSINodes       []*storagev1.CSINode
	// VolumeAttachments say which volumes are still attached to which node.
	VolumeAttachments []*storagev1.VolumeAttachment
	Stats             Stats
}

// Stats is what taking the snapshot cost.
type Stats struct {
	BytesRead int64
	Duration  time.Duration
	Requests  int
}

// Take lists everything. Any failure fails the snapshot: a tick must not act
// on a partial view (it could, say, see a node without its pods).
func Take(ctx context.Context, c *kube.Clients, clk clock.PassiveClock) (*Snapshot, error) {
	start, bytes0 := clk.Now(), c.Read.Total()
	s := &Snapshot{}
	lists := []struct {
		what string
		run  func() (int, error)
	}{
		{"pods", func() (int, error) {
			return listPaged(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.FieldSelector = "status.phase!=Succeeded,status.phase!=Failed"
				return c.Core.CoreV1().Pods("").List(ctx, o)
			}, func(o runtime.Object) { s.Pods = append(s.Pods, TrimPod(o.(*corev1.Pod))) })
		}},
		{"nodes", func() (int, error) {
			return listPaged(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.Core.CoreV1().Nodes().List(ctx, o)
			}, func(o runtime.Object) { s.Nodes = append(s.Nodes, TrimNode(o.(*corev1.Node))) })
		}},
		{"nodeclaims", func() (int, error) {
			l, err := c.NodeClaims.List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range l.Items {
					s.NodeClaims = append(s.NodeClaims, &l.Items[i])
				}
			}
			return 1, err
		}},
		{"nodepools", func() (int, error) {
			l, err := c.NodePools.List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range l.Items {
					s.NodePools = append(s.NodePools, &l.Items[i])
				}
			}
			return 1, err
		}},
		{"ec2nodeclasses", func() (int, error) {
			l, err := c.EC2NodeClasses.List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range l.Items {
					s.NodeClasses = append(s.NodeClasses, &l.Items[i])
				}
			}
			return 1, err
		}},
		{"daemonsets", func() (int, error) {
			return listPaged(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.Core.AppsV1().DaemonSets("").List(ctx, o)
			}, func(o runtime.Object) { s.DaemonSets = append(s.DaemonSets, trimDaemonSet(o.(*appsv1.DaemonSet))) })
		}},
		{"poddisruptionbudgets", func() (int, error) {
			return listPaged(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.Core.PolicyV1().PodDisruptionBudgets("").List(ctx, o)
			}, func(o runtime.Object) {
				p := o.(*policyv1.PodDisruptionBudget)
				p.ManagedFields = nil
				s.PDBs = append(s.PDBs, p)
			})
		}},
		{"persistentvolumeclaims", func() (int, error) {
			return listPaged(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.Core.CoreV1().PersistentVolumeClaims("").List(ctx, o)
			}, func(o runtime.Object) {
				p := o.(*corev1.PersistentVolumeClaim)
				p.ManagedFields = nil
				s.PVCs = append(s.PVCs, p)
			})
		}},
		{"persistentvolumes", func() (int, error) {
			return listPaged(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.Core.CoreV1().PersistentVolumes().List(ctx, o)
			}, func(o runtime.Object) {
				p := o.(*corev1.PersistentVolume)
				p.ManagedFields = nil
				s.PVs = append(s.PVs, p)
			})
		}},
		{"storageclasses", func() (int, error) {
			l, err := c.Core.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range l.Items {
					l.Items[i].ManagedFields = nil
					s.StorageClasses = append(s.StorageClasses, &l.Items[i])
				}
			}
			return 1, err
		}},
		{"csinodes", func() (int, error) {
			l, err := c.Core.StorageV1().CSINodes().List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range l.Items {
					l.Items[i].ManagedFields = nil
					s.CSINodes = append(s.CSINodes, &l.Items[i])
				}
			}
			return 1, err
		}},
		{"volumeattachments", func() (int, error) {
			return listPaged(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.Core.StorageV1().VolumeAttachments().List(ctx, o)
			}, func(o runtime.Object) {
				v := o.(*storagev1.VolumeAttachment)
				v.ManagedFields = nil
				s.VolumeAttachments = append(s.VolumeAttachments, v)
			})
		}},
	}
	for _, l := range lists {
		n, err := l.run()
		s.Stats.Requests += n
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", l.what, err)
		}
	}
	s.Stats.BytesRead = c.Read.Total() - bytes0
	s.Stats.Duration = clk.Since(start)
	return s, nil
}

func listPaged(ctx context.Context, list func(context.Context, metav1.ListOptions) (runtime.Object, error), each func(runtime.Object)) (int, error) {
	pages := 0
	p := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		pages++
		return list(ctx, o)
	})
	p.PageSize = PageSize
	// A full relist on an expired continue token would hand back items twice.
	p.FullListIfExpired = false
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(o runtime.Object) error {
		each(o)
		return nil
	})
	return pages, err
}

// keptAnnotations are the only annotations decisions read.
var keptAnnotations = []string{
	wellknown.DoNotDisruptAnnotation,
	corev1.MirrorPodAnnotationKey,
	wellknown.NodeClaimTerminationTimestampAnnotation,
	// Disruption cost of evicting the pod (consolidation orders candidates by it).
	"controller.kubernetes.io/pod-deletion-cost",
}

func trimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Labels: m.Labels, OwnerReferences: m.OwnerReferences, Finalizers: m.Finalizers,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds,
	}
	for _, k := range keptAnnotations {
		if v, ok := m.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	return out
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				out[i].Ports = append(out[i].Ports, p)
			}
		}
	}
	return out
}

// TrimPod keeps what scheduling, disruption and eviction read of a pod.
func TrimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: trimMeta(p.ObjectMeta)}
	out.Spec = corev1.PodSpec{
		NodeName: p.Spec.NodeName, NodeSelector: p.Spec.NodeSelector, Affinity: p.Spec.Affinity,
		Tolerations: p.Spec.Tolerations, TopologySpreadConstraints: p.Spec.TopologySpreadConstraints,
		Containers: trimContainers(p.Spec.Containers), InitContainers: trimContainers(p.Spec.InitContainers),
		Overhead: p.Spec.Overhead, PriorityClassName: p.Spec.PriorityClassName, Priority: p.Spec.Priority,
		TerminationGracePeriodSeconds: p.Spec.TerminationGracePeriodSeconds, SchedulerName: p.Spec.SchedulerName,
		HostNetwork: p.Spec.HostNetwork, PreemptionPolicy: p.Spec.PreemptionPolicy, Resources: p.Spec.Resources,
	}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: v.PersistentVolumeClaim, Ephemeral: v.Ephemeral,
			}})
		}
	}
	out.Status = corev1.PodStatus{Phase: p.Status.Phase, NominatedNodeName: p.Status.NominatedNodeName, StartTime: p.Status.StartTime}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled || c.Type == corev1.PodReady {
			out.Status.Conditions = append(out.Status.Conditions, c)
		}
	}
	return out
}

// TrimNode keeps what scheduling, registration and disruption read of a node.
func TrimNode(n *corev1.Node) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: trimMeta(n.ObjectMeta),
		Spec:       corev1.NodeSpec{ProviderID: n.Spec.ProviderID, Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
		Status:     corev1.NodeStatus{Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable, Conditions: n.Status.Conditions},
	}
}

func trimDaemonSet(d *appsv1.DaemonSet) *appsv1.DaemonSet {
	tmpl := TrimPod(&corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec})
	return &appsv1.DaemonSet{
		ObjectMeta: trimMeta(d.ObjectMeta),
		Spec: appsv1.DaemonSetSpec{Selector: d.Spec.Selector, Template: corev1.PodTemplateSpec{
			ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec,
		}},
	}
}
