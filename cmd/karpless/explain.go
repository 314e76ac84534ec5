package main

import (
	"context"
	"fmt"
	"strings"
)

var explainCommand = command{
	name:    "explain",
	summary: "why a pod is pending and where it would go; why a NodeClaim is what it is and what disruption would do to it (read-only)",
	run: func(ctx context.Context, c *cli, args []string) error {
		return dispatch(ctx, c, "explain", explainSubcommands, args)
	},
}

var explainSubcommands = []subcommand{
	{"pod", "[flags] <namespace>/<name> (or -n <namespace> <name>)",
		"where the pod would go (existing node, in-flight NodeClaim, new NodeClaim of which NodePool, type, zone, $/h), or why it goes nowhere, NodePool by NodePool and instance type by instance type", explainPod},
	{"nodeclaim", "[flags] <nodeclaim or node name>",
		"why this instance type, zone and capacity type, its price, expiry and drift, and what each disruption method would do to it and what blocks it", explainNodeClaim},
}

func explainPod(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless explain pod", "[flags] <namespace>/<name>")
	cf := addClusterFlags(fs)
	df := addDecisionFlags(fs)
	ns := fs.String("n", "", "the pod's namespace, when the argument is a bare name (default: default)")
	pos, err := parseDecision(fs, args, 1, df)
	if err != nil {
		return err
	}
	namespace, name, ok := strings.Cut(pos[0], "/")
	switch {
	case ok && *ns != "" && *ns != namespace:
		return fmt.Errorf("-n %s disagrees with %s", *ns, pos[0])
	case !ok:
		namespace, name = *ns, pos[0]
		if namespace == "" {
			namespace = "default"
		}
	}
	if namespace == "" || name == "" {
		return fmt.Errorf("%q: want <namespace>/<name>", pos[0])
	}
	w, err := world(ctx, cf, df)
	if err != nil {
		return err
	}
	r, err := w.ExplainPod(namespace, name)
	if err != nil {
		return err
	}
	return emit(c, df, r)
}

func explainNodeClaim(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless explain nodeclaim", "[flags] <nodeclaim or node name>")
	cf := addClusterFlags(fs)
	df := addDecisionFlags(fs)
	pos, err := parseDecision(fs, args, 1, df)
	if err != nil {
		return err
	}
	w, err := world(ctx, cf, df)
	if err != nil {
		return err
	}
	r, err := w.ExplainNodeClaim(pos[0])
	if err != nil {
		return err
	}
	return emit(c, df, r)
}
