package main

import "context"

var simulateCommand = command{
	name:    "simulate",
	summary: "what-if: one provisioning and one disruption pass on the live cluster or a saved snapshot, with $/h before and after (read-only)",
	run:     simulate,
}

func simulate(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless simulate", "[--snapshot file] [-o text|json] [flags]")
	cf := addClusterFlags(fs)
	df := addDecisionFlags(fs)
	if _, err := parseDecision(fs, args, 0, df); err != nil {
		return err
	}
	w, err := world(ctx, cf, df)
	if err != nil {
		return err
	}
	return emit(c, df, w.Simulate())
}
