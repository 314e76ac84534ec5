package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/karpless/karpless/shared/local/demo"
)

var demoCommand = command{
	name:    "demo",
	summary: "run a scenario end to end on this machine (local API server, AWS emulator, the functions' engines)",
	run:     runDemo,
}

func runDemo(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless demo", "[--scenario file.yaml] [--report dir] [-v]")
	scenario := fs.String("scenario", "", "a scenario file (default: the bundled one, shared/local/demo/scenarios/default.yaml)")
	report := fs.String("report", "demo-report", "folder for the HTML report")
	verbose := fs.Bool("v", false, "also print the functions' JSON logs")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) != 0 {
		return badUsage(fs, "")
	}
	// The demo starts its control plane from the shared build: built here
	// the first time, with its phases, so demo works outside a checkout.
	if _, err := ensureControlPlane(ctx, c); err != nil {
		return err
	}
	var s *demo.Scenario
	var err error
	if *scenario == "" {
		s, err = demo.DefaultScenario()
	} else {
		s, err = demo.LoadScenario(*scenario)
	}
	if err != nil {
		return err
	}
	o := demo.Options{Scenario: s, Out: c.out, ReportDir: *report}
	if *verbose {
		o.Log = slog.New(slog.NewJSONHandler(c.err, nil))
	}
	sum, err := demo.Run(ctx, o)
	if sum != nil {
		if sum.Report != "" {
			c.printf("\nreport: %s\n", sum.Report)
		}
		c.printf("%s\n", sum.Line())
	}
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}
