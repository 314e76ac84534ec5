package nodeclass

import (
	"context"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// An EC2NodeClass carries Karpenter's finalizer karpenter.k8s.aws/termination
// while it exists. Once deleted, it stays until no NodeClaim refers to it;
// then the instance profiles made for its spec.role and its launch
// templates are deleted, and only then the finalizer is removed. A profile
// named by spec.instanceProfile is the user's and is never deleted: only
// profiles under the class's own IAM path (and Karpenter's legacy name) are.

// FinalizerStep is what the finalizer asks of one EC2NodeClass now.
type FinalizerStep int

const (
	// FinalizerNone: nothing to do (the finalizer is there and the class
	// lives, or the class is being deleted without the finalizer: someone
	// else's to finish).
	FinalizerNone FinalizerStep = iota
	// FinalizerAdd: the class lives without the finalizer; add it.
	FinalizerAdd
	// FinalizerWait: the class is being deleted and NodeClaims still refer
	// to it; their instances may still run with its instance profile.
	FinalizerWait
	// FinalizerCleanUp: the class is being deleted and no NodeClaim refers
	// to it: delete its profiles and templates, then remove the finalizer.
	FinalizerCleanUp
)

func (s FinalizerStep) String() string {
	switch s {
	case FinalizerAdd:
		return "add"
	case FinalizerWait:
		return "wait"
	case FinalizerCleanUp:
		return "cleanup"
	}
	return "none"
}

// Finalization decides the finalizer's step for nc given every NodeClaim
// of the cluster, and names the claims it waits for (sorted).
func Finalization(nc *awsv1.EC2NodeClass, claims []*karpv1.NodeClaim) (FinalizerStep, []string) {
	has := slices.Contains(nc.Finalizers, wellknown.AWSTerminationFinalizer)
	switch {
	case nc.DeletionTimestamp == nil && has:
		return FinalizerNone, nil
	case nc.DeletionTimestamp == nil:
		return FinalizerAdd, nil
	case !has:
		return FinalizerNone, nil
	}
	if waiting := ClaimsOf(nc.Name, claims); len(waiting) > 0 {
		return FinalizerWait, waiting
	}
	return FinalizerCleanUp, nil
}

// ClaimsOf names the NodeClaims (sorted) whose spec.nodeClassRef is the
// EC2NodeClass named, deleting ones included, as Karpenter's
// nodeclaimutils.ForNodeClass matches them (group, kind and name).
func ClaimsOf(name string, claims []*karpv1.NodeClaim) []string {
	var out []string
	for _, c := range claims {
		ref := c.Spec.NodeClassRef
		if ref != nil && ref.Group == awsv1.Group && ref.Kind == "EC2NodeClass" && ref.Name == name {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return out
}

// LegacyInstanceProfileName is the profile name Karpenter v0.32-v1.0 gave
// spec.role, <cluster>_<decimal FNV-1-64 of region and class name>
// (hashstructure's hash of that string); Karpenter v1.14.1 still deletes
// it when the class goes.
func LegacyInstanceProfileName(cluster, region, nodeClassName string) string {
	h := fnv.New64() // hashstructure's default hasher (FNV-1, not 1a)
	_, _ = h.Write([]byte(region + nodeClassName))
	return cluster + "_" + strconv.FormatUint(h.Sum64(), 10)
}

// iamProfileName is what IAM accepts as an instance profile name.
var iamProfileName = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)

// DeleteLegacyInstanceProfile deletes the class's profile of Karpenter's
// legacy name, if it exists, is this cluster's (tagged
// kubernetes.io/cluster/<cluster>=owned) and is not the class's
// spec.instanceProfile, and reports whether one was deleted. A name IAM
// would refuse (a cluster name with ':' in it) is skipped, as Karpenter does.
func (r *Resolver) DeleteLegacyInstanceProfile(ctx context.Context, cluster string, nc *awsv1.EC2NodeClass) (bool, error) {
	name := LegacyInstanceProfileName(cluster, r.Region, nc.Name)
	if !iamProfileName.MatchString(name) || name == aws.ToString(nc.Spec.InstanceProfile) {
		return false, nil
	}
	profile, err := r.getProfile(ctx, name)
	if awserr.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("getting legacy instance profile %s: %w", name, err)
	}
	owned := false
	for _, t := range profile.Tags {
		if aws.ToString(t.Key) == wellknown.ClusterTagKey(cluster) && aws.ToString(t.Value) == wellknown.OwnedTagValue {
			owned = true
		}
	}
	if !owned {
		return false, nil
	}
	if err := r.deleteProfile(ctx, name, profile.Roles); err != nil {
		return false, err
	}
	return true, nil
}

// DeleteManagedInstanceProfiles is the finalizer's instance profile step:
// it deletes the profiles made for the class's spec.role (its IAM path),
// then Karpenter's legacy profile of it, and returns what it deleted. In an
// isolated VPC it makes no IAM call at all, as Karpenter: IAM has no VPC
// endpoint, so the calls could only time out and keep the class from
// ever being deleted.
func (r *Resolver) DeleteManagedInstanceProfiles(ctx context.Context, cluster string, nc *awsv1.EC2NodeClass, isolatedVPC bool) ([]string, bool, error) {
	if isolatedVPC {
		return nil, false, nil
	}
	profiles, err := r.DeleteInstanceProfiles(ctx, cluster, nc)
	if err != nil {
		return profiles, false, err
	}
	legacy, err := r.DeleteLegacyInstanceProfile(ctx, cluster, nc)
	return profiles, legacy, err
}
