package provision

import (
	"context"
	"errors"
	"fmt"
	"strings"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube"
)

// NodeClassCleanup deletes what Karpless (or Karpenter before it) made for
// an EC2NodeClass that is going away. Each call deletes what it finds and
// takes "already gone" as done, so a finalization killed anywhere is
// finished by the next pass.
type NodeClassCleanup interface {
	// DeleteManagedInstanceProfiles deletes the profiles made for
	// spec.role (the class's IAM path), then the profile of Karpenter's
	// legacy name if there is one of this cluster, and returns them; in an
	// isolated VPC (no IAM endpoint) it calls nothing.
	DeleteManagedInstanceProfiles(ctx context.Context, cluster string, nc *awsv1.EC2NodeClass, isolatedVPC bool) ([]string, bool, error)
	// DeleteLaunchTemplates deletes the class's launch templates (tagged
	// with the cluster and the class) and returns their names.
	DeleteLaunchTemplates(ctx context.Context, cluster string, nc *awsv1.EC2NodeClass) ([]string, error)
}

var ec2NodeClassGVK = awsv1.SchemeGroupVersion.WithKind("EC2NodeClass")

// WaitingOnNodeClaimTermination is the Event a deleted EC2NodeClass gets
// while NodeClaims still refer to it (Karpenter's reason and message).
const WaitingOnNodeClaimTermination = "WaitingOnNodeClaimTermination"

// finalizeNodeClasses runs Karpenter's EC2NodeClass finalizer on the
// snapshot's classes: it adds karpenter.k8s.aws/termination to each live
// class without it, and finishes each deleted class no NodeClaim refers to
// any more. It runs before the classes are resolved, so that a new class
// has the finalizer before its resolution creates an instance profile.
func (p *Provisioner) finalizeNodeClasses(ctx context.Context, inv *invocation, ncs []*awsv1.EC2NodeClass, claims []*karpv1.NodeClaim) error {
	if p.Cleanup == nil {
		return nil // no way to clean up: adding the finalizer would strand the classes
	}
	var errs []error
	var fresh []*karpv1.NodeClaim
	listed := false
	for _, nc := range ncs {
		step, waiting := nodeclass.Finalization(nc, claims)
		if step == nodeclass.FinalizerCleanUp {
			// The snapshot may be seconds old: confirm on a list of this
			// moment that no claim came meanwhile, before taking the
			// instance profile from under any instance.
			if !listed {
				all, err := kube.AllNodeClaims(ctx, p.Kube)
				if err != nil {
					return errors.Join(append(errs, fmt.Errorf("listing nodeclaims before finalizing ec2nodeclass %s: %w", nc.Name, err))...)
				}
				fresh, listed = all, true
			}
			step, waiting = nodeclass.Finalization(nc, fresh)
		}
		switch step {
		case nodeclass.FinalizerAdd:
			if _, err := p.Kube.SetEC2NodeClassFinalizer(ctx, nc, true); err != nil {
				errs = append(errs, err)
			}
		case nodeclass.FinalizerWait:
			p.Events.Normal(record.ObjectOf(ec2NodeClassGVK, nc), WaitingOnNodeClaimTermination, "Waiting on NodeClaim termination for %s", prettyNames(waiting, 5))
		case nodeclass.FinalizerCleanUp:
			if err := inv.guard.Check(ctx, "finalizing ec2nodeclass "+nc.Name); err != nil {
				return errors.Join(append(errs, err)...)
			}
			if err := p.cleanUp(ctx, nc); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// cleanUp deletes the class's instance profiles, then its launch
// templates, then removes the finalizer, in Karpenter's order; a failure
// leaves the finalizer for the next pass to try again.
func (p *Provisioner) cleanUp(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	cluster := p.Config.ClusterName
	profiles, legacy, err := p.Cleanup.DeleteManagedInstanceProfiles(ctx, cluster, nc, p.Config.IsolatedVPC)
	if err != nil {
		return fmt.Errorf("finalizing ec2nodeclass %s: %w", nc.Name, err)
	}
	templates, err := p.Cleanup.DeleteLaunchTemplates(ctx, cluster, nc)
	if err != nil {
		return fmt.Errorf("finalizing ec2nodeclass %s: deleting launch templates: %w", nc.Name, err)
	}
	if _, err := p.Kube.SetEC2NodeClassFinalizer(ctx, nc, false); err != nil {
		return err
	}
	p.Log.Info("finalized ec2nodeclass", "ec2nodeclass", nc.Name, "instance_profiles", profiles,
		"legacy_instance_profile", legacy, "launch_templates", templates)
	return nil
}

// prettyNames lists up to max names, then how many more, as Karpenter's
// utils.PrettySlice does.
func prettyNames(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d other(s)", strings.Join(names[:max], ", "), len(names)-max)
}
