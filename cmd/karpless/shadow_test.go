package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/local/shadowreport"
)

// TestShadowReportCommand: karpless shadow report reads the decision
// stores of the Karpless namespace and the log files it is given, through
// the kubeconfig and read-only, as text or JSON; bad arguments are said.
// (shared/local/shadowreport TestShadowBesideKarpenter runs it on a
// shadow deployment beside a second actor.)
func TestShadowReportCommand(t *testing.T) {
	e := kubetest.Need(t, kenv)
	ctx := context.Background()
	kns := e.Namespace(t)
	now := time.Now().UTC().Truncate(time.Second)
	launch := shadow.Decision{Kind: shadow.KindLaunch, Function: "provisioner", At: now.Add(-10 * time.Minute), NodePool: "general",
		Pods: []string{"web/a"}, PodCount: 1, Offering: &shadow.Offering{InstanceType: "c6a.large", CapacityType: "spot", Zone: "us-east-1a", Price: 0.0341}}
	store := shadow.Store{ConfigMaps: e.Clients.Core.CoreV1(), Namespace: kns, Function: "provisioner", Now: time.Now}
	if err := store.Add(ctx, []shadow.Decision{launch}); err != nil {
		t.Fatal(err)
	}
	expire := shadow.Decision{Kind: shadow.KindExpire, Function: "disruption", At: now.Add(-5 * time.Minute), NodeClaim: "general-x", Reason: "expireAfter elapsed"}
	logs := filepath.Join(t.TempDir(), "disruption.log")
	line := `2026-11-27T10:00:00.000000+00:00 2026/11/27/[$LATEST]abc {"level":"INFO","msg":"shadow decision: not carried out","decision":` + expire.Marshal() + "}\n"
	if err := os.WriteFile(logs, []byte(line+"START RequestId: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"shadow", "report", "--kubeconfig", e.Cluster.Kubeconfig, "--karpless-namespace", kns, "--since", "1h", "--logs", logs}
	code, out, errs := runCLI(ctx, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	for _, want := range []string{"2 decision(s) of Karpless in the window (records read: 1 from the stores, 0 from Events, 1 from log files)",
		"launch 1× c6a.large spot us-east-1a for a", "0.0341", "delete general-x (expire, $0.0000/h): expireAfter elapsed", "general-x is gone", "What this report cannot know"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = runCLI(ctx, append(args, "-o", "json")...)
	var r shadowreport.Report
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Decisions != 2 || r.Records["logs"] != 1 || len(r.Unknown) == 0 {
		t.Errorf("-o json: exit %d %s %s", code, out, errs)
	}
	code, out, errs = runCLI(ctx, append(args, "-o", "yaml")...)
	var y shadowreport.Report
	if code != 0 || yaml.Unmarshal([]byte(out), &y) != nil || y.Decisions != 2 || y.Records["logs"] != 1 {
		t.Errorf("-o yaml: exit %d %s %s", code, out, errs)
	}
	if cm, err := e.Clients.Core.CoreV1().ConfigMaps(kns).Get(ctx, shadow.StoreName("provisioner"), metav1.GetOptions{}); err != nil || len(shadow.DecodeEntries(cm.Data["decisions"])) != 1 {
		t.Errorf("the store changed: %v", err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"shadow"}, 2, "usage: karpless shadow <subcommand>"},
		{[]string{"shadow", "frob"}, 2, `unknown subcommand "frob"`},
		{[]string{"shadow", "report", "-o", "xml"}, 2, `-o "xml": want text, json or yaml`},
		{[]string{"shadow", "report", "--since", "-1h"}, 2, "want a positive duration"},
		{[]string{"shadow", "report", "extra"}, 2, "usage: karpless shadow report"},
		{[]string{"shadow", "report", "--kubeconfig", e.Cluster.Kubeconfig, "--logs", filepath.Join(t.TempDir(), "missing")}, 1, "no such file"},
	} {
		code, out, errs := runCLI(ctx, tc.args...)
		if code != tc.code || !strings.Contains(out+errs, tc.want) {
			t.Errorf("%v: exit %d, want %d; %s%s (want %q)", tc.args, code, tc.code, out, errs, tc.want)
		}
	}
}
