// Package deploy wires the functions' real engines to a local stand-in of
// a deployment: a real API server and the loopback AWS emulator.
//
// Scenario tests, `karpless local` and `make demo` all build their
// environments here, so they run exactly the handlers a deployed stack runs.
package deploy

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/aws/awsconfig"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/eksauth"
	"github.com/karpless/karpless/shared/local/emulator"
)

// Options tune a local environment.
type Options struct {
	// Identity is the emulator identity the functions' AWS calls use
	// (provisioner, disruption, interruption, bootstrap).
	Identity string
	// MaxAttempts of the AWS SDK retryer; 0 means the functions' own
	// retryer (awsconfig.NewRetryer), as they run in Lambda.
	MaxAttempts int
	Clock       clock.WithTicker
	Log         *slog.Logger
	// Configure adjusts the function settings (watch window, TTLs...).
	Configure func(*config.Config)
	// Out receives EMF metric lines (nil discards them).
	Out io.Writer
	// Warm is what a warm container remembers between invocations (the
	// pricing book it decoded last, what selector queries found): envs
	// given the same one run as invocations of one container. Nil is a
	// cold start.
	Warm *app.Warm
}

// NewEnv builds an app.Env whose AWS clients talk to the emulator and whose
// Kubernetes clients are kc: the same engines a Lambda builds from its
// environment.
func NewEnv(emu *emulator.Emulator, kc *kube.Clients, o Options) (*app.Env, error) {
	if o.Identity == "" {
		o.Identity = "provisioner"
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	awsCfg, err := emu.AWSConfig(o.Identity, o.MaxAttempts)
	if err != nil {
		return nil, err
	}
	if o.MaxAttempts == 0 {
		awsCfg.Retryer = awsconfig.NewRetryer
	}
	cfg := config.Config{
		ClusterName:             emu.ClusterName(),
		Region:                  emu.Region(),
		Namespace:               config.DefaultNamespace,
		InterruptionQueueURL:    emu.InterruptionQueueURL(),
		BatchIdle:               timing.DefaultBatchIdle,
		BatchMax:                timing.DefaultBatchMax,
		WatchWindow:             0,
		DeadlineMargin:          timing.DefaultDeadlineMargin,
		LeaseDuration:           timing.DefaultLeaseDuration,
		RegistrationTTL:         timing.DefaultRegistrationTTL,
		UnavailableOfferingsTTL: timing.DefaultUnavailableOfferingsTTL,
		LogLevel:                "info",
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("local configuration: %w", err)
	}
	if cfg.Shadow() {
		// As app.Load does: the clients refuse what shadow mode must
		// never do.
		shadow.GuardAWS(&awsCfg)
		rc := rest.CopyConfig(kc.Config)
		rc.Wrap(shadow.Kube(cfg.Namespace, app.ShadowOwn()))
		if kc, err = kube.NewClients(rc); err != nil {
			return nil, err
		}
	}
	clients := awsconfig.NewClients(awsCfg)
	cat, err := catalog.Load()
	if err != nil {
		return nil, err
	}
	cluster := eksauth.New(eksauth.ClusterSource{Name: cfg.ClusterName, EKS: eks.NewFromConfig(awsCfg)})
	env := &app.Env{Config: cfg, AWS: clients, Cluster: cluster, Kube: kc, Catalog: cat, Log: o.Log, Clock: o.Clock, Out: o.Out, Warm: o.Warm}
	env.Prices = env.NewPrices()
	return env, nil
}

// NewAuthenticatedEnv is NewEnv with Kubernetes clients that authenticate
// as a Lambda does: an EKS token for the emulator identity, which the API
// server (started with the emulator's TokenWebhookURL) maps to the groups an
// access entry would give, so the function runs with exactly the RBAC the
// bootstrap installed.
func NewAuthenticatedEnv(ctx context.Context, emu *emulator.Emulator, o Options) (*app.Env, error) {
	if o.Identity == "" {
		o.Identity = "provisioner"
	}
	awsCfg, err := emu.AWSConfig(o.Identity, o.MaxAttempts)
	if err != nil {
		return nil, err
	}
	cluster := eksauth.New(eksauth.ClusterSource{
		Name: emu.ClusterName(), EKS: eks.NewFromConfig(awsCfg), STS: eksauth.NewPresigner(sts.NewFromConfig(awsCfg)),
	})
	rest, err := cluster.RESTConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting as %s: %w", o.Identity, err)
	}
	kc, err := kube.NewClients(rest)
	if err != nil {
		return nil, err
	}
	e, err := NewEnv(emu, kc, o)
	if err != nil {
		return nil, err
	}
	e.Cluster = cluster
	return e, nil
}

// DefaultNodeClass is an EC2NodeClass that resolves against the emulator's
// seeded world: subnets and security groups tagged for discovery, the
// node role, and the AL2023 alias.
func DefaultNodeClass(cluster, alias string) *awsv1.EC2NodeClass {
	if alias == "" {
		alias = "al2023@latest"
	}
	discovery := map[string]string{wellknown.DiscoveryTagKey: cluster}
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       emulator.NodeRoleName(cluster),
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: alias}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discovery}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discovery}},
		},
	}
}

// DefaultNodePool is a general-purpose NodePool on DefaultNodeClass.
func DefaultNodePool(name string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
	if len(reqs) == 0 {
		reqs = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64", "arm64"}},
			{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}},
			{Key: wellknown.InstanceCategoryLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
			{Key: wellknown.InstanceGenerationLabel, Operator: corev1.NodeSelectorOpGt, Values: []string{"2"}},
		}
	}
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
				Requirements: reqs,
			}},
			Disruption: karpv1.Disruption{ConsolidateAfter: karpv1.MustParseNillableDuration("1m")},
		},
	}
}

// Apply creates the node class and node pools (AlreadyExists is fine).
func Apply(ctx context.Context, kc *kube.Clients, nc *awsv1.EC2NodeClass, pools ...*karpv1.NodePool) error {
	if nc != nil {
		if _, err := kc.EC2NodeClasses.Create(ctx, nc, metav1.CreateOptions{}); err != nil && !isExists(err) {
			return fmt.Errorf("creating ec2nodeclass %s: %w", nc.Name, err)
		}
	}
	for _, np := range pools {
		if _, err := kc.NodePools.Create(ctx, np, metav1.CreateOptions{}); err != nil && !isExists(err) {
			return fmt.Errorf("creating nodepool %s: %w", np.Name, err)
		}
	}
	return nil
}
