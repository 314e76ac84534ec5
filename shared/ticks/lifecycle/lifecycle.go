// Package lifecycle moves each NodeClaim through launch, registration and
// initialization, one idempotent step per tick, and retires the ones that stall.
package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/cloud"
	corenodeclaim "github.com/karpless/karpless/shared/core/nodeclaim"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube"
)

// Instances is the EC2 side lifecycle needs.
type Instances interface {
	InstanceTerminator
	Tag(ctx context.Context, id string, tags map[string]string) error
}

// Launcher launches a NodeClaim's instance; see Launch.
type Launcher interface {
	Launch(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
}

// Lifecycle reconciles NodeClaims of one cluster.
type Lifecycle struct {
	Kube      *kube.Clients
	Instances Instances
	Launcher  Launcher
	Cluster   string
	Clock     clock.PassiveClock
	Log       *slog.Logger
	Events    *record.Recorder
	Metrics   *record.Metrics
	// RegistrationTTL retires claims whose node never registered.
	RegistrationTTL time.Duration
}

// nodeClaimGVK is for Events about NodeClaims.
var nodeClaimGVK = karpv1.SchemeGroupVersion.WithKind("NodeClaim")

// Summary counts what one pass did.
type Summary struct {
	Launched, Registered, Initialized, Retired, Finalized, InFlight int
}

// Reconcile advances every NodeClaim by at most one step each; nodes are the
// cluster's current Nodes. Errors on one claim do not stop the others.
// A claim of another provider's NodeClass is left to it.
func (l *Lifecycle) Reconcile(ctx context.Context, claims []*karpv1.NodeClaim, nodes []*corev1.Node) (Summary, error) {
	var s Summary
	var errs []error
	for _, nc := range claims {
		if !nc.IsManaged() {
			continue
		}
		if err := l.reconcile(ctx, nc, nodes, &s); err != nil {
			errs = append(errs, fmt.Errorf("nodeclaim %s: %w", nc.Name, err))
		}
	}
	return s, errors.Join(errs...)
}

func (l *Lifecycle) reconcile(ctx context.Context, nc *karpv1.NodeClaim, nodes []*corev1.Node, s *Summary) error {
	node, duplicate := corenodeclaim.NodeFor(nc, nodes)
	if nc.DeletionTimestamp != nil {
		// A claim whose node never registered has nothing to drain: finish
		// it here. Claims with nodes are drained by the termination flow.
		if nc.IsTrue(karpv1.ConditionTypeRegistered) || nc.Status.NodeName != "" || node != nil || duplicate {
			return nil
		}
		done, err := l.finalizeUnregistered(ctx, nc)
		if done {
			s.Finalized++
		}
		return err
	}
	if reason := corenodeclaim.Timeout(nc, l.Clock.Now(), l.RegistrationTTL); reason != "" {
		if reason == corenodeclaim.LaunchTimeoutReason {
			l.Events.Warning(record.ObjectOf(nodeClaimGVK, nc), "LaunchTimeout", "instance did not launch within %s; deleting the NodeClaim", corenodeclaim.LaunchTimeoutFor(l.RegistrationTTL))
		} else {
			l.Events.Warning(record.ObjectOf(nodeClaimGVK, nc), "RegistrationTimeout", "node did not register within %s; deleting the NodeClaim", l.RegistrationTTL)
		}
		// Recorded before the delete, so a pass killed in between records
		// it on its next try (once: it is keyed by the claim). A NodePool
		// that cannot be written now does not keep the claim, and the pods
		// waiting on it, from being replaced: the outcome is lost, as when
		// Karpenter restarts.
		if err := l.recordRegistration(ctx, nc, false); err != nil {
			l.Log.Warn("recording a failed registration on the nodepool", "nodeclaim", nc.Name, "error", err)
		}
		if err := l.Kube.DeleteNodeClaim(ctx, nc); err != nil {
			return fmt.Errorf("retiring an unregistered claim: %w", err)
		}
		l.Metrics.Count("karpenter_nodeclaims_disrupted_total", 1, map[string]string{
			"reason": reason, "nodepool": nc.Labels[wellknown.NodePoolLabel], "capacity_type": nc.Labels[wellknown.CapacityTypeLabel],
		})
		s.Retired++
		return nil
	}
	if !nc.IsTrue(karpv1.ConditionTypeLaunched) {
		s.InFlight++
		if l.Launcher == nil {
			return nil
		}
		launched, err := l.Launcher.Launch(ctx, nc)
		if err != nil {
			// Launched=False dates the failure: LaunchTimeout counts from
			// the first one, as in Karpenter.
			if !meta.IsStatusConditionFalse(nc.Status.Conditions, karpv1.ConditionTypeLaunched) {
				now := metav1.NewTime(l.Clock.Now())
				msg := err.Error()
				if len(msg) > 300 {
					msg = msg[:300]
				}
				if serr := l.Kube.UpdateNodeClaimStatus(ctx, nc, func(c *karpv1.NodeClaim) {
					c.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionFalse, "LaunchFailed", msg, now)
				}); serr != nil && !kube.IsGone(serr) {
					l.Log.Warn("recording a failed launch", "nodeclaim", nc.Name, "error", serr)
				}
			}
			return err
		}
		if launched == nil {
			return nil
		}
		s.Launched++
		nc = launched
		node, duplicate = corenodeclaim.NodeFor(nc, nodes)
	}
	if !nc.IsTrue(karpv1.ConditionTypeRegistered) {
		s.InFlight++
		if duplicate {
			l.Log.Warn("not registering: several nodes have the claim's provider ID", "nodeclaim", nc.Name, "provider_id", nc.Status.ProviderID)
			return nil
		}
		if node == nil {
			return nil
		}
		if err := l.register(ctx, nc, node); err != nil {
			return err
		}
		s.Registered++
		return nil
	}
	if nc.Annotations[wellknown.TaggedAnnotation] != "true" {
		// A tag that failed (a throttled call) is tried again next pass.
		if err := l.tag(ctx, nc); err != nil {
			l.Log.Warn("tagging instance after registration", "nodeclaim", nc.Name, "error", err)
		}
	}
	if !nc.IsTrue(karpv1.ConditionTypeInitialized) {
		s.InFlight++
		if node == nil {
			return nil
		}
		ok, err := l.initialize(ctx, nc, node)
		if ok {
			s.Initialized++
		}
		return err
	}
	return nil
}

// register ties the Node to its claim: labels, taints, finalizer and owner
// from the claim, the unregistered taint removed, the success recorded on
// the NodePool (recordRegistration), then the claim marked Registered. Each write is idempotent, so an interrupted pass is finished
// by the next one.
func (l *Lifecycle) register(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := l.Kube.Core.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		next, missingTaint := corenodeclaim.RegisteredNode(nc, cur)
		if _, err = l.Kube.Core.CoreV1().Nodes().Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if missingTaint {
			l.Events.Warning(record.ObjectOf(nodeClaimGVK, nc), "UnregisteredTaintMissing", "Node %s came up without the %s taint, which prevents registration-related race conditions", node.Name, wellknown.UnregisteredTaintKey)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("registering node %s: %w", node.Name, err)
	}
	// Recorded before the claim is marked Registered, for the same reason
	// as a failure is before its delete; and, as in Karpenter, a NodePool
	// that cannot be written does not hold the registration back.
	if err := l.recordRegistration(ctx, nc, true); err != nil {
		l.Log.Warn("recording a registration on the nodepool", "nodeclaim", nc.Name, "error", err)
	}
	now := metav1.NewTime(l.Clock.Now())
	err = l.Kube.UpdateNodeClaimStatus(ctx, nc, func(c *karpv1.NodeClaim) {
		c.Status.NodeName = node.Name
		c.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "", now)
	})
	if err != nil {
		return err
	}
	l.Metrics.Count("karpenter_nodes_created_total", 1, map[string]string{"nodepool": nc.Labels[wellknown.NodePoolLabel], "zone": node.Labels[wellknown.ZoneLabel]})
	l.Log.Info("registered node", "nodeclaim", nc.Name, "node", node.Name)
	return nil
}

// tag writes the tags Karpenter's tagging controller gives a registered
// claim's instance (Name, the NodeClaim, the cluster) and records that on
// the claim (karpenter.k8s.aws/tagged), so it is done once and retried
// until it is.
func (l *Lifecycle) tag(ctx context.Context, nc *karpv1.NodeClaim) error {
	id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID)
	if id == "" || nc.Status.NodeName == "" || l.Instances == nil {
		return nil
	}
	tags := map[string]string{wellknown.NameTagKey: nc.Status.NodeName, wellknown.NodeClaimTagKey: nc.Name, wellknown.EKSClusterNameTagKey: l.Cluster}
	if err := l.Instances.Tag(ctx, id, tags); err != nil {
		if errors.Is(err, instance.ErrZonallyShifted) {
			// Its zone is shifted away from: tagged once the shift ends.
			return nil
		}
		return err
	}
	return l.Kube.AnnotateNodeClaim(ctx, nc, map[string]*string{wellknown.TaggedAnnotation: new("true")})
}

// initialize marks the claim Initialized once the node is Ready, its startup
// and ephemeral taints are gone and the extended resources it was launched
// for are advertised.
func (l *Lifecycle) initialize(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) (bool, error) {
	if reason := corenodeclaim.NotInitializedReason(nc, node); reason != "" {
		return false, nil
	}
	if node.Labels[wellknown.InitializedLabel] != "true" {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{wellknown.InitializedLabel: "true"}}})
		if _, err := l.Kube.Core.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return false, fmt.Errorf("labelling node %s initialized: %w", node.Name, err)
		}
	}
	now := metav1.NewTime(l.Clock.Now())
	if err := l.Kube.UpdateNodeClaimStatus(ctx, nc, func(c *karpv1.NodeClaim) {
		c.SetCondition(karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "", now)
	}); err != nil {
		return false, err
	}
	l.Log.Info("initialized node", "nodeclaim", nc.Name, "node", node.Name, "seconds_since_created", l.Clock.Since(nc.CreationTimestamp.Time).Seconds())
	return true, nil
}

// finalizeUnregistered terminates whatever instance a deleted, never
// registered claim has and then releases its finalizer. The instance is
// looked up by the claim's tag as well as its providerID, so an instance
// launched by a tick that died before recording it is not leaked.
func (l *Lifecycle) finalizeUnregistered(ctx context.Context, nc *karpv1.NodeClaim) (bool, error) {
	if !slices.Contains(nc.Finalizers, wellknown.TerminationFinalizer) {
		return false, nil
	}
	waiting, _, err := TerminateInstances(ctx, l.Kube, l.Instances, l.Clock, nc, cloud.Errors{Metrics: l.Metrics, Controller: cloud.ControllerLifecycle})
	if err != nil {
		return false, err
	}
	if len(waiting) > 0 {
		return false, nil // the next pass looks again
	}
	if err := l.Kube.RemoveNodeClaimFinalizer(ctx, nc); err != nil {
		return false, err
	}
	l.Log.Info("finalized nodeclaim without a node", "nodeclaim", nc.Name)
	return true, nil
}
