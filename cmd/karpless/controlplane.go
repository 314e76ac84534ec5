package main

import (
	"context"
	"errors"
	"os"

	"github.com/karpless/karpless/shared/local/controlplane"
	"github.com/karpless/karpless/shared/local/controlplane/kubebuild"
)

// ensureControlPlane finds the local control plane's binaries and, the
// first time on this machine, builds them into the user's cache, where
// every checkout and `make kube` find them too (kubebuild), printing its
// phases and estimates on standard error. It works from any folder: a CLI
// installed with go install needs no checkout. A KARPLESS_KUBE_BIN that
// lacks them is the user's choice, reported, not built into.
func ensureControlPlane(ctx context.Context, c *cli) (string, error) {
	d, err := controlplane.FindBinDir()
	if err == nil || !errors.Is(err, controlplane.ErrNotBuilt) || os.Getenv(controlplane.BinEnv) != "" {
		return d, err
	}
	return kubebuild.Ensure(ctx, kubebuild.Options{Out: c.err})
}
