package bootstrap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/lease"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// controllerClients acts as a controller function would: a user of its own
// in the group the access entries map to, and nothing else.
func controllerClients(t *testing.T, e *kubetest.Env, group string) *kube.Clients {
	t.Helper()
	cfg := rest.CopyConfig(e.Cluster.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "karpless:provisioner", Groups: []string{group, "system:authenticated"}}
	c, err := kube.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type access struct {
	ns, verb, group, resource, sub, name string
}

func (a access) String() string {
	s := a.verb + " " + a.resource
	if a.sub != "" {
		s += "/" + a.sub
	}
	if a.group != "" {
		s += "." + a.group
	}
	if a.name != "" {
		s += " " + a.name
	}
	if a.ns != "" {
		s += " in " + a.ns
	}
	return s
}

func allowed(t *testing.T, c *kube.Clients, a access) bool {
	t.Helper()
	r, err := c.Core.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub, Name: a.name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("access review of %s: %v", a, err)
	}
	return r.Status.Allowed
}

// namespacedKinds are the resources of ControllerRules that live in
// namespaces; the ClusterRole grants them in every namespace.
var namespacedKinds = map[string]bool{
	"pods": true, "events": true, "persistentvolumeclaims": true, "daemonsets": true,
	"poddisruptionbudgets": true, "leases": true, "configmaps": true,
	"capacitybuffers": true, "podtemplates": true, "deployments": true, "replicasets": true, "statefulsets": true,
}

// TestRBACGrantsExactlyTheRules checks, as a member of the controllers'
// group, that every grant of ControllerRules (which the docs table renders)
// is allowed and that what is left out is denied.
func TestRBACGrantsExactlyTheRules(t *testing.T) {
	e := kubetest.Need(t, env)
	reset(t, e.Clients)
	ctx := testCtx(t)
	o := Options{}.withDefaults()
	if _, err := Install(ctx, e.Clients, o); err != nil {
		t.Fatal(err)
	}
	c := controllerClients(t, e, o.ControllersGroup)

	for _, r := range ControllerRules() {
		for _, res := range r.Resources {
			resource, sub, _ := strings.Cut(res, "/")
			for _, verb := range r.Verbs {
				names := r.Names
				if len(names) == 0 {
					names = []string{""}
				}
				for _, name := range names {
					a := access{verb: verb, group: r.Group, resource: resource, sub: sub, name: name}
					switch {
					case r.Namespaced:
						a.ns = o.Namespace
						if !allowed(t, c, a) {
							t.Errorf("denied: %s", a)
						}
						// Only in Karpless's namespace.
						a.ns = metav1.NamespaceDefault
						if allowed(t, c, a) {
							t.Errorf("allowed outside the namespace: %s", a)
						}
					case namespacedKinds[resource]:
						a.ns = "team-a"
						if !allowed(t, c, a) {
							t.Errorf("denied: %s", a)
						}
					default:
						if !allowed(t, c, a) {
							t.Errorf("denied: %s", a)
						}
					}
				}
				if len(r.Names) > 0 {
					// Named grants do not reach other objects.
					a := access{ns: o.Namespace, verb: verb, group: r.Group, resource: resource, sub: sub, name: "aws-auth"}
					if allowed(t, c, a) {
						t.Errorf("allowed beyond the named objects: %s", a)
					}
				}
			}
		}
	}

	for _, a := range []access{
		{ns: "kube-system", verb: "get", resource: "secrets"},
		{ns: "team-a", verb: "list", resource: "secrets"},
		{verb: "get", resource: "nodes", sub: "proxy"},
		{verb: "deletecollection", resource: "nodes"},
		{ns: "kube-system", verb: "create", resource: "configmaps"}, // would allow creating aws-auth
		{ns: "kube-system", verb: "list", resource: "configmaps"},
		{ns: "kube-system", verb: "update", resource: "configmaps", name: "aws-auth"},
		// The pause switch is a person's: a function may read it only.
		{ns: "kube-system", verb: "update", resource: "configmaps", name: PauseConfigMap},
		{ns: "kube-system", verb: "patch", resource: "configmaps", name: PauseConfigMap},
		{ns: "kube-system", verb: "delete", resource: "configmaps", name: PauseConfigMap},
		{ns: "team-a", verb: "create", resource: "pods"},
		{ns: "team-a", verb: "update", resource: "pods"},
		{ns: "team-a", verb: "patch", resource: "pods", sub: "status"},
		{ns: "team-a", verb: "create", resource: "pods", sub: "exec"},
		{ns: "team-a", verb: "create", resource: "serviceaccounts", sub: "token"},
		{ns: "team-a", verb: "delete", resource: "events"},
		{ns: "team-a", verb: "update", group: "apps", resource: "daemonsets"},
		{ns: "team-a", verb: "delete", group: "policy", resource: "poddisruptionbudgets"},
		{verb: "update", resource: "persistentvolumes"},
		{verb: "create", resource: "namespaces"},
		{verb: "delete", resource: "namespaces"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
		{verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
		{verb: "bind", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
		{verb: "update", group: "apiextensions.k8s.io", resource: "customresourcedefinitions"},
		{verb: "delete", group: "storage.k8s.io", resource: "volumeattachments"},
		{verb: "delete", group: "karpenter.sh", resource: "nodepools", sub: "status"},
		{verb: "impersonate", resource: "users"},
		// Buffers and what they refer to are the user's.
		{ns: "team-a", verb: "update", group: "autoscaling.x-k8s.io", resource: "capacitybuffers"},
		{ns: "team-a", verb: "list", resource: "podtemplates"},
		{ns: "team-a", verb: "update", group: "apps", resource: "deployments"},
		{ns: "team-a", verb: "update", group: "apps", resource: "deployments", sub: "scale"},
	} {
		if allowed(t, c, a) {
			t.Errorf("allowed: %s", a)
		}
	}
}

// fakeEC2 answers pricing's reads with nothing.
type fakeEC2 struct{}

func (fakeEC2) DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	return &ec2.DescribeInstanceTypeOfferingsOutput{}, nil
}

// DescribeInstanceTypes fails: the build's catalog stands in.
func (fakeEC2) DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	return nil, errors.New("not answered by this fake")
}

func (fakeEC2) DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	return &ec2.DescribeSpotPriceHistoryOutput{}, nil
}

// TestRBACSufficesForTheControllersCode runs the shared packages that keep
// state in the cluster (lease, ice, pricing) and a few typical calls with
// the controllers' identity.
func TestRBACSufficesForTheControllersCode(t *testing.T) {
	e := kubetest.Need(t, env)
	reset(t, e.Clients)
	ctx := testCtx(t)
	o := Options{}.withDefaults()
	if _, err := Install(ctx, e.Clients, o); err != nil {
		t.Fatal(err)
	}
	c := controllerClients(t, e, o.ControllersGroup)
	clk := clocktesting.NewFakeClock(time.Now())

	l := lease.New(c.Core.CoordinationV1(), o.Namespace, "karpless-provisioning", "tick-1", 30*time.Second, clk)
	if ok, err := l.TryAcquire(ctx); err != nil || !ok {
		t.Fatalf("lease: acquired=%v err=%v", ok, err)
	}
	if _, err := l.Renew(ctx); err != nil {
		t.Fatalf("lease renew: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("lease release: %v", err)
	}
	// Other leases of the namespace (the scheduler's, the controller
	// manager's, another tool's) are not the controllers' to renew or take,
	// as Karpenter's chart limits update and patch to its own lease.
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses-leader-election", Namespace: o.Namespace}}
	if _, err := e.Clients.Core.CoordinationV1().Leases(o.Namespace).Create(ctx, other, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	theirs := lease.New(c.Core.CoordinationV1(), o.Namespace, "someone-elses-leader-election", "tick-1", 30*time.Second, clk)
	if ok, err := theirs.TryAcquire(ctx); ok || !apierrors.IsForbidden(err) {
		t.Errorf("taking another lease as the controllers: acquired=%v, err %v; want Forbidden", ok, err)
	}
	if _, err := c.Core.CoordinationV1().Leases(o.Namespace).Patch(ctx, "someone-elses-leader-election", types.MergePatchType,
		[]byte(`{"spec":{"holderIdentity":"karpless"}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("patching another lease as the controllers: want Forbidden, got %v", err)
	}

	cache, err := unavailable.Load(ctx, c.Core.CoreV1(), o.Namespace, time.Minute, clk)
	if err != nil {
		t.Fatal(err)
	}
	cache.Mark("spot", "m5.large", "us-east-1a", "InsufficientInstanceCapacity")
	switch err := cache.Save(ctx); {
	case apierrors.IsInvalid(err):
		// shared/aws/unavailable writes keys with ':' that ConfigMaps reject, which
		// is its own bug; permission-wise the update got through.
		t.Logf("ice save rejected as invalid, not forbidden: %v", err)
	case err != nil:
		t.Fatalf("ice save: %v", err)
	}
	cms := c.Core.CoreV1().ConfigMaps(o.Namespace)
	cm, err := cms.Get(ctx, UnavailableOfferingsConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"spot.m5.large.us-east-1a": clk.Now().UTC().Format(time.RFC3339)}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update %s: %v", UnavailableOfferingsConfigMap, err)
	}

	src := &pricing.Source{EC2: fakeEC2{}, ConfigMap: c.Core.CoreV1(), Namespace: o.Namespace, Clock: clk}
	if _, err := src.Get(ctx); err != nil {
		t.Fatal(err)
	}
	cm, err = e.Clients.Core.CoreV1().ConfigMaps(o.Namespace).Get(ctx, PricingConfigMap, metav1.GetOptions{})
	if err != nil || len(cm.BinaryData["book"]) == 0 {
		t.Fatalf("pricing ConfigMap not written by the controller: %v", err)
	}

	if _, err := c.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list nodes: %v", err)
	}
	if _, err := c.NodePools.List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list NodePools: %v", err)
	}
	if _, err := c.Core.CoreV1().Events("team-a").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "karpless-"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: "p"},
		Reason:         "Nominated", Message: "test",
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsNotFound(err) { // team-a need not exist
		t.Errorf("create event: %v", err)
	}
	_, err = c.Core.CoreV1().ConfigMaps(o.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "aws-auth"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("creating aws-auth: want Forbidden, got %v", err)
	}
	if _, err := c.Core.CoreV1().Secrets(o.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing secrets: want Forbidden, got %v", err)
	}
}

// TestConfigMapNamesMatchTheirUsers keeps the names the Role grants in step
// with the packages that use them.
func TestConfigMapNamesMatchTheirUsers(t *testing.T) {
	if UnavailableOfferingsConfigMap != unavailable.ConfigMapName || PricingConfigMap != pricing.ConfigMapName {
		t.Errorf("ConfigMap names %s, %s; ice uses %s and pricing %s",
			UnavailableOfferingsConfigMap, PricingConfigMap, unavailable.ConfigMapName, pricing.ConfigMapName)
	}
}

// TestDocsTableMatchesRules keeps the RBAC table of docs/deploy.md equal to
// what the ClusterRole and Role grant.
func TestDocsTableMatchesRules(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- rbac-table:begin -->\n", "<!-- rbac-table:end -->"
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/deploy.md lacks the %q ... %q markers around the RBAC table", strings.TrimSpace(begin), end)
	}
	got := doc[i+len(begin) : j]
	if want := rbacMarkdown(DefaultNamespace); got != want {
		t.Errorf("docs/deploy.md RBAC table differs from ControllerRules; replace it with:\n%s", want)
	}
}
