package emulator

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube"
)

// Leaks returns the instances that are neither terminated nor shutting
// down and that no NodeClaim references by provider ID: capacity that is
// paid for and that nothing will ever clean up.
func (e *Emulator) Leaks(ctx context.Context, clients *kube.Clients) ([]Instance, error) {
	referenced := map[string]bool{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := clients.NodeClaims.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing NodeClaims: %w", err)
		}
		for _, nc := range list.Items {
			if id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID); id != "" {
				referenced[id] = true
			}
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	return e.Instances(func(i Instance) bool {
		return i.State != StateTerminated && i.State != StateShuttingDown && !referenced[i.ID]
	}), nil
}
