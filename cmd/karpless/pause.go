package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/pause"
	"github.com/karpless/karpless/shared/ticks/bootstrap"
)

// karpless pause and karpless resume set the pause switch, the ConfigMap
// every tick reads before it acts (shared/kube/pause), with the user's own
// access from the kubeconfig. The switch lives in the cluster, so a deploy
// never changes it (docs/operations.md, "Pausing Karpless").

var pauseCommand = command{
	name:    "pause",
	summary: "pause Karpless in a cluster: its ticks take no action until karpless resume; karpless pause status reads the switch",
	run:     func(ctx context.Context, c *cli, args []string) error { return setPause(ctx, c, args, true) },
}

var resumeCommand = command{
	name:    "resume",
	summary: "resume Karpless in a cluster after karpless pause",
	run:     func(ctx context.Context, c *cli, args []string) error { return setPause(ctx, c, args, false) },
}

func setPause(ctx context.Context, c *cli, args []string, paused bool) error {
	name := "karpless resume"
	if paused {
		name = "karpless pause"
	}
	synopsis := "[--reason TEXT] [--kubeconfig FILE] [--context NAME] [--karpless-namespace NS]"
	if paused {
		synopsis += "\n       karpless pause status [-o text|json|yaml] [--kubeconfig FILE] [--context NAME] [--karpless-namespace NS]"
	}
	fs := flags(c, name, synopsis)
	cf := addClusterFlags(fs)
	reason := fs.String("reason", "", "why, kept in the switch and shown in every paused tick's log line")
	output := fs.String("o", outputText, "pause status: output format, text, json or yaml")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case paused && len(pos) == 1 && pos[0] == "status":
		if *reason != "" {
			return badUsage(fs, "--reason is for changing the switch, not for reading it")
		}
		if err := checkOutput(fs, *output); err != nil {
			return err
		}
		return pauseStatus(ctx, c, cf, *output)
	case len(pos) > 0:
		return badUsage(fs, "")
	case *output != outputText:
		return badUsage(fs, "-o is for karpless pause status")
	}
	cfg, source, err := cf.restConfig()
	if err != nil {
		return err
	}
	kc, err := kube.NewClients(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	who := whoAmI(ctx, kc)
	where := cf.namespace + "/" + pause.ConfigMapName
	before, err := pause.Set(ctx, kc.Core.CoreV1(), cf.namespace, pause.Change{Paused: paused, By: who, Reason: *reason, At: time.Now()},
		map[string]string{bootstrap.ManagedByLabel: bootstrap.ManagedByValue})
	if err != nil {
		return pauseError(err, source, where, paused)
	}
	after, err := pause.Read(ctx, kc.Core.CoreV1(), cf.namespace)
	if err != nil {
		return pauseError(err, source, where, paused)
	}
	var was string
	switch {
	case paused && before.Paused:
		was = "was already paused"
	case paused:
		was = "was running"
	case before.Paused:
		was = "was paused"
	default:
		was = "was already running"
	}
	if paused {
		c.printf("Karpless is paused in %s (%s).\n", source, was)
		c.printf("  switch: ConfigMap %s, %s\n", where, after)
		c.printf("  From the next tick (within a minute) the provisioner and disruption functions take no action;\n")
		c.printf("  a tick already under way finishes (at most a minute). The interruption function still taints,\n")
		c.printf("  drains and terminates the nodes EC2 takes away, but launches no replacement.\n")
		c.printf("  A deploy does not change the switch. Resume with: karpless resume\n")
	} else {
		c.printf("Karpless is running in %s (%s).\n", source, was)
		c.printf("  switch: ConfigMap %s, %s\n", where, after)
		c.printf("  The next ticks (within a minute) act again.\n")
	}
	if !before.Exists {
		c.printf("  The switch did not exist, so it was created: this cluster's Karpless was deployed before the switch,\n")
		c.printf("  or not in namespace %s (--karpless-namespace). Functions that predate it do not read it; redeploy.\n", cf.namespace)
	}
	return nil
}

// pauseStatusReport is what karpless pause status prints.
type pauseStatusReport struct {
	// Cluster names the kubeconfig context and server.
	Cluster   string `json:"cluster"`
	ConfigMap string `json:"configMap"`
	// Exists is false when the switch was never created: not paused.
	Exists    bool      `json:"exists"`
	Paused    bool      `json:"paused"`
	ChangedBy string    `json:"changedBy,omitempty"`
	ChangedAt time.Time `json:"changedAt,omitzero"`
	Reason    string    `json:"reason,omitempty"`
	state     pause.State
}

func (r pauseStatusReport) WriteText(w io.Writer) error {
	what := "running"
	if r.Paused {
		what = "paused"
	}
	_, err := fmt.Fprintf(w, "Karpless is %s in %s.\n  switch: ConfigMap %s, %s\n", what, r.Cluster, r.ConfigMap, r.state)
	if err == nil && !r.Exists {
		_, err = fmt.Fprintf(w, "  The switch does not exist (Karpless not deployed in this namespace, or deployed before the switch): not paused.\n")
	}
	return err
}

// pauseStatus reads the switch, through the read-only transport explain
// uses: reading needs only get on the ConfigMap.
func pauseStatus(ctx context.Context, c *cli, cf *clusterFlags, output string) error {
	kc, source, err := cf.clients()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	where := cf.namespace + "/" + pause.ConfigMapName
	st, err := pause.Read(ctx, kc.Core.CoreV1(), cf.namespace)
	if err != nil {
		return statusError(err, source, where)
	}
	r := pauseStatusReport{
		Cluster: source, ConfigMap: where, Exists: st.Exists, Paused: st.Paused,
		ChangedBy: st.ChangedBy, ChangedAt: st.ChangedAt, Reason: st.Reason, state: st,
	}
	return write(c.out, output, r, r.WriteText)
}

// statusError says why the switch could not be read.
func statusError(err error, source, where string) error {
	var status apierrors.APIStatus
	var unreachable *url.Error
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server of %s does not accept your credentials (for EKS: aws eks update-kubeconfig --name <cluster>): %w", source, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("you may not read ConfigMap %s in %s (it takes get on it): %w", where, source, err)
	case !errors.As(err, &status) && errors.As(err, &unreachable):
		return fmt.Errorf("cannot reach the cluster's API server, %s: %w", source, err)
	}
	// An API error, or a switch holding a value that is not true or
	// false: the error says which.
	return fmt.Errorf("%s: %w", source, err)
}

// whoAmI names the user the API server sees (SelfSubjectReview), else the
// local user: it is written into the switch as who changed it.
func whoAmI(ctx context.Context, kc *kube.Clients) string {
	r, err := kc.Core.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err == nil && r.Status.UserInfo.Username != "" {
		return r.Status.UserInfo.Username
	}
	user := os.Getenv("USER")
	if user == "" {
		user = "unknown user"
	}
	host, _ := os.Hostname()
	return user + "@" + host + " (karpless CLI)"
}

// pauseError says what went wrong in the user's terms, and that nothing
// changed.
func pauseError(err error, source, where string, paused bool) error {
	state := "Karpless was not resumed"
	if paused {
		state = "Karpless was not paused"
	}
	var status apierrors.APIStatus
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: the API server of %s does not accept your credentials (for EKS: aws eks update-kubeconfig --name <cluster>, and an access entry for your IAM identity): %w", state, source, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: you may not change ConfigMap %s in %s (it takes get, create and update on it; ask a cluster admin): %w", state, where, source, err)
	case !errors.As(err, &status):
		return fmt.Errorf("%s: cannot reach the cluster's API server, %s: %w", state, source, err)
	}
	return fmt.Errorf("%s: %w", state, err)
}
