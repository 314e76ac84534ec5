// Command kube builds the local control plane from source into the user's
// cache, once, as `make kube` does; a complete build returns at once.
//
//	go run ./hack/kube [-link .cache/kube/bin]
//
// -link makes the checkout's .cache/kube/bin a link to the shared build,
// after taking any binaries of the same version built there before the
// cache was shared. KARPLESS_KUBE_BIN, when set, is built into instead.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/karpless/karpless/shared/local/controlplane"
	"github.com/karpless/karpless/shared/local/controlplane/kubebuild"
)

func main() {
	link := flag.String("link", "", "make this path (a checkout's .cache/kube/bin) a link to the built binaries")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := kubebuild.Options{BinDir: os.Getenv(controlplane.BinEnv), Out: os.Stderr}
	if *link != "" {
		o.Adopt = []string{*link}
	}
	bin, err := kubebuild.Ensure(ctx, o)
	if err == nil && *link != "" && o.BinDir == "" {
		err = kubebuild.Link(*link, bin)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "local control plane:", bin)
}
