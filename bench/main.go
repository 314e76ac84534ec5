// Command bench runs Karpenter's scheduler, configured as in production, and
// Karpless's on the same pods, instance types, NodePools and DaemonSets.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/karpenter/pkg/operator/logging"

	"github.com/karpless/karpless/bench/bound"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/local/workload"
)

type config struct {
	cases          []workload.Case
	mixes          []workload.Mix
	sizes          []int
	karplessSizes  []int
	runs           int
	karpenterRuns  int
	karpenterMax   int
	consolidateMax int
	referenceMax   int
	skipKarpenter  bool
	showTypes      bool
}

func main() {
	var cfg config
	cases := flag.String("cases", "getting-started,burstable", "NodePool cases: getting-started, burstable")
	mixes := flag.String("mixes", "karpenter,karpenter-no-anti,microservices,batch", "pod mixes")
	sizes := flag.String("sizes", "1000,5000,20000", "batch sizes run on both schedulers")
	ksizes := flag.String("karpless-sizes", "50000", "batch sizes run on Karpless alone")
	flag.IntVar(&cfg.runs, "runs", 3, "runs per scheduler, batch and case (medians are reported)")
	flag.IntVar(&cfg.karpenterRuns, "karpenter-runs", 0, "Karpenter's runs when fewer than -runs (0: -runs); for a quick look only")
	flag.IntVar(&cfg.karpenterMax, "karpenter-max", 20000, "largest batch Karpenter runs")
	flag.IntVar(&cfg.consolidateMax, "consolidate-max", 20000, "largest batch whose result gets a consolidation pass")
	flag.IntVar(&cfg.referenceMax, "reference-max", 1000, "largest batch on which Karpenter also runs once with 5 workers and no timeout (its test setting), getting-started case; 0: never")
	flag.BoolVar(&cfg.skipKarpenter, "skip-karpenter", false, "run only Karpless")
	flag.BoolVar(&cfg.showTypes, "types", false, "print the instance types each side launches most")
	flag.Parse()
	log.SetLogger(logging.NopLogger)
	for _, c := range split(*cases) {
		cfg.cases = append(cfg.cases, workload.Case(c))
	}
	for _, m := range split(*mixes) {
		cfg.mixes = append(cfg.mixes, workload.Mix(m))
	}
	var err error
	if cfg.sizes, err = ints(*sizes); err == nil {
		cfg.karplessSizes, err = ints(*ksizes)
	}
	if err != nil || cfg.runs < 1 {
		fmt.Fprintln(os.Stderr, "bad flags:", err)
		os.Exit(2)
	}
	showTypes = cfg.showTypes
	if cfg.karpenterRuns <= 0 || cfg.karpenterRuns > cfg.runs {
		cfg.karpenterRuns = cfg.runs
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func ints(s string) ([]int, error) {
	var out []int
	for _, x := range split(s) {
		n, err := strconv.Atoi(x)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

var showTypes bool

// row is the medians of one scheduler on one batch.
type row struct {
	who      string
	o        outcome
	s        sample
	cost     float64
	credits  float64
	after    *consolidated
	complete bool
	// bound is the LP lower bound of the batch (0: not computed).
	bound float64
}

// gaps are plan / bound before and after the consolidation pass (0 when
// there is no bound or no pass).
func (r row) gaps() (before, after float64) {
	if r.bound <= 0 {
		return 0, 0
	}
	before = r.cost / r.bound
	if r.after != nil {
		after = r.after.cost.total() / r.bound
	}
	return before, after
}

func run(cfg config) (err error) {
	types, err := workload.CatalogTypes()
	if err != nil {
		return err
	}
	ktypes := convertTypes(types)
	daemons := workload.DaemonSets()
	overhead := workload.DaemonOverhead()
	fmt.Printf("catalog: %d instance types x %d zones; on-demand everywhere, spot only where a spot market exists (workload.HasSpotMarket), at estimated prices\n", len(types), len(workload.Zones))
	fmt.Printf("DaemonSets: %d (aws-node, kube-proxy, ebs-csi-node, eks-pod-identity-agent, aws-for-fluent-bit): %s cpu, %s memory per node\n", len(daemons), overhead.Cpu(), overhead.Memory())
	fmt.Printf("$/h per node: offering + 20 GiB gp3 root volume ($%.4f) + surplus CPU credits of t3/t3a ($0.05) and t4g ($0.04) per vCPU-h above baseline, utilization = requested cpu / vCPUs\n", workload.RootVolumeHourly)
	fmt.Printf("Karpenter v1.14.1 in production configuration: %d worker (CPU_REQUESTS %d), a solve timeout of %s of CPU, %d types kept per NodeClaim, 60 at launch; runs: Karpless %d, Karpenter %d, medians; CPU = getrusage of the process; GOMAXPROCS=%d\n",
		productionCPURequests/1000, productionCPURequests, productionTimeout, 600, cfg.runs, cfg.karpenterRuns, runtime.GOMAXPROCS(0))
	minSpeed5k, maxCost, maxGap := math.Inf(1), 0.0, 0.0
	// below lists the plans that cost less than the lower bound: the
	// bound is then wrong, and the bench fails after printing.
	var below []string
	defer func() {
		if len(below) > 0 && err == nil {
			err = fmt.Errorf("the lower bound is above a feasible plan's $/h: %s", strings.Join(below, "; "))
		}
	}()
	var costNote []string
	for _, c := range cfg.cases {
		for _, mix := range cfg.mixes {
			probe, err := workload.Build(mix, 10, 1)
			if err != nil {
				return err
			}
			pools := workload.NodePools(c, probe.ExtraNodePools)
			kl := &karplessWorld{pools: pools, daemons: daemons, classes: map[string]*scheduling.NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: types}}}
			kw := newKarpenterWorld(types, ktypes, pools, daemons)
			fmt.Printf("\n== case %s, mix %s (NodePools: %s)\n", c, mix, poolNames(pools))
			fmt.Printf("%7s  %-16s %10s %6s %10s %8s %10s %10s %6s %9s %8s %8s %9s %7s %8s\n", "pods", "scheduler", "NodeClaims", "nodes", "$/h", "credits", "$/h after", "bound $/h", "gap", "gap after", "cpu s", "wall s", "heap MiB", "failed", "unplaced")
			all := append(slices.Clone(cfg.sizes), cfg.karplessSizes...)
			for _, n := range all {
				both := slices.Contains(cfg.sizes, n) && !cfg.skipKarpenter && n <= cfg.karpenterMax
				w, err := workload.Build(mix, n, int64(n)+int64(len(mix)))
				if err != nil {
					return err
				}
				lb := lowerBound(c, mix, n, w.Pods, pools, types, daemons)
				ours, theirs := row{bound: lb}, row{bound: lb}
				var oursS, theirsS []sample
				var oursC, theirsC []float64
				var last *scheduling.Results
				for i := 0; i < cfg.runs; i++ {
					o, s, r := kl.runKarpless(w.Pods)
					ours.o, last = o, r
					oursS, oursC = append(oursS, s), append(oursC, o.cost.total())
					if both && i < cfg.karpenterRuns {
						fmt.Fprintf(os.Stderr, "karpenter %s %s %d run %d...\n", c, mix, n, i+1)
						o, s := kw.runKarpenter(w.Pods, true)
						theirs.o = o
						theirsS, theirsC = append(theirsS, s), append(theirsC, o.cost.total())
					}
				}
				ours.who, ours.s, ours.cost, ours.credits, ours.complete = "karpless", median(oursS), medianFloat(oursC), ours.o.cost.credits, ours.o.failed == 0
				if n <= cfg.consolidateMax {
					after := kl.consolidate(last, w.PDBs, ours.o.cost)
					ours.after = &after
					fmt.Fprintf(os.Stderr, "consolidation pass %s %s %d: %.1f s cpu, %s\n", c, mix, n, after.cpu.Seconds(), after.what)
				}
				print(n, ours)
				if ours.complete {
					b, a := ours.gaps()
					maxGap = max(maxGap, b, a)
					below = append(below, belowBound(c, mix, n, "karpless", b, a)...)
				}
				if !both {
					continue
				}
				theirs.who, theirs.s, theirs.cost, theirs.credits = "karpenter", median(theirsS), medianFloat(theirsC), theirs.o.cost.credits
				theirs.complete = !theirs.o.timedOut && theirs.o.unplaced == 0
				print(n, theirs)
				if theirs.complete && theirs.o.failed == 0 {
					b, _ := theirs.gaps()
					maxGap = max(maxGap, b)
					below = append(below, belowBound(c, mix, n, "karpenter", b, 0)...)
				}
				st := theirs.o.stages
				fmt.Printf("%7s  %-16s cpu of the last run: NewTopology+NewScheduler %.1f s, Solve %.1f s, TruncateInstanceTypes %.1f s%s\n", "", "", st[0].Seconds(), st[1].Seconds(), st[2].Seconds(), map[bool]string{true: "; Solve timed out", false: ""}[theirs.o.timedOut])
				if c == workload.GettingStarted && n <= cfg.referenceMax {
					o, s := kw.runKarpenter(w.Pods, false)
					print(n, row{who: "karpenter-5w ref", o: o, s: s, cost: o.cost.total(), credits: o.cost.credits, bound: lb})
				}
				speed := theirs.s.cpu.Seconds() / ours.s.cpu.Seconds()
				ratio := ours.cost / theirs.cost
				note := ""
				if !theirs.complete {
					note = fmt.Sprintf(" (Karpenter left %d pods unplaced at its %s timeout: cost ratio not comparable, left out)", theirs.o.unplaced, productionTimeout)
				}
				fmt.Printf("%7d  speedup %.0fx cpu; cost ratio %.3f (Karpless $/h / Karpenter $/h)%s\n", n, speed, ratio, note)
				if n == 5000 {
					minSpeed5k = min(minSpeed5k, speed)
				}
				if theirs.complete {
					maxCost = max(maxCost, ratio)
				} else {
					costNote = append(costNote, fmt.Sprintf("%s/%s/%d", c, mix, n))
				}
			}
		}
	}
	if cfg.skipKarpenter {
		return nil
	}
	if len(costNote) > 0 {
		fmt.Printf("\ncost ratios left out (Karpenter timed out): %s\n", strings.Join(costNote, ", "))
	}
	if math.IsInf(minSpeed5k, 1) {
		fmt.Println("\nno 5,000-pod batch on both sides: speedup not computed")
		minSpeed5k = 0
	}
	fmt.Printf("\nsmallest speedup at 5,000 pods over all cases and mixes; largest cost ratio over all cases, mixes and sizes Karpenter completed; largest gap (plan $/h / LP lower bound) over every row that placed all pods: Karpless before and after its consolidation pass, Karpenter\n")
	fmt.Printf("speedup-vs-karpenter=%.1f cost-ratio=%.3f gap=%.3f\n", minSpeed5k, maxCost, maxGap)
	return nil
}

func poolNames(pools []*karpv1.NodePool) string {
	var names []string
	for _, p := range pools {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

func topTypes(m map[string]int, k int) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	var out []string
	for _, n := range names[:min(k, len(names))] {
		out = append(out, fmt.Sprintf("%s %d", n, m[n]))
	}
	return strings.Join(out, ", ")
}

func print(n int, r row) {
	nodes, after, lb, gap, gapAfter := "", "", "-", "-", ""
	if r.after != nil {
		nodes, after = strconv.Itoa(r.after.nodes), fmt.Sprintf("%.2f", r.after.cost.total())
	}
	if r.bound > 0 {
		b, a := r.gaps()
		lb, gap = fmt.Sprintf("%.2f", r.bound), fmt.Sprintf("%.3f", b)
		if r.after != nil {
			gapAfter = fmt.Sprintf("%.3f", a)
		}
	}
	fmt.Printf("%7d  %-16s %10d %6s %10.2f %8.2f %10s %10s %6s %9s %8.3f %8.3f %9.1f %7d %8d\n", n, r.who, r.o.claims, nodes, r.cost, r.credits, after, lb, gap, gapAfter,
		r.s.cpu.Seconds(), r.s.wall.Seconds(), float64(r.s.heap)/(1<<20), r.o.failed, r.o.unplaced)
	if showTypes {
		fmt.Printf("%7s  %-16s types: %s\n", "", "", topTypes(r.o.types, 8))
	}
}

// lowerBound is the LP bound of the batch (bench/bound), 0 when the LP
// could not be solved (the row then shows no bound and no gap).
func lowerBound(c workload.Case, mix workload.Mix, n int, pods []*corev1.Pod, pools []*karpv1.NodePool, types []*scheduling.InstanceType, daemons []*appsv1.DaemonSet) float64 {
	c0 := cpuTime()
	r, err := bound.Compute(bound.Input{Pods: pods, NodePools: pools, Types: types, DaemonSets: daemons, VolumeHourly: workload.RootVolumeHourly})
	if err != nil {
		fmt.Fprintf(os.Stderr, "lower bound %s %s %d: %v\n", c, mix, n, err)
		return 0
	}
	fmt.Fprintf(os.Stderr, "lower bound %s %s %d: $%.2f/h, LP of %d parts, %d pod groups, %d node kinds, %d rows; %d pods no node kind takes; %.1f s cpu\n",
		c, mix, n, r.Hourly, r.Parts, r.Groups, r.Columns, r.Rows, r.Unplaceable, (cpuTime() - c0).Seconds())
	return r.Hourly
}

// belowBound names the plans (gaps before and after consolidation, 0 for
// none) that cost less than the bound, beyond rounding.
func belowBound(c workload.Case, mix workload.Mix, n int, who string, gaps ...float64) []string {
	var out []string
	for i, g := range gaps {
		if g > 0 && g < 1-1e-9 {
			out = append(out, fmt.Sprintf("%s %s %d %s%s: plan/bound %.6f", c, mix, n, who, map[bool]string{true: " after consolidation"}[i == 1], g))
		}
	}
	return out
}
