package lifecycle

import (
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	"k8s.io/utils/clock"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube"
)

// InstanceNotFoundSinceAnnotation records on a NodeClaim when EC2 first
// answered that its instance does not exist (RFC 3339). One NotFound proves
// nothing: DescribeInstances is eventually consistent and does not know an
// instance for seconds after its launch.
const InstanceNotFoundSinceAnnotation = "karpless.dev/instance-not-found-since"

// InstanceReader finds a NodeClaim's instances.
type InstanceReader interface {
	ForNodeClaim(ctx context.Context, nodeClaim string) ([]instance.Instance, error)
	Get(ctx context.Context, id string) (*instance.Instance, error)
}

// InstanceTerminator is InstanceReader plus termination (a failed
// TerminateInstances counted on failures, see instance.Provider.Delete).
type InstanceTerminator interface {
	InstanceReader
	Delete(ctx context.Context, failures instance.Counter, insts ...instance.Instance) error
}

// TerminateInstances terminates whatever instance the claim has, found by
// its provider ID and by its tag, and returns the ones not confirmed gone
// yet (terminated, or missing from EC2 for timing.NotFoundPatience), with how many
// termination requests it sent. An instance in a zone ARC shifts the
// cluster away from is not terminated and stays in waiting until the
// shift ends (instance.ErrZonallyShifted). The claim's finalizer may go only once the
// list is empty. A failed EC2 call counts in failed as Karpenter's Delete,
// and a failed TerminateInstances also in
// instance.TerminationFailuresMetric, by the instance's zone.
func TerminateInstances(ctx context.Context, k *kube.Clients, api InstanceTerminator, clk clock.PassiveClock, nc *karpv1.NodeClaim, failed cloud.Errors) (waiting []string, sent int, err error) {
	ids := map[string]bool{}
	if id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID); id != "" {
		ids[id] = true
	}
	tagged, err := api.ForNodeClaim(ctx, nc.Name)
	if err != nil {
		return nil, 0, failed.Count(cloud.MethodDelete, err)
	}
	for _, i := range tagged {
		ids[i.ID] = true
	}
	var missing []string
	for _, id := range sortedKeys(ids) {
		inst, err := api.Get(ctx, id)
		if errors.Is(err, instance.ErrNotFound) {
			missing = append(missing, id)
			continue
		}
		if err != nil {
			return nil, sent, failed.Count(cloud.MethodDelete, err)
		}
		if inst.State == "terminated" {
			continue
		}
		waiting = append(waiting, id)
		if inst.State != "shutting-down" {
			err := api.Delete(ctx, failed.Metrics, *inst)
			if errors.Is(err, instance.ErrZonallyShifted) {
				// Its zone is shifted away from: it is terminated once the
				// shift ends (as Karpenter v1.14), and waited for meanwhile.
				continue
			}
			if err != nil {
				return nil, sent, failed.Count(cloud.MethodDelete, err)
			}
			sent++
		}
	}
	gone, err := ConfirmMissing(ctx, k, clk, nc, len(missing) > 0)
	if err != nil {
		return nil, sent, err
	}
	if !gone {
		waiting = append(waiting, missing...)
	}
	return waiting, sent, nil
}

// ConfirmMissing keeps track of how long EC2 has not known a claim's
// instance: with missing it records the first time on the claim and
// reports true once timing.NotFoundPatience has passed since; without, it forgets
// an earlier record (the instance showed up after all).
func ConfirmMissing(ctx context.Context, k *kube.Clients, clk clock.PassiveClock, nc *karpv1.NodeClaim, missing bool) (bool, error) {
	v, recorded := nc.Annotations[InstanceNotFoundSinceAnnotation]
	if !missing {
		if recorded {
			return false, k.AnnotateNodeClaim(ctx, nc, map[string]*string{InstanceNotFoundSinceAnnotation: nil})
		}
		return false, nil
	}
	if since, err := time.Parse(time.RFC3339, v); recorded && err == nil {
		return clk.Since(since) >= timing.NotFoundPatience, nil
	}
	now := clk.Now().UTC().Format(time.RFC3339)
	return false, k.AnnotateNodeClaim(ctx, nc, map[string]*string{InstanceNotFoundSinceAnnotation: &now})
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return slices.Clip(out)
}
