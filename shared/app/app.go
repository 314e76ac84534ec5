// Package app builds each function's engine from the environment, once per
// warm container, and exposes the handlers the Lambda mains and `karpless local` run.
package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	awssdkconfig "github.com/aws/aws-sdk-go-v2/config"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/karpless/karpless/functions"
	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/awsconfig"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/launchtemplate"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/aws/unavailable"
	awszonalshift "github.com/karpless/karpless/shared/aws/zonalshift"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/zonalshift"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/eksauth"
	"github.com/karpless/karpless/shared/ticks/disrupt"
	"github.com/karpless/karpless/shared/ticks/provision"
)

// Env is everything a function needs that is worth keeping across
// invocations of a warm container: settings and clients, never cluster data.
type Env struct {
	Config  config.Config
	AWS     *awsconfig.Clients
	Cluster *eksauth.Cluster
	Kube    *kube.Clients
	Catalog *catalog.Catalog
	// Prices reads the region's offerings, prices and instance types; one
	// per warm container, so a book is decoded once per version.
	Prices *pricing.Source
	// Warm is the container's memory between invocations (nil: none, every
	// invocation starts cold).
	Warm  *Warm
	Log   *slog.Logger
	Clock clock.WithTicker
	// Out receives EMF metrics; CloudWatch reads them from the function's log.
	Out io.Writer
}

// Load reads the environment (lookup is os.LookupEnv in production) and
// builds the clients. It fails fast, naming what is wrong.
func Load(ctx context.Context, lookup func(string) (string, bool)) (*Env, error) {
	env, err := connect(ctx, lookup)
	if err != nil {
		return nil, err
	}
	if env.Catalog, err = catalog.Load(); err != nil {
		return nil, err
	}
	env.Warm = &Warm{}
	env.Prices = env.NewPrices()
	return env, nil
}

// connect reads the settings and builds the AWS and Kubernetes clients:
// what every function needs, without the catalog a small one (the
// watcher) has no use for.
func connect(ctx context.Context, lookup func(string) (string, bool)) (*Env, error) {
	cfg, err := config.FromLookup(lookup)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	log := record.NewLogger(os.Stdout, cfg.LogLevel)
	awsOpts := awsconfig.FromLookup(lookup)
	if cfg.Shadow() {
		// Every client refuses to change anything in AWS (the stack's
		// IAM grants no such action either).
		awsOpts = append(awsOpts, func(o *awssdkconfig.LoadOptions) error {
			o.APIOptions = append(o.APIOptions, shadow.APIOption)
			return nil
		})
		log.Info("shadow mode: deciding beside Karpenter, changing nothing", "mode", cfg.Mode)
	}
	aws, err := awsconfig.LoadClients(ctx, cfg.Region, awsOpts...)
	if err != nil {
		return nil, err
	}
	src := eksauth.SourceFromEnv(lookup)
	src.EKS, src.STS = aws.EKS, eksauth.NewPresigner(aws.STS)
	src.QPS, src.Burst = float32(cfg.KubeClientQPS), cfg.KubeClientBurst
	cluster := eksauth.New(src)
	rest, err := cluster.RESTConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to cluster %s: %w", cfg.ClusterName, err)
	}
	if cfg.Shadow() {
		rest.Wrap(shadow.Kube(cfg.Namespace, ShadowOwn()))
	}
	kc, err := kube.NewClients(rest)
	if err != nil {
		return nil, err
	}
	return &Env{Config: cfg, AWS: aws, Cluster: cluster, Kube: kc, Log: log, Clock: clock.RealClock{}, Out: os.Stdout}, nil
}

// ShadowOwn names the Leases and ConfigMaps the functions write in shadow
// mode: the ticks' leases, the state ConfigMaps and the decision stores
// of the functions that record decisions.
func ShadowOwn() shadow.Own {
	return shadow.Own{
		Leases: []string{provision.LeaseName, disrupt.LeaseName},
		ConfigMaps: []string{
			unavailable.ConfigMapName, pricing.ConfigMapName, disrupt.StateConfigMap,
			shadow.StoreName(functions.Provisioner), shadow.StoreName(functions.Disruption),
		},
	}
}

// NewPrices is the price source of this environment's region.
func (e *Env) NewPrices() *pricing.Source {
	src := &pricing.Source{EC2: e.AWS.EC2, Region: e.Config.Region, ConfigMap: e.Kube.Core.CoreV1(), Namespace: e.Config.Namespace, Clock: e.Clock}
	if e.Warm != nil {
		src.Cache = &e.Warm.Prices
	}
	// A nil *pricing.Client in the interface would not read as "none".
	// ISOLATED_VPC: no Price List API call, the build's prices stand in.
	if e.AWS.PriceList != nil && !e.Config.IsolatedVPC {
		src.PriceList = e.AWS.PriceList
	}
	return src
}

// Provisioner is a provisioning engine for one invocation.
func (e *Env) Provisioner() *provision.Provisioner {
	resolver := &nodeclass.Resolver{
		EC2: e.AWS.EC2, SSM: e.AWS.SSM, IAM: e.AWS.IAM, Region: e.Config.Region, Now: e.Clock.Now,
		Validate: launchtemplate.Validate, Selectors: e.selectors(),
	}
	templates := &launchtemplate.Provider{EC2: e.AWS.EC2, Now: e.Clock.Now, Region: e.Config.Region}
	return &provision.Provisioner{
		Config:     e.Config,
		Kube:       e.Kube,
		Instances:  instance.NewProvider(e.AWS.EC2, e.Config.ClusterName),
		Resolver:   resolver,
		Cleanup:    NodeClassCleanup{Resolver: resolver, Templates: templates},
		Templates:  Templates{templates},
		Prices:     e.prices(),
		Catalog:    e.Catalog,
		Cluster:    e.Cluster.Info,
		Clock:      e.Clock,
		Log:        e.Log,
		MetricsOut: e.Out,
		Decisions:  e.Decisions(functions.Provisioner),

		ZonalShifts: e.zonalShifts(),
	}
}

// zonalShifts is an invocation's reader of the cluster's ARC zonal shifts
// (ENABLE_ZONAL_SHIFT), or nil when the setting is off.
func (e *Env) zonalShifts() awszonalshift.Source {
	if !e.Config.EnableZonalShift {
		return nil
	}
	return &awszonalshift.Reader{
		API: e.AWS.ARCZonalShift, ClusterARN: e.Config.ClusterARN, Now: e.Clock.Now, MaxAge: awszonalshift.DefaultMaxAge, Log: e.Log,
		LastKnown: e.lastKnownZonalShifts,
	}
}

// lastKnownZonalShifts are the zones the disruption function last found
// shifted away from (its state ConfigMap); none when it never recorded any.
func (e *Env) lastKnownZonalShifts(ctx context.Context) (zonalshift.Zones, error) {
	cm, err := e.Kube.Core.CoreV1().ConfigMaps(e.Config.Namespace).Get(ctx, disrupt.StateConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading configmap %s/%s: %w", e.Config.Namespace, disrupt.StateConfigMap, err)
	}
	return zonalshift.Parse(cm.Data[disrupt.ZonalShiftsKey]), nil
}

// Decisions records a function's decisions in shadow mode (MODE=shadow);
// nil, so the engines act, otherwise. One per invocation.
func (e *Env) Decisions(function string) *shadow.Recorder {
	if !e.Config.Shadow() {
		return nil
	}
	return &shadow.Recorder{Function: function, Namespace: e.Config.Namespace, ConfigMaps: e.Kube.Core.CoreV1(), Clock: e.Clock, Log: e.Log}
}

// selectors is the container's memory of selector queries; nil (none)
// for an Env without a warm container.
func (e *Env) selectors() *nodeclass.SelectorCache {
	if e.Warm == nil {
		return nil
	}
	return &e.Warm.Selectors
}

// prices is the container's price source, or a new one for an Env made
// by hand without one (it then decodes the book on every invocation).
func (e *Env) prices() *pricing.Source {
	if e.Prices == nil {
		return e.NewPrices()
	}
	return e.Prices
}

// Templates adapts the launch template provider to the provisioner.
type Templates struct{ P *launchtemplate.Provider }

// Ensure implements cloud.Templates.
func (t Templates) Ensure(ctx context.Context, r cloud.TemplateRequest) ([]instance.LaunchTemplate, error) {
	lts, err := t.P.Ensure(ctx, launchtemplate.Request(r))
	if err != nil {
		return nil, err
	}
	out := make([]instance.LaunchTemplate, len(lts))
	for i, lt := range lts {
		out[i] = instance.LaunchTemplate{Name: lt.Name, ImageID: lt.ImageID, InstanceTypes: lt.InstanceTypes}
	}
	return out, nil
}

// NodeClassCleanup adapts the resolver and the launch template provider to
// the provisioner's EC2NodeClass finalizer.
type NodeClassCleanup struct {
	*nodeclass.Resolver
	Templates *launchtemplate.Provider
}

// DeleteLaunchTemplates implements provision.NodeClassCleanup.
func (c NodeClassCleanup) DeleteLaunchTemplates(ctx context.Context, cluster string, nc *awsv1.EC2NodeClass) ([]string, error) {
	return c.Templates.DeleteForNodeClass(ctx, cluster, nc.Name)
}

// invocationID is the Lambda request id, or a fresh id outside Lambda.
func invocationID(ctx context.Context, prefix string) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		return lc.AwsRequestID
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%s-%d-%d", prefix, host, os.Getpid(), time.Now().UnixNano())
}
