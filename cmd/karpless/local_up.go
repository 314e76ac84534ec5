package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/karpless/karpless/shared/apis/crds"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/controlplane"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/ticks/bootstrap"
)

// localUp starts a local stand-in of a deployment and keeps it running in
// the foreground until SIGINT or SIGTERM.
func localUp(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless local up", "[flags]")
	dirArg := dirFlag(fs)
	scheduler := fs.Bool("scheduler", true, "run kube-scheduler (binds pods to the emulator's nodes)")
	controllerManager := fs.Bool("controller-manager", true, "run kube-controller-manager (Deployments, ReplicaSets, DaemonSets, PDB status, garbage collection)")
	install := fs.Bool("bootstrap", true, "install what the bootstrap function installs: CRDs, the controllers' RBAC, the default NodePool and EC2NodeClass")
	cluster := fs.String("cluster-name", emulator.DefaultClusterName, "the emulated EKS cluster's name")
	region := fs.String("region", emulator.DefaultRegion, "the emulated region")
	addr := fs.String("aws-addr", "127.0.0.1:0", "the emulator's listen address")
	verbose := fs.Bool("v", false, "log every AWS call")
	runSchedules := fs.Bool("schedules", true, "invoke the scheduled functions ("+scheduledNames()+") every minute, as their EventBridge rules do")
	runInterruption := fs.Bool("interruption", true, "feed the interruption queue to the interruption function, as Lambda's event source mapping does")
	logLevel := fs.String("log-level", "info", "the functions' LOG_LEVEL")
	responsiveness := fs.String("responsiveness", config.ResponsivenessContinuous, "continuous: run the watcher, which starts the provisioner as soon as a pod is pending; economy: the provisioner's schedule only (as -c responsiveness=... deploys)")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) != 0 {
		return badUsage(fs, "")
	}
	dir, err := absDir(*dirArg)
	if err != nil {
		return err
	}
	// The lock first: two runs started together would otherwise both find
	// no state and break each other's control plane.
	release, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer release()
	if st, err := readState(dir); err == nil {
		return fmt.Errorf("an environment is already running in %s (process %d); stop it first, or use another --dir", dir, st.PID)
	}
	binDir, err := ensureControlPlane(ctx, c)
	if err != nil {
		return err
	}
	rate, err := scheduleRate()
	if err != nil {
		return err
	}
	if *responsiveness != config.ResponsivenessContinuous && *responsiveness != config.ResponsivenessEconomy {
		return fmt.Errorf("--responsiveness=%q: want %s or %s", *responsiveness, config.ResponsivenessContinuous, config.ResponsivenessEconomy)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	// The functions' logs go to the same stream, one line at a time.
	logOut := &syncWriter{w: c.err}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))

	// The emulator first: the API server authenticates tokens through it.
	emu, err := emulator.New(emulator.Config{
		Region: *region, ClusterName: *cluster, StateChangeEvents: true, Addr: *addr, Logger: log.With("component", "emulator"),
	})
	if err != nil {
		return err
	}
	defer emu.Close()
	// Each run starts from an empty cluster: the emulator's instances do
	// not survive it either.
	kubeDir := filepath.Join(dir, "kube")
	if err := os.RemoveAll(kubeDir); err != nil {
		return err
	}
	log.Info("starting the local control plane (etcd, kube-apiserver)", "dir", kubeDir)
	kc, err := controlplane.Start(ctx, controlplane.Config{
		BinDir: binDir, Dir: kubeDir, Scheduler: *scheduler, ControllerManager: *controllerManager,
		TokenWebhookURL: emu.TokenWebhookURL(), Logger: log.With("component", "controlplane"),
	})
	if err != nil {
		return err
	}
	defer kc.Stop()
	clients, err := kube.NewClients(kc.RESTConfig)
	if err != nil {
		return err
	}
	all, err := crds.All()
	if err != nil {
		return err
	}
	if err := kube.ApplyCRDs(ctx, clients.APIExtensions, all); err != nil {
		return err
	}
	if *install {
		res, err := bootstrap.Install(ctx, clients, bootstrap.Options{
			ClusterName: *cluster, DefaultNodePool: true, NodeRoleName: emulator.NodeRoleName(*cluster), CRDs: all,
			Log: log.With("component", "bootstrap"),
		})
		if err != nil {
			return fmt.Errorf("bootstrap install: %w", err)
		}
		log.Info("bootstrap installed", "applied", len(res.Applied), "created", len(res.Created))
	}
	if err := emu.ConnectCluster(clients, "", nil); err != nil {
		return err
	}
	emu.Start(ctx)

	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := copyFile(kc.Kubeconfig, kubeconfig); err != nil {
		return err
	}
	kubectl, kubectlErr := linkKubectl(binDir, filepath.Join(dir, "bin"))
	if kubectlErr != nil {
		log.Warn("no kubectl from the local build; use your own", "err", kubectlErr)
	}
	st := localState{
		PID: os.Getpid(), Started: time.Now().UTC(), Endpoint: emu.URL(), Region: *region, ClusterName: *cluster,
		InterruptionQueueURL: emu.InterruptionQueueURL(), APIServer: kc.RESTConfig.Host, Kubeconfig: kubeconfig,
		Identities: map[string]credential{},
	}
	for _, id := range emu.Identities() {
		st.Identities[id.Name] = credential{AccessKeyID: id.AccessKeyID, SecretAccessKey: id.SecretAccessKey}
	}
	awsEnvPath := filepath.Join(dir, "aws.env")
	if err := writeEnvFile(awsEnvPath, st.awsEnv("operator")); err != nil {
		return err
	}
	if err := writeState(dir, st); err != nil {
		return err
	}
	defer os.Remove(statePath(dir))

	// The functions on their triggers. Stopped before the deferred stops
	// above run: cancelled invocations release their leases through the
	// API server.
	metricsPath := filepath.Join(dir, "metrics.log")
	metricsFile, err := os.Create(metricsPath)
	if err != nil {
		return err
	}
	defer metricsFile.Close()
	rt := newLambdaRuntime(st, *logLevel, logOut, &syncWriter{w: metricsFile}, log.With("component", "lambda"))
	var scheduled []scheduleEntry
	if *runSchedules {
		scheduled = activeSchedules(*responsiveness)
	}
	rt.serveInvoke(emu)
	stopLambdas, err := rt.runLambdas(ctx, scheduled, *runInterruption, rate)
	if err != nil {
		return err
	}
	defer stopLambdas()

	c.printf("\nKarpless local environment is up (cluster %s, %s).\n\n", *cluster, *region)
	c.printf("  Kubernetes API    %s\n  kubeconfig        %s\n", kc.RESTConfig.Host, kubeconfig)
	c.printf("  AWS emulator      %s (EC2, SSM, SQS, EKS, IAM, STS)\n  AWS environment   %s\n", emu.URL(), awsEnvPath)
	c.printf("  interruption SQS  %s\n  state             %s\n", st.InterruptionQueueURL, statePath(dir))
	c.printf("  functions' logs   this terminal (standard error); their metrics (EMF) in %s\n\n", metricsPath)
	c.printf("In another shell:\n\n")
	if kubectl != "" {
		c.printf("  export KUBECONFIG=%s PATH=%s:$PATH\n", kubeconfig, filepath.Dir(kubectl))
	} else {
		c.printf("  export KUBECONFIG=%s    # and a kubectl of your own\n", kubeconfig)
	}
	c.printf("  set -a; . %s; set +a      # AWS_ENDPOINT_URL and test credentials for the aws CLI or SDKs\n", awsEnvPath)
	c.printf("  kubectl apply -f your-workload.yaml\n")
	if !*runSchedules {
		c.printf("  karpless local tick provisioner --dir %s\n", dir)
	}
	c.printf("  karpless local instances --dir %s\n", dir)
	c.printf("  karpless local inject spot-interruption <instance-id> --dir %s\n\n", dir)
	every := "every minute"
	if rate > 0 {
		every = "every " + rate.String() + " (" + ScheduleRateEnv + ")"
	}
	switch {
	case *runSchedules && *runInterruption:
		c.printf("The %s functions run %s and the interruption function drains its queue, as deployed;\n", scheduledNames(), every)
		c.printf("`karpless local tick <function>` invokes one now.\n")
	case *runSchedules:
		c.printf("The %s functions run %s; the interruption queue is left alone (`karpless local tick interruption`).\n", scheduledNames(), every)
	case *runInterruption:
		c.printf("The interruption function drains its queue; no schedule runs (`karpless local tick <function>`).\n")
	default:
		c.printf("No function runs by itself: invoke them with `karpless local tick <function>`.\n")
	}
	c.printf("Ctrl-C stops everything.\n")

	<-ctx.Done()
	c.printf("\nstopping: the functions (invocations in flight are cancelled), the AWS emulator, then the control plane...\n")
	return nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}

// linkKubectl links the kubectl built with the control plane (in src)
// into binDir.
func linkKubectl(src, binDir string) (string, error) {
	target := filepath.Join(src, "kubectl")
	if _, err := os.Stat(target); err != nil {
		return "", err
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	link := filepath.Join(binDir, "kubectl")
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return link, os.Symlink(target, link)
}
