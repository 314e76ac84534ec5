package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/whatif"
)

// This file holds what explain, simulate and snapshot share: reading a
// cluster through a kubeconfig, read-only, or a saved snapshot file.

// clusterFlags choose the cluster and how to read it.
type clusterFlags struct {
	kubeconfig, context, namespace string
	timeout                        time.Duration
}

func addClusterFlags(fs *flag.FlagSet) *clusterFlags {
	f := &clusterFlags{}
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&f.context, "context", "", "the kubeconfig context (default: its current context)")
	fs.StringVar(&f.namespace, "karpless-namespace", config.DefaultNamespace, "the namespace of Karpless's ConfigMaps (the functions' KARPLESS_NAMESPACE)")
	fs.DurationVar(&f.timeout, "request-timeout", time.Minute, "the timeout of each request to the API server")
	return f
}

// decisionFlags are the function settings that change decisions, and the
// snapshot to answer from.
type decisionFlags struct {
	snapshot     string
	output       string
	spotToSpot   bool
	reservedENIs int
	now          string
	searchLimit  time.Duration
	reservations string
}

func addDecisionFlags(fs *flag.FlagSet) *decisionFlags {
	f := &decisionFlags{}
	fs.StringVar(&f.snapshot, "snapshot", "", "answer from this file written by karpless snapshot instead of the live cluster")
	fs.StringVar(&f.output, "o", outputText, "output format: text, json or yaml")
	fs.BoolVar(&f.spotToSpot, "spot-to-spot", false, "assume SPOT_TO_SPOT_CONSOLIDATION=true, as set on the disruption function")
	fs.IntVar(&f.reservedENIs, "reserved-enis", 0, "assume the functions' RESERVED_ENIS")
	fs.StringVar(&f.now, "now", "", "decide as at this RFC 3339 time (default: when the snapshot was taken)")
	fs.DurationVar(&f.searchLimit, "search-limit", time.Minute, "stop the consolidation search after this long")
	fs.StringVar(&f.reservations, "reservations", "", "how many more instances capacity reservations can take, id=N,... (EC2's count is not in the cluster; unnamed ones are assumed to have room)")
	return f
}

// parseReservations reads --reservations: id=N pairs, comma-separated.
func parseReservations(s string) (map[string]int, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]int{}
	for _, kv := range strings.Split(s, ",") {
		id, n, ok := strings.Cut(strings.TrimSpace(kv), "=")
		v, err := strconv.Atoi(n)
		if !ok || err != nil || v < 0 || !strings.HasPrefix(id, "cr-") {
			return nil, fmt.Errorf("--reservations %q: want cr-id=N,... with N >= 0", s)
		}
		out[id] = v
	}
	return out, nil
}

func (d *decisionFlags) validate(fs *flag.FlagSet) error {
	if err := checkOutput(fs, d.output); err != nil {
		return err
	}
	if _, err := parseReservations(d.reservations); err != nil {
		return badUsage(fs, "%v", err)
	}
	return nil
}

// parseDecision parses a what-if command's arguments: exactly want
// positional ones, and valid decision flags.
func parseDecision(fs *flag.FlagSet, args []string, want int, df *decisionFlags) ([]string, error) {
	pos, err := parse(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != want {
		return nil, badUsage(fs, "")
	}
	return pos, df.validate(fs)
}

// emptyConfigHint is the help for a missing kubeconfig.
const emptyConfigHint = "no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or write ~/.kube/config (for EKS: aws eks update-kubeconfig --name <cluster>)"

// clients builds read-only clients from the kubeconfig, with client-go's
// loading rules (--kubeconfig, else $KUBECONFIG, else ~/.kube/config).
// source names the context and server, for reports and snapshot files.
func (f *clusterFlags) clients() (c *kube.Clients, source string, err error) {
	cfg, source, err := f.restConfig()
	if err != nil {
		return nil, "", err
	}
	cfg.Wrap(readOnly)
	c, err = kube.NewClients(cfg)
	if err != nil {
		return nil, "", err
	}
	return c, source, nil
}

// restConfig loads the kubeconfig (clients' loading rules); source names
// the context and server.
func (f *clusterFlags) restConfig() (cfg *rest.Config, source string, err error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context})
	cfg, err = cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, "", errors.New(emptyConfigHint)
		}
		return nil, "", fmt.Errorf("loading the kubeconfig: %w", err)
	}
	name := f.context
	if name == "" {
		if raw, err := cc.RawConfig(); err == nil {
			name = raw.CurrentContext
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = f.timeout
	cfg.UserAgent = "karpless-cli"
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, fmt.Sprintf("context %s (%s)", name, cfg.Host), nil
}

// readOnly makes the commands unable to change the cluster, whatever code
// they call: every request but GET, HEAD and OPTIONS is refused before it
// leaves the process.
func readOnly(rt http.RoundTripper) http.RoundTripper { return readOnlyTransport{next: rt} }

type readOnlyTransport struct{ next http.RoundTripper }

// errReadOnly is what a write attempt gets.
var errReadOnly = errors.New("karpless explain, simulate and snapshot only read the cluster")

func (t readOnlyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.next.RoundTrip(r)
	}
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return nil, fmt.Errorf("%w: refused %s %s", errReadOnly, r.Method, r.URL.Path)
}

// readFile takes a File from the live cluster.
func (f *clusterFlags) readFile(ctx context.Context) (*whatif.File, error) {
	c, source, err := f.clients()
	if err != nil {
		return nil, err
	}
	file, err := whatif.Read(ctx, c, f.namespace, source)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", source, err)
	}
	return file, nil
}

// world prepares the answers, from the snapshot file if one is given, else
// from the live cluster.
func world(ctx context.Context, cf *clusterFlags, df *decisionFlags) (*whatif.World, error) {
	var file *whatif.File
	if df.snapshot != "" {
		fh, err := os.Open(df.snapshot)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		if file, err = whatif.ReadFile(fh); err != nil {
			return nil, fmt.Errorf("%s: %w", df.snapshot, err)
		}
		src := ""
		if file.Source != "" {
			src = " from " + file.Source
		}
		file.Market.Notes = append([]string{fmt.Sprintf("answered offline from %s, taken at %s%s", df.snapshot, file.TakenAt.UTC().Format(time.RFC3339), src)}, file.Market.Notes...)
	} else {
		var err error
		if file, err = cf.readFile(ctx); err != nil {
			return nil, err
		}
	}
	in := file.Input()
	if df.now != "" {
		t, err := time.Parse(time.RFC3339, df.now)
		if err != nil {
			return nil, fmt.Errorf("--now %q: %w", df.now, err)
		}
		in.Options.Now = t
	}
	in.Options.SpotToSpotConsolidation = df.spotToSpot
	in.Options.ReservedENIs = df.reservedENIs
	in.Options.ConsolidationTimeout = df.searchLimit
	res, err := parseReservations(df.reservations)
	if err != nil {
		return nil, err
	}
	in.Options.Reservations = res
	return whatif.New(in)
}

// report is what the commands print.
type report interface{ WriteText(io.Writer) error }

func emit(c *cli, df *decisionFlags, r report) error {
	return write(c.out, df.output, r, r.WriteText)
}
