package provision

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/kube/lease"
	"github.com/karpless/karpless/shared/ticks/lifecycle"
)

// Session lends the provisioning engine to another function for one
// invocation (the disruption function launches replacement NodeClaims with
// it): offerings, prices and capacity marks are read once, and the marks a
// launch makes are saved by Close. It does not refresh EC2NodeClass status;
// the provisioner's tick does.
type Session struct {
	p   *Provisioner
	inv *invocation
}

// NewSession reads prices, capacity marks and NodeOverlays and builds the
// launchable instance types of nodeClasses.
func (p *Provisioner) NewSession(ctx context.Context, nodeClasses []*awsv1.EC2NodeClass) (*Session, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	p.prepare()
	s := &Session{p: p, inv: &invocation{resolved: map[string]bool{}}}
	if err := p.openCloud(ctx, s.inv); err != nil {
		return nil, err
	}
	if err := p.readZonalShift(ctx, s.inv); err != nil {
		return nil, err
	}
	// Replacements only: no claim of the session is known before it.
	s.inv.cloud.ZonalShift(s.inv.shifted, nil, nodeClasses)
	if err := s.inv.cloud.Use(ctx, nodeClasses); err != nil {
		return nil, err
	}
	// Consolidation prices with the overlays too, or it would undo what
	// they made the provisioner choose.
	ov, err := p.readOverlays(ctx)
	if err != nil {
		return nil, err
	}
	s.inv.overlays = ov
	s.inv.applyOverlays()
	return s, nil
}

// Guard makes every NodeClaim creation and launch of the session check g
// first (the borrower's lease): a session that outlives its lease stops.
func (s *Session) Guard(g lease.Guard) {
	s.inv.guard = g
	s.inv.cloud.Guard(g)
}

// Classes are the launchable instance types per EC2NodeClass name, as the
// simulator takes them (see SimulationInput).
func (s *Session) Classes() map[string]*scheduling.NodeClass { return s.inv.cloud.InstanceTypes() }

// CreateAndLaunch creates each claim's NodeClaim (or finds the one of that
// name created earlier) and launches it. It returns the objects created or
// found, in order (nil where creation failed); launch failures are returned
// but leave the claim in place for a later launch.
func (s *Session) CreateAndLaunch(ctx context.Context, claims []planning.NewClaim) ([]*karpv1.NodeClaim, error) {
	p := s.p
	if p.shadow() {
		// The disruption tick records its commands instead of executing
		// them; nothing should get here.
		return make([]*karpv1.NodeClaim, len(claims)), errors.New("shadow mode: no nodeclaim is created")
	}
	pools := map[string]*karpv1.NodePool{}
	list, err := p.Kube.NodePools.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodepools: %w", err)
	}
	for i := range list.Items {
		pools[list.Items[i].Name] = &list.Items[i]
	}
	out := make([]*karpv1.NodeClaim, len(claims))
	var errs []error
	for i, c := range claims {
		np, nc := pools[c.Claim.NodePool], s.inv.cloud.NodeClass(c.Claim.NodeClass)
		if np == nil || nc == nil {
			errs = append(errs, fmt.Errorf("unknown nodepool %q or node class %q", c.Claim.NodePool, c.Claim.NodeClass))
			continue
		}
		if err := s.inv.guard.Check(ctx, "creating a nodeclaim"); err != nil {
			errs = append(errs, err)
			break
		}
		obj := planning.NodeClaimFor(np, nc, c.Claim)
		maps.Copy(obj.Annotations, c.Annotations)
		if c.Name != "" {
			obj.Name, obj.GenerateName = c.Name, ""
		}
		claim, err := p.Kube.NodeClaims.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) && c.Name != "" {
			claim, err = p.Kube.NodeClaims.Get(ctx, c.Name, metav1.GetOptions{})
		} else if err == nil {
			reason := c.Reason
			if reason == "" {
				reason = "provisioning"
			}
			p.Metrics.Count("karpenter_nodeclaims_created_total", 1, map[string]string{"nodepool": np.Name, "reason": reason})
			it, o := c.Claim.CheapestOffering()
			if it != nil {
				p.Log.Info("created nodeclaim", "nodeclaim", claim.Name, "nodepool", np.Name, "reason", reason, "pods", len(c.Claim.Pods),
					"instance_types", len(c.Claim.InstanceTypes), "cheapest", it.Name, "zone", o.Zone, "capacity_type", o.CapacityType, "price", o.Price, "credits", c.Claim.CreditHourly(it))
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("creating nodeclaim for nodepool %s: %w", np.Name, err))
			continue
		}
		out[i] = claim
		if claim.IsTrue(karpv1.ConditionTypeLaunched) || claim.DeletionTimestamp != nil {
			continue
		}
		launched, err := s.inv.cloud.Launch(ctx, claim)
		if err != nil {
			errs = append(errs, fmt.Errorf("nodeclaim %s: %w", claim.Name, err))
			continue
		}
		if launched != nil {
			out[i] = launched
		}
	}
	return out, errors.Join(errs...)
}

// Advance takes one lifecycle step (launch, register, initialize) on each
// of claims, given the cluster's nodes, as the provisioner's tick would.
func (s *Session) Advance(ctx context.Context, claims []*karpv1.NodeClaim, nodes []*corev1.Node) (lifecycle.Summary, error) {
	if s.p.shadow() {
		return lifecycle.Summary{}, nil
	}
	r, err := s.p.reconcileClaims(ctx, s.inv, claims, nodes)
	return r.lifecycle, err
}

// Close saves the capacity marks the session's launches made.
func (s *Session) Close(ctx context.Context) { s.inv.cloud.Close(ctx) }
