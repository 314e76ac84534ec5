package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/karpless/karpless/shared/local/whatif"
)

var explainCommand = command{
	name:    "explain",
	summary: "why a pod is pending and where it would go (or where it runs); why a node's NodeClaim is what it is and what disruption would do to it (read-only)",
	run: func(ctx context.Context, c *cli, args []string) error {
		return dispatch(ctx, c, "explain", explainSubcommands, args)
	},
}

// explainSubcommands take the resource names kubectl takes: singular,
// plural and short name, in any case.
var explainSubcommands = []subcommand{
	{name: "pod", aliases: []string{"pods", "po"}, args: "[flags] <namespace>/<name> (or -n <namespace> <name>)",
		summary: "where the pod would go (existing node, in-flight NodeClaim, new NodeClaim of which NodePool, type, zone, $/h), or why it goes nowhere, NodePool by NodePool and instance type by instance type; for a pod that runs, its node and what disruption would do to it",
		run:     explainPod},
	{name: "node", aliases: []string{"nodes", "no"}, args: "[flags] <node name>",
		summary: "the node's NodeClaim: as explain nodeclaim", run: explainNode},
	{name: "nodeclaim", aliases: []string{"nodeclaims"}, args: "[flags] <nodeclaim or node name>",
		summary: "why this instance type, zone and capacity type, its price, expiry and drift, and what each disruption method would do to it and what blocks it",
		run:     explainNodeClaim},
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
		return badUsage(fs, "-n %s disagrees with %s", *ns, pos[0])
	case !ok:
		namespace, name = *ns, pos[0]
		if namespace == "" {
			namespace = "default"
		}
	}
	if namespace == "" || name == "" {
		return badUsage(fs, "%q: want <namespace>/<name>", pos[0])
	}
	w, err := world(ctx, cf, df)
	if err != nil {
		return err
	}
	r, err := w.ExplainPod(namespace, name)
	var bound *whatif.NotPendingError
	if errors.As(err, &bound) {
		// A pod that runs needs nothing provisioned: say where it runs
		// and what may happen to its node instead.
		rp, err := explainRunning(w, bound)
		if err != nil {
			return err
		}
		return emit(c, df, rp)
	}
	if err != nil {
		return err
	}
	return emit(c, df, r)
}

func explainNodeClaim(ctx context.Context, c *cli, args []string) error {
	return explainClaim(ctx, c, "karpless explain nodeclaim", "[flags] <nodeclaim or node name>", args)
}

func explainNode(ctx context.Context, c *cli, args []string) error {
	return explainClaim(ctx, c, "karpless explain node", "[flags] <node name>", args)
}

func explainClaim(ctx context.Context, c *cli, name, synopsis string, args []string) error {
	fs := flags(c, name, synopsis)
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

// podRunning is the state of a pod bound to a node that stays.
const podRunning = "running"

// runningPodReport answers explain pod for a pod bound to a node that
// stays: where it runs and, for a node Karpless launched, the node's
// NodeClaim explained.
type runningPodReport struct {
	Pod   string `json:"pod"`
	State string `json:"state"`
	Node  string `json:"node"`
	// Managed is false for a node Karpless did not launch (no NodeClaim).
	Managed   bool                    `json:"managed"`
	NodeClaim *whatif.NodeClaimReport `json:"nodeClaim,omitempty"`
}

func explainRunning(w *whatif.World, bound *whatif.NotPendingError) (*runningPodReport, error) {
	r := &runningPodReport{Pod: bound.Pod, State: podRunning, Node: bound.Node, Managed: bound.NodeClaim != ""}
	if !r.Managed {
		return r, nil
	}
	nc, err := w.ExplainNodeClaim(bound.NodeClaim)
	if err != nil {
		return nil, fmt.Errorf("pod %s runs on node %s: %w", bound.Pod, bound.Node, err)
	}
	r.NodeClaim = nc
	return r, nil
}

func (r *runningPodReport) WriteText(w io.Writer) error {
	if r.NodeClaim == nil {
		_, err := fmt.Fprintf(w, "Pod %s (%s): runs on node %s, which Karpless did not launch (no NodeClaim: a managed node group, Fargate or a self-managed node); Karpless never disrupts that node.\n", r.Pod, r.State, r.Node)
		return err
	}
	o := r.NodeClaim.Offering
	price := fmt.Sprintf("$%.4f/h", o.PricePerHour)
	if o.PricePerHour == 0 {
		price = "price unknown"
	}
	if _, err := fmt.Fprintf(w, "Pod %s (%s): runs on node %s, NodeClaim %s of NodePool %s, %s %s in %s at %s; nothing is provisioned for it. What may happen to its node:\n\n",
		r.Pod, r.State, r.Node, r.NodeClaim.NodeClaim, r.NodeClaim.NodePool, o.InstanceType, o.CapacityType, o.Zone, price); err != nil {
		return err
	}
	return r.NodeClaim.WriteText(w)
}
