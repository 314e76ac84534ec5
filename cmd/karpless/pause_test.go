package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/karpless/karpless/shared/kube/pause"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// TestPauseResume drives karpless pause and resume against a real API
// server with the kubeconfig, and their errors without cluster access.
func TestPauseResume(t *testing.T) {
	e := kubetest.Need(t, kenv)
	ctx := context.Background()
	ns := e.Namespace(t)
	kubeconfig := e.Cluster.Kubeconfig
	state := func() pause.State {
		t.Helper()
		st, err := pause.Read(ctx, e.Clients.Core.CoreV1(), ns)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	// No switch yet: not paused, and status says it does not exist.
	code, out, errs := runCLI(ctx, "pause", "status", "--kubeconfig", kubeconfig, "--karpless-namespace", ns)
	if code != 0 || !strings.Contains(out, "Karpless is running in context") || !strings.Contains(out, "The switch does not exist") {
		t.Errorf("pause status before any pause: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(ctx, "pause", "--kubeconfig", kubeconfig, "--karpless-namespace", ns, "--reason", "incident 42")
	if code != 0 || !strings.Contains(out, "Karpless is paused in context") || !strings.Contains(out, "(was running)") || !strings.Contains(out, "reason: incident 42") {
		t.Fatalf("pause: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "The switch did not exist") {
		t.Errorf("pause in a namespace without the switch does not say so:\n%s", out)
	}
	if st := state(); !st.Paused || st.ChangedBy == "" || st.Reason != "incident 42" {
		t.Errorf("after pause: %+v", st)
	}
	code, out, errs = runCLI(ctx, "pause", "status", "-o", "json", "--kubeconfig", kubeconfig, "--karpless-namespace", ns)
	var status pauseStatusReport
	if err := json.Unmarshal([]byte(out), &status); code != 0 || err != nil || !status.Paused || !status.Exists || status.Reason != "incident 42" ||
		status.ChangedBy != state().ChangedBy || status.ConfigMap != ns+"/karpless-pause" || !strings.HasPrefix(status.Cluster, "context ") {
		t.Errorf("pause status -o json: exit %d, %v %+v\n%s%s", code, err, status, out, errs)
	}
	code, out, errs = runCLI(ctx, "pause", "--kubeconfig", kubeconfig, "status", "-o", "yaml", "--karpless-namespace", ns)
	if code != 0 || !strings.Contains(out, "paused: true\n") || !strings.Contains(out, "reason: incident 42\n") {
		t.Errorf("pause status -o yaml: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(ctx, "pause", "status", "--kubeconfig", kubeconfig, "--karpless-namespace", ns)
	if code != 0 || !strings.Contains(out, "Karpless is paused in context") || !strings.Contains(out, "reason: incident 42") {
		t.Errorf("pause status: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(ctx, "pause", "--kubeconfig", kubeconfig, "--karpless-namespace", ns)
	if code != 0 || !strings.Contains(out, "(was already paused)") || strings.Contains(out, "did not exist") {
		t.Errorf("pause again: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(ctx, "resume", "--kubeconfig", kubeconfig, "--karpless-namespace", ns)
	if code != 0 || !strings.Contains(out, "Karpless is running in context") || !strings.Contains(out, "(was paused)") {
		t.Errorf("resume: exit %d\n%s%s", code, out, errs)
	}
	if st := state(); st.Paused {
		t.Errorf("after resume: %+v", st)
	}
	if code, out, _ := runCLI(ctx, "pause", "status", "-o", "json", "--kubeconfig", kubeconfig, "--karpless-namespace", ns); code != 0 || !strings.Contains(out, `"paused": false`) {
		t.Errorf("pause status after resume: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(ctx, "resume", "--kubeconfig", kubeconfig, "--karpless-namespace", ns); code != 0 || !strings.Contains(out, "(was already running)") {
		t.Errorf("resume again: exit %d\n%s", code, out)
	}

	// Without cluster access nothing changes, and the error says why.
	dir := t.TempDir()
	dead := filepath.Join(dir, "dead")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	cfg.AuthInfos["dead"] = &clientcmdapi.AuthInfo{Token: "x"}
	cfg.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: "dead"}
	cfg.CurrentContext = "dead"
	if err := clientcmd.WriteToFile(*cfg, dead); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Someone the API server knows but RBAC grants nothing.
	nobody := filepath.Join(dir, "nobody")
	admin, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range admin.AuthInfos {
		a.Impersonate = "nobody"
	}
	if err := clientcmd.WriteToFile(*admin, nobody); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pause", "--kubeconfig", dead, "--request-timeout", "5s"}, 1, "Karpless was not paused: cannot reach the cluster's API server, context dead (https://127.0.0.1:1)"},
		{[]string{"pause", "--kubeconfig", empty}, 1, "no kubeconfig found"},
		{[]string{"pause", "--kubeconfig", dead, "--context", "nope"}, 1, `context "nope" does not exist`},
		{[]string{"pause", "--kubeconfig", nobody, "--karpless-namespace", ns}, 1, "Karpless was not paused: you may not change ConfigMap " + ns + "/karpless-pause"},
		{[]string{"resume", "--kubeconfig", nobody, "--karpless-namespace", ns}, 1, "Karpless was not resumed: you may not change"},
		{[]string{"pause", "now"}, 2, "usage: karpless pause"},
		{[]string{"pause", "status", "--kubeconfig", dead, "--request-timeout", "5s"}, 1, "cannot reach the cluster's API server, context dead (https://127.0.0.1:1)"},
		{[]string{"pause", "status", "--kubeconfig", nobody, "--karpless-namespace", ns}, 1, "you may not read ConfigMap " + ns + "/karpless-pause"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := runCLI(ctx, tc.args...)
			if code != tc.code || !strings.Contains(out+errs, tc.want) {
				t.Errorf("exit %d, want %d; output:\n%s%s\nwant it to contain %q", code, tc.code, out, errs, tc.want)
			}
		})
	}
	if st := state(); st.Paused {
		t.Errorf("a failed pause changed the switch: %+v", st)
	}
}
