package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/karpless/karpless/shared/local/soak"
)

var soakCommand = command{
	name:    "soak",
	summary: "run the seeded chaos soak: the functions on their real triggers in a hostile world, invariants checked",
	run:     runSoak,
}

func runSoak(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless soak", "[--seeds n] [--first-seed s] [--hours h] [--dir folder] [--quick] [--fail-fast]")
	seeds := fs.Int("seeds", 20, "how many seeds (worlds) to run, one after the other")
	first := fs.Uint64("first-seed", 1, "the first seed; the others follow it")
	hours := fs.Float64("hours", 6, "virtual hours of churn per seed (then the world settles)")
	dir := fs.String("dir", "", "keep each seed's control-plane and function logs here (default: a temporary folder, kept only for a seed with violations)")
	quick := fs.Bool("quick", false, "settle for at most 25 virtual minutes instead of 40")
	failFast := fs.Bool("fail-fast", false, "stop at the first violation (the mutation check asks only whether a planted fault is caught)")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) != 0 || *seeds < 1 || *hours <= 0 {
		return badUsage(fs, "")
	}
	// client-go logs every request a deadline cuts short; in a soak that
	// is routine, and the soak reports what matters itself.
	klog.SetLogger(logr.Discard())
	o := soak.Options{Duration: time.Duration(*hours * float64(time.Hour)), Dir: *dir, Out: c.out, Quick: *quick, FailFast: *failFast}
	for i := range *seeds {
		o.Seeds = append(o.Seeds, *first+uint64(i))
	}
	r, err := soak.Run(ctx, o)
	c.printf("%s\n", r.Line())
	if err != nil {
		return err
	}
	if len(r.Violations) > 0 {
		return fmt.Errorf("%d invariant violations", len(r.Violations))
	}
	return nil
}
