package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/karpless/karpless/shared/apis/crds"
	"github.com/karpless/karpless/shared/core/migrate"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/pause"
	"github.com/karpless/karpless/shared/ticks/bootstrap"
)

// karpless migrate check reads a cluster that Karpenter runs (through the
// kubeconfig, read-only like explain) and its AWS account (through the
// SDK's usual credentials, read-only calls only), and judges each
// precondition of the switch with shared/core/migrate. It exits 1 when
// any check fails.

var migrateCommand = command{
	name:    "migrate",
	summary: "check that switching a cluster from Karpenter to Karpless cannot lose its fleet (read-only)",
	run: func(ctx context.Context, c *cli, args []string) error {
		return dispatch(ctx, c, "migrate", []subcommand{
			{"check", "[--kubeconfig f] [--context n] [--cluster-name n] [--region r] [--node-role r,...] [--queue q] [--aws=false] [-o text|json|yaml]",
				"check every precondition of the switch (Helm's keep policy, stored versions, conversion webhook, Karpenter's Deployment, finalizers, the node role's access entry, Karpenter's IAM and queue); exit 1 when any fails", migrateCheck, nil},
		}, args)
	},
}

// errChecksFailed is returned when the report has a FAIL.
var errChecksFailed = errors.New("checks failed")

type migrateFlags struct {
	cluster   *clusterFlags
	name      string
	region    string
	nodeRoles string
	queue     string
	aws       bool
	output    string
}

func migrateCheck(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless migrate check", "[flags]")
	f := migrateFlags{cluster: addClusterFlags(fs)}
	fs.StringVar(&f.name, "cluster-name", "", "the EKS cluster's name (default: CLUSTER_NAME of Karpenter's Deployment)")
	fs.StringVar(&f.region, "region", "", "the AWS region (default: the SDK's, else AWS_REGION of Karpenter's Deployment)")
	fs.StringVar(&f.nodeRoles, "node-role", "", "node IAM roles to check, comma-separated (default: those the EC2NodeClasses use)")
	fs.StringVar(&f.queue, "queue", "", "Karpenter's interruption queue (default: INTERRUPTION_QUEUE of Karpenter's Deployment, else the cluster name)")
	fs.BoolVar(&f.aws, "aws", true, "check AWS too (access entries, Karpenter's IAM policies and queue)")
	fs.StringVar(&f.output, "o", outputText, "output format: text, json or yaml")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return badUsage(fs, "")
	}
	if err := checkOutput(fs, f.output); err != nil {
		return err
	}
	kc, source, err := f.cluster.clients()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.cluster.timeout)
	defer cancel()
	in, err := readCluster(ctx, kc, f.cluster.namespace)
	if err != nil {
		return clusterError(err, source)
	}
	report := migrate.Report{Source: source}
	add := func(rs ...migrate.Result) { report.Results = append(report.Results, rs...) }
	add(migrate.CheckHelmKeep(in.helm)...)
	add(migrate.CheckStoredVersions(in.crds, in.want)...)
	add(migrate.CheckConversion(in.crds, in.want)...)
	add(migrate.CheckKarpenter(in.deployments, in.karpless)...)
	add(migrate.CheckFinalizers(in.finalizers)...)
	if f.aws {
		add(checkAWS(ctx, f, in)...)
	}
	if err := write(c.out, f.output, report, report.WriteText); err != nil {
		return err
	}
	if report.Failed() {
		return fmt.Errorf("%w: %d FAIL", errChecksFailed, report.Count(migrate.Fail))
	}
	return nil
}

// clusterInput is what was read of the cluster.
type clusterInput struct {
	want        []*apiextensionsv1.CustomResourceDefinition
	crds        []apiextensionsv1.CustomResourceDefinition
	helm        migrate.HelmInput
	deployments []migrate.Deployment
	karpless    migrate.Karpless
	finalizers  migrate.FinalizerInput
	// nodeRoles are the roles the EC2NodeClasses name, with the class;
	// profiles the pre-made instance profiles they name.
	nodeRoles map[string]string
	profiles  map[string]string
	awsAuth   string
}

// readCluster reads everything the checks judge. Only the first read's
// failure is fatal (the cluster cannot be reached); later ones become the
// checks' own findings.
func readCluster(ctx context.Context, kc *kube.Clients, karplessNS string) (*clusterInput, error) {
	want, err := crds.All()
	if err != nil {
		return nil, err
	}
	in := &clusterInput{want: want, nodeRoles: map[string]string{}, profiles: map[string]string{},
		finalizers: migrate.FinalizerInput{ListErrors: map[string]error{}}, helm: migrate.HelmInput{Objects: map[string]int{}}}
	api := kc.APIExtensions.ApiextensionsV1().CustomResourceDefinitions()
	for _, w := range want {
		got, err := api.Get(ctx, w.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		in.crds = append(in.crds, *got)
		if got.Labels[bootstrap.ManagedByLabel] == bootstrap.ManagedByValue {
			in.karpless.Installed = true
		}
	}
	if st, err := pause.Read(ctx, kc.Core.CoreV1(), karplessNS); err == nil && st.Exists {
		in.karpless.Installed, in.karpless.Paused = true, st.Paused
	}
	in.helm.CRDs = in.crds
	in.readHelm(ctx, kc)
	in.readObjects(ctx, kc)

	deps, err := kc.Core.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: migrate.KarpenterLabel})
	if err != nil {
		return nil, fmt.Errorf("listing Deployments labelled %s: %w", migrate.KarpenterLabel, err)
	}
	for _, d := range deps.Items {
		md := migrate.Deployment{Namespace: d.Namespace, Name: d.Name, Ready: d.Status.ReadyReplicas, Env: map[string]string{},
			HelmRelease: d.Annotations[migrate.HelmReleaseNameAnn]}
		md.Replicas = 1
		if d.Spec.Replicas != nil {
			md.Replicas = *d.Spec.Replicas
		}
		for _, ctr := range d.Spec.Template.Spec.Containers {
			for _, e := range ctr.Env {
				if e.Value != "" {
					md.Env[e.Name] = e.Value
				}
			}
		}
		in.deployments = append(in.deployments, md)
	}
	if cm, err := kc.Core.CoreV1().ConfigMaps("kube-system").Get(ctx, "aws-auth", metav1.GetOptions{}); err == nil {
		in.awsAuth = cm.Data["mapRoles"]
	}
	return in, nil
}

// readHelm decodes every stored Helm revision it may read: cluster-wide if
// allowed, else in the namespaces the CRDs' release annotations name.
func (in *clusterInput) readHelm(ctx context.Context, kc *kube.Clients) {
	sel := metav1.ListOptions{LabelSelector: labels.Set{migrate.HelmOwnerLabel: migrate.HelmOwnerValue}.String()}
	namespaces := []string{""}
	var errs []error
	read := func(ns string) error {
		secrets, err := kc.Core.CoreV1().Secrets(ns).List(ctx, sel)
		if err != nil {
			return err
		}
		for _, s := range secrets.Items {
			if string(s.Type) != migrate.HelmSecretType {
				continue
			}
			in.addRelease(s.Data[migrate.HelmReleaseKey], "Secret "+s.Namespace+"/"+s.Name, &errs)
		}
		cms, err := kc.Core.CoreV1().ConfigMaps(ns).List(ctx, sel)
		if err != nil {
			return err
		}
		for _, cm := range cms.Items {
			if v, ok := cm.Data[migrate.HelmReleaseKey]; ok {
				in.addRelease([]byte(v), "ConfigMap "+cm.Namespace+"/"+cm.Name, &errs)
			}
		}
		return nil
	}
	if err := read(""); apierrors.IsForbidden(err) {
		namespaces = nil
		for _, c := range in.crds {
			if ns := c.Annotations[migrate.HelmReleaseNSAnn]; ns != "" && !slices.Contains(namespaces, ns) {
				namespaces = append(namespaces, ns)
			}
		}
		for _, ns := range namespaces {
			if err := read(ns); err != nil {
				errs = append(errs, fmt.Errorf("namespace %s: %w", ns, err))
			}
		}
	} else if err != nil {
		errs = append(errs, err)
	}
	in.helm.ReadError = errors.Join(errs...)
}

func (in *clusterInput) addRelease(data []byte, where string, errs *[]error) {
	r, err := migrate.DecodeHelmRelease(data)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("%s: %w", where, err))
		return
	}
	r.Storage = where
	in.helm.Releases = append(in.helm.Releases, r)
}

// readObjects counts each kind's objects and reads their finalizers.
func (in *clusterInput) readObjects(ctx context.Context, kc *kube.Clients) {
	fin := &in.finalizers
	count := func(crd string, n int, err error) {
		if err != nil {
			n = -1
		}
		in.helm.Objects[crd] = n
	}
	ncs, err := kc.NodeClaims.List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, o := range ncs.Items {
			fin.Objects = append(fin.Objects, migrate.Finalized{Kind: "NodeClaim", Name: o.Name, Finalizers: o.Finalizers, Deleting: o.DeletionTimestamp != nil})
		}
		count("nodeclaims.karpenter.sh", len(ncs.Items), nil)
	} else if !apierrors.IsNotFound(err) {
		fin.ListErrors["NodeClaim"] = err
		count("nodeclaims.karpenter.sh", 0, err)
	}
	classes, err := kc.EC2NodeClasses.List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, o := range classes.Items {
			fin.Objects = append(fin.Objects, migrate.Finalized{Kind: "EC2NodeClass", Name: o.Name, Finalizers: o.Finalizers, Deleting: o.DeletionTimestamp != nil})
			switch {
			case o.Spec.Role != "":
				if _, ok := in.nodeRoles[o.Spec.Role]; !ok {
					in.nodeRoles[o.Spec.Role] = "EC2NodeClass " + o.Name
				}
			case o.Spec.InstanceProfile != nil:
				in.profiles[*o.Spec.InstanceProfile] = "EC2NodeClass " + o.Name
			}
		}
		count("ec2nodeclasses.karpenter.k8s.aws", len(classes.Items), nil)
	} else if !apierrors.IsNotFound(err) {
		fin.ListErrors["EC2NodeClass"] = err
		count("ec2nodeclasses.karpenter.k8s.aws", 0, err)
	}
	pools, err := kc.NodePools.List(ctx, metav1.ListOptions{})
	if err == nil {
		count("nodepools.karpenter.sh", len(pools.Items), nil)
	} else {
		count("nodepools.karpenter.sh", 0, err)
	}
	nodes, err := kc.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "karpenter.sh/nodepool"})
	if err != nil {
		fin.ListErrors["Node"] = err
		return
	}
	for _, o := range nodes.Items {
		fin.Objects = append(fin.Objects, migrate.Finalized{Kind: "Node", Name: o.Name, Finalizers: o.Finalizers, Deleting: o.DeletionTimestamp != nil, Karpenter: true})
	}
}

// karpenterEnv is the first non-empty value of an environment variable of
// Karpenter's Deployments.
func (in *clusterInput) karpenterEnv(name string) (value, deployment string) {
	for _, d := range in.deployments {
		if v := d.Env[name]; v != "" {
			return v, "Deployment " + d.Namespace + "/" + d.Name
		}
	}
	return "", ""
}

// clusterError says why the cluster could not be read, in the user's terms.
func clusterError(err error, source string) error {
	var status apierrors.APIStatus
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server of %s does not accept your credentials (for EKS: aws eks update-kubeconfig --name <cluster>, and an access entry for your IAM identity): %w", source, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("you may not read CustomResourceDefinitions in %s (the check reads CRDs, Secrets, Deployments, Nodes and Karpenter's objects; ask a cluster admin): %w", source, err)
	case !errors.As(err, &status):
		return fmt.Errorf("cannot reach the cluster's API server, %s: %w", source, err)
	}
	return fmt.Errorf("reading %s: %w", source, err)
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// splitList splits a comma-separated flag value.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
