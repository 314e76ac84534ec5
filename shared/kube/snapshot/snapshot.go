// Package snapshot reads, in one pass per tick, the cluster objects a
// decision needs, paginated and protobuf-encoded, keeping only what is used.
package snapshot

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"
	"k8s.io/utils/clock"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/kube"
)

// PageSize is the list page size (kube.PageSize).
const PageSize = kube.PageSize

// Take lists everything. Any failure fails the snapshot: a tick must not act
// on a partial view (it could, say, see a node without its pods).
func Take(ctx context.Context, c *kube.Clients, clk clock.PassiveClock) (*cluster.Snapshot, error) {
	start, bytes0 := clk.Now(), c.Read.Total()
	s := &cluster.Snapshot{}
	// Pods of one workload, and nodes of one type, share what they hold
	// alike: on a large cluster the pods are most of a tick's memory.
	trim := cluster.NewTrimmer()
	lists := []struct {
		what string
		run  func() (int, error)
	}{
		{"pods", func() (int, error) {
			return listPaged(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.FieldSelector = "status.phase!=Succeeded,status.phase!=Failed"
				return c.Core.CoreV1().Pods("").List(ctx, o)
			}, func(o runtime.Object) { s.Pods = append(s.Pods, trim.Pod(o.(*corev1.Pod))) })
		}},
		{"nodes", func() (int, error) {
			return listPaged(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.Core.CoreV1().Nodes().List(ctx, o)
			}, func(o runtime.Object) { s.Nodes = append(s.Nodes, trim.Node(o.(*corev1.Node))) })
		}},
		{"nodeclaims", func() (int, error) {
			pages := 0
			err := kube.List(ctx, metav1.ListOptions{}, c.NodeClaims.List, func(l *karpv1.NodeClaimList) {
				pages++
				for i := range l.Items {
					// Written back by update, never by apply: an update
					// without managedFields keeps the server's.
					l.Items[i].ManagedFields = nil
					s.NodeClaims = append(s.NodeClaims, &l.Items[i])
				}
			})
			return pages, err
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
		{"nodeoverlays", func() (int, error) {
			l, err := c.NodeOverlays.List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) {
				// The NodeOverlay CRD is not installed (a cluster the
				// bootstrap has not updated yet): there are no overlays.
				return 1, nil
			}
			if err == nil {
				for i := range l.Items {
					l.Items[i].ManagedFields = nil
					s.NodeOverlays = append(s.NodeOverlays, &l.Items[i])
				}
			}
			return 1, err
		}},
		{"capacitybuffers", func() (int, error) {
			bufs, n, err := c.ReadCapacityBuffers(ctx)
			s.CapacityBuffers = bufs
			return n, err
		}},
		{"daemonsets", func() (int, error) {
			return listPaged(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.Core.AppsV1().DaemonSets("").List(ctx, o)
			}, func(o runtime.Object) {
				s.DaemonSets = append(s.DaemonSets, cluster.TrimDaemonSet(o.(*appsv1.DaemonSet)))
			})
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
	// One page read ahead while one is trimmed: the pager's default of 10
	// would hold up to ten decoded pages (tens of MiB of pods) at once.
	p.PageBufferSize = 1
	// A full relist on an expired continue token would hand back items twice.
	p.FullListIfExpired = false
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(o runtime.Object) error {
		each(o)
		return nil
	})
	return pages, err
}
