package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/controlplane"
)

// summaryCount reads one count of a tick's printed summary ("launched": 1).
func runCLI(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(ctx, &cli{out: &out, err: &errb}, args)
	return code, out.String(), errb.String()
}

// runTick runs `karpless local tick`, and runs it again, up to twice, when
// an invocation failed because the emulator's throttling outlasted the
// SDK's attempts: the world is hostile by default, and Lambda retries a
// failed asynchronous invocation twice, as EventBridge invokes the ticks.
func runTick(ctx context.Context, t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	args = append([]string{"local", "tick"}, args...)
	code, out, errs := runCLI(ctx, args...)
	for retry := 0; retry < 2 && code != 0 && strings.Contains(out+errs, "exceeded maximum number of attempts"); retry++ {
		t.Logf("%s failed on the world's throttling, run again as Lambda would:\n%s", strings.Join(args[:3], " "), errs)
		code, out, errs = runCLI(ctx, args...)
	}
	return code, out, errs
}

func TestDispatch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string // in stdout or stderr
	}{
		{nil, 2, "usage: karpless <command>"},
		{[]string{"help"}, 0, "local"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"local"}, 2, "usage: karpless local <subcommand>"},
		{[]string{"local", "nope"}, 2, `unknown subcommand "nope"`},
		{[]string{"local", "tick"}, 2, "usage: karpless local tick"},
		{[]string{"local", "tick", "disruption", "--dir", dir}, 1, "no local environment in " + dir},
		{[]string{"local", "tick", "--dir", dir, "teleporter"}, 1, `unknown function "teleporter"`},
		{[]string{"local", "tick", "provisioner", "--dir", dir}, 1, "no local environment in " + dir},
		{[]string{"local", "instances", "--dir", dir}, 1, "karpless local up --dir " + dir},
		{[]string{"local", "inject", "spot-interruption", "not-an-id", "--dir", dir}, 1, `"not-an-id" is not an instance id`},
		{[]string{"local", "inject", "state-change", "i-0123456789abcdef0", "--dir", dir}, 1, "state-change needs a state"},
		{[]string{"local", "fault", "--dir", dir}, 2, "usage: karpless local fault"},
		{[]string{"local", "fault", "frob", "--dir", dir}, 2, `unknown fault "frob"`},
		{[]string{"local", "fault", "list", "-o", "xml", "--dir", dir}, 2, `-o "xml": want text, json or yaml`},
		{[]string{"local", "instances", "-o", "xml", "--dir", dir}, 2, `-o "xml": want text, json or yaml`},
		{[]string{"local", "instances", "-o", "yaml", "--dir", dir}, 1, "no local environment in " + dir},
		{[]string{"local", "instances", "extra", "--dir", dir}, 2, "usage: karpless local instances"},
		{[]string{"local", "up", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"--help"}, 0, "usage: karpless <command>"},
		{[]string{"-h"}, 0, "usage: karpless <command>"},
		{[]string{"help", "local", "up"}, 0, "usage: karpless local up"},
		{[]string{"help", "local"}, 0, "usage: karpless local <subcommand>"},
		{[]string{"local", "help", "tick"}, 0, "usage: karpless local tick"},
		{[]string{"explain", "PODS", "--help"}, 0, "usage: karpless explain pod"},
		{[]string{"explain", "no", "-h"}, 0, "usage: karpless explain node"},
		{[]string{"version", "extra"}, 2, "usage: karpless version"},
		{[]string{"version", "-o", "xml"}, 2, `-o "xml": want text, json or yaml`},
		{[]string{"pause", "status", "--reason", "x"}, 2, "--reason is for changing the switch"},
		{[]string{"pause", "-o", "json"}, 2, "-o is for karpless pause status"},
		{[]string{"resume", "status"}, 2, "usage: karpless resume"},
		{[]string{"soak", "--seeds", "0"}, 2, "usage: karpless soak"},
		{[]string{"demo", "extra"}, 2, "usage: karpless demo"},
		{[]string{"shadow", "report", "--since", "-1h"}, 2, "--since -1h0m0s: want a positive duration"},
		{[]string{"migrate", "check", "-o", "xml"}, 2, `-o "xml": want text, json or yaml`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := runCLI(ctx, tc.args...)
			if code != tc.code || !strings.Contains(out+errs, tc.want) {
				t.Errorf("exit %d, want %d; output:\n%s%s\nwant it to contain %q", code, tc.code, out, errs, tc.want)
			}
		})
	}
}

func TestParseInterleaved(t *testing.T) {
	fs := flags(&cli{out: &bytes.Buffer{}, err: &bytes.Buffer{}}, "x", "")
	dir := fs.String("dir", "", "")
	pos, err := parse(fs, []string{"state-change", "--dir", "d", "stopping", "i-1", "--", "-odd"})
	if err != nil || *dir != "d" || !slices.Equal(pos, []string{"state-change", "stopping", "i-1", "-odd"}) {
		t.Errorf("parse: %v %q %v", pos, *dir, err)
	}
}

func TestStaleState(t *testing.T) {
	dir := t.TempDir()
	if err := writeState(dir, localState{PID: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := readState(dir); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("stale state: %v", err)
	}
}

// TestLocalUp drives the CLI the way a person or an acceptance test does:
// up in the foreground with the functions' triggers off, a workload, a
// provisioner tick, the emulator's instances, an interruption, an
// interruption tick, Ctrl-C. With --schedules=false and
// --interruption=false nothing runs by itself: no function takes a lease
// or creates a claim in the seconds before the first tick, though the
// schedules would fire every second, and the injected event waits in the
// queue for the interruption tick (TestLocalUpRunsFunctions has them on).
func TestLocalUp(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a control plane")
	}
	if _, err := controlplane.FindBinDir(); err != nil {
		if os.Getenv("KARPLESS_REQUIRE_KUBE") == "1" || !errors.Is(err, controlplane.ErrNotBuilt) {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	t.Setenv(ScheduleRateEnv, "1s")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	upDone := make(chan string, 1)
	go func() {
		code, out, errs := runCLI(ctx, "local", "up", "--dir", dir, "--controller-manager=false", "--schedules=false", "--interruption=false")
		upDone <- strings.Join([]string{"exit " + strconv.Itoa(code), out, errs}, "\n")
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := readState(dir); err == nil {
			break
		}
		select {
		case out := <-upDone:
			t.Fatalf("local up ended early:\n%s", out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("local up did not come up in 2 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, f := range []string{"kubeconfig", "aws.env", "state.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	env, _ := os.ReadFile(filepath.Join(dir, "aws.env"))
	for _, k := range []string{"AWS_ENDPOINT_URL=http://127.0.0.1:", "AWS_REGION=us-west-2", "AWS_ACCESS_KEY_ID=AKIA", "CLUSTER_NAME=karpless-local", "INTERRUPTION_QUEUE_URL=http://"} {
		if !strings.Contains(string(env), k) {
			t.Errorf("aws.env lacks %s:\n%s", k, env)
		}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kube.NewClients(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kc.NodePools.Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("the default NodePool was not installed: %v", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}}}},
	}
	if _, err := kc.Core.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The scheduler marks the pod unschedulable; the provisioner sees it.
	time.Sleep(3 * time.Second)
	assertNothingRan(ctx, t, kc)
	// `local up` runs the emulator as hostile as AWS and on the wall clock:
	// the instance profile the first launch creates is rejected until IAM
	// propagates it (5-20 s), a call may be throttled. A user ticks again;
	// the claim created by the first tick must launch, and no tick may
	// create a second claim for the one pod.
	var ticks []string
	var claims []karpv1.NodeClaim
	for deadline := time.Now().Add(time.Minute); ; {
		code, out, errs := runCLI(ctx, "local", "tick", "provisioner", "--dir", dir, "--log-level", "warn")
		ticks = append(ticks, fmt.Sprintf("exit %d\n%s\n%s", code, out, errs))
		l, err := kc.NodeClaims.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claims = l.Items
		if slices.ContainsFunc(claims, func(nc karpv1.NodeClaim) bool { return nc.IsTrue(karpv1.ConditionTypeLaunched) }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no claim launched after %d provisioner ticks in a minute:\n%s", len(ticks), strings.Join(ticks, "\n"))
		}
		time.Sleep(2 * time.Second)
	}
	if len(claims) != 1 {
		t.Fatalf("%d claims after %d ticks for one pod, want 1:\n%s", len(claims), len(ticks), strings.Join(ticks, "\n"))
	}
	t.Logf("the pod's claim launched at provisioner tick %d", len(ticks))
	code, out, errs := runCLI(ctx, "local", "instances", "--dir", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[1], "karpenter.sh/nodepool=default") {
		t.Fatalf("instances: exit %d\n%s\n%s", code, out, errs)
	}
	id := strings.Fields(lines[1])[0]
	code, out, errs = runCLI(ctx, "local", "instances", "--dir", dir, "-o", "json")
	var listed instanceList
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed.Instances) != 1 || listed.Instances[0].ID != id ||
		listed.Instances[0].Tags["karpenter.sh/nodepool"] != "default" || listed.Instances[0].State == "" {
		t.Errorf("instances -o json: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	code, out, _ = runCLI(ctx, "local", "instances", "--dir", dir, "-o", "yaml")
	if code != 0 || !strings.Contains(out, "  id: "+id+"\n") || !strings.HasPrefix(out, "instances:\n- ") {
		t.Errorf("instances -o yaml: exit %d\n%s", code, out)
	}
	code, out, errs = runCLI(ctx, "local", "inject", "rebalance", id, "--dir", dir)
	if code != 0 || !strings.Contains(out, "sent rebalance event") {
		t.Fatalf("inject: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runTick(ctx, t, "interruption", "--dir", dir, "--log-level", "warn")
	if code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("tick interruption: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runTick(ctx, t, "disruption", "--dir", dir, "--log-level", "warn", "--timeout", "20s")
	if code != 0 || !strings.Contains(out, `"passes"`) {
		t.Fatalf("tick disruption: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCLI(ctx, "local", "fault", "ice", "--type", "m5.large", "--dir", dir)
	if code != 0 || !strings.Contains(out, "InsufficientInstanceCapacity") {
		t.Fatalf("fault: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCLI(ctx, "local", "fault", "list", "-o", "json", "--dir", dir)
	var faults faultList
	if err := json.Unmarshal([]byte(out), &faults); code != 0 || err != nil || !slices.ContainsFunc(faults.Faults, func(f string) bool { return strings.Contains(f, "InsufficientInstanceCapacity") }) {
		t.Errorf("fault list -o json: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	assertStopReleasesLeases(ctx, t, dir, kc)
	// A second up in the same directory refuses, naming the first.
	code, _, errs = runCLI(ctx, "local", "up", "--dir", dir)
	if code != 1 || !strings.Contains(errs, fmt.Sprintf("(process %d)", os.Getpid())) {
		t.Errorf("second up: exit %d %s", code, errs)
	}

	cancel()
	select {
	case out := <-upDone:
		if !strings.Contains(out, "stopping") {
			t.Errorf("up output:\n%s", out)
		}
	case <-time.After(time.Minute):
		t.Fatal("local up did not stop")
	}
	if _, err := os.Stat(statePath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state.json left behind: %v", err)
	}
}

// everyCommand is every command line that takes flags: each command, and
// each subcommand of a group, as --help lists them.
func everyCommand(t *testing.T) [][]string {
	t.Helper()
	cmds, _ := cliCommands(t)
	var out [][]string
	for name, subs := range cmds {
		if len(subs) == 0 {
			out = append(out, []string{name})
		}
		for _, s := range subs {
			out = append(out, []string{name, s})
		}
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(strings.Join(a, " "), strings.Join(b, " ")) })
	return out
}

// singleDashLongFlag is a flag listed as Go's flag package prints it
// (-dir), not as the docs write it (--dir).
var singleDashLongFlag = regexp.MustCompile(`(?m)^  -[a-z][a-z-]+\b`)

// TestHelpAndExitCodes holds every command to what docs/cli.md promises:
// --help and -h print the usage on standard output and exit 0, with the
// flags in the --flag form; an unknown flag prints the usage on standard
// error and exits 2; so does a group without its subcommand.
func TestHelpAndExitCodes(t *testing.T) {
	ctx := context.Background()
	for _, args := range everyCommand(t) {
		name := strings.Join(args, " ")
		t.Run(name, func(t *testing.T) {
			for _, h := range []string{"--help", "-h"} {
				code, out, errs := runCLI(ctx, append(slices.Clone(args), h)...)
				if code != 0 || errs != "" || !strings.HasPrefix(out, "usage: karpless "+name+" ") {
					t.Errorf("%s %s: exit %d\nstdout:\n%s\nstderr:\n%s", name, h, code, out, errs)
				}
				if m := singleDashLongFlag.FindString(out); m != "" {
					t.Errorf("%s %s lists %q: want the --flag form the docs use", name, h, strings.TrimSpace(m))
				}
				if !strings.Contains(out, "  -h, --help") || !strings.Contains(out, exitStatusHelp) {
					t.Errorf("%s %s lacks the help flag or the exit statuses:\n%s", name, h, out)
				}
			}
			code, out, errs := runCLI(ctx, append(slices.Clone(args), "--no-such-flag")...)
			if code != 2 || out != "" || !strings.Contains(errs, "flag provided but not defined: -no-such-flag") || !strings.Contains(errs, "usage: karpless "+name) {
				t.Errorf("%s --no-such-flag: exit %d\nstdout:\n%s\nstderr:\n%s", name, code, out, errs)
			}
		})
	}
	for _, cmd := range commands {
		code, out, errs := runCLI(ctx, cmd.name, "--help")
		if code != 0 || errs != "" || out == "" {
			t.Errorf("%s --help: exit %d\nstdout:\n%s\nstderr:\n%s", cmd.name, code, out, errs)
		}
		if _, subs, ok := strings.Cut(out, "subcommands:"); ok {
			code, out, errs := runCLI(ctx, cmd.name)
			if code != 2 || out != "" || !strings.Contains(errs, "subcommands:"+subs) {
				t.Errorf("%s alone: exit %d\nstdout:\n%s\nstderr:\n%s", cmd.name, code, out, errs)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	ctx := context.Background()
	code, out, errs := runCLI(ctx, "version")
	if code != 0 || errs != "" {
		t.Fatalf("version: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"version: ", "commit: ", "serves the API of Karpenter " + karpenterRelease + ":", "karpenter.sh/v1 (NodeClaim, NodePool)", "karpenter.k8s.aws/v1 (EC2NodeClass)"} {
		if !strings.Contains(out, want) {
			t.Errorf("version lacks %q:\n%s", want, out)
		}
	}
	// The Makefile's build stamps the version and commit with -X.
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v1.2.3", "0123456789abcdef"
	code, out, _ = runCLI(ctx, "version", "-o", "json")
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("version -o json: exit %d, %v\n%s", code, err, out)
	}
	if v.Version != "v1.2.3" || v.Commit != "0123456789abcdef" || v.Karpenter != karpenterRelease || !slices.Contains(v.APIs, "karpenter.sh/v1 (NodeClaim, NodePool)") || v.Go == "" {
		t.Errorf("version -o json: %+v", v)
	}
	code, out, _ = runCLI(ctx, "version", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "version: v1.2.3\n") || !strings.Contains(out, "commit: 0123456789abcdef\n") || !strings.Contains(out, "karpenter: "+karpenterRelease+"\n") {
		t.Errorf("version -o yaml: exit %d\n%s", code, out)
	}
}
