package app

import (
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/aws/pricing"
)

// Warm is what a warm container remembers between invocations: one per
// container (Load makes it), shared by every invocation the container
// runs and by none of another container's, so a cold start begins empty.
// Only what is safe to be stale for its bounded time lives here; what must
// outlive a container is in the cluster.
type Warm struct {
	// Prices is the last pricing book decoded.
	Prices pricing.Cache
	// Selectors is what the EC2NodeClasses' subnet, security group and
	// AMI queries found, for timing.SelectorCacheTTL (as Karpenter's
	// providers cache them).
	Selectors nodeclass.SelectorCache
}
