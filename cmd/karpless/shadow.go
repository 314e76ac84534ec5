package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/local/shadowreport"
)

// karpless shadow report: what Karpless deployed with -c mode=shadow would
// have done beside what Karpenter did (docs/shadow.md). Read-only, with the
// kubeconfig's user, like explain and simulate.

var shadowCommand = command{
	name:    "shadow",
	summary: "shadow mode: report what Karpless would have done beside what Karpenter did, with the $/h of each (read-only)",
	run: func(ctx context.Context, c *cli, args []string) error {
		return dispatch(ctx, c, "shadow", []subcommand{{
			name: "report", args: "[--since 24h] [--logs FILE]... [-o text|json|yaml] [--kubeconfig FILE] [--context NAME]",
			summary: "Karpless's decision records (stores, Events, log files) beside the NodeClaims Karpenter created and deleted, priced as Karpless prices",
			run:     shadowReport,
		}}, args)
	},
}

// logFiles is a repeatable --logs flag.
type logFiles []string

func (l *logFiles) String() string     { return fmt.Sprint(*l) }
func (l *logFiles) Set(v string) error { *l = append(*l, v); return nil }

func shadowReport(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless shadow report", "[--since 24h] [--logs FILE]... [-o text|json|yaml] [flags]")
	cf := addClusterFlags(fs)
	since := fs.Duration("since", 24*time.Hour, "how far back to look (decisions and Karpenter's NodeClaims created or deleted in the window)")
	output := outputFlag(fs)
	var logs logFiles
	fs.Var(&logs, "logs", "a file of the functions' log lines (exported from CloudWatch Logs: aws logs tail or filter-log-events); repeatable")
	if err := parseNoArgs(fs, args, output); err != nil {
		return err
	}
	if *since <= 0 {
		return badUsage(fs, "--since %s: want a positive duration such as 24h", *since)
	}
	kc, source, err := cf.clients()
	if err != nil {
		return err
	}
	src, err := shadowreport.Read(ctx, kc, cf.namespace, source)
	if err != nil {
		return fmt.Errorf("reading %s: %w", source, err)
	}
	for _, name := range logs {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		ds, others, err := shadow.ParseLogs(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		src.AddLogs(ds, others)
	}
	now := time.Now()
	r, err := shadowreport.Build(src, shadowreport.Window{Since: now.Add(-*since), Until: now})
	if err != nil {
		return err
	}
	return write(c.out, *output, r, r.WriteText)
}
