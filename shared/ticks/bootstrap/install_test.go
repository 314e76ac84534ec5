package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/karpless/karpless/shared/apis/crds"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env, kubetest.Options{NoCRDs: true})) }

const testCluster = "demo"

func defaultOpts() Options {
	return Options{ClusterName: testCluster, DefaultNodePool: true, NodeRoleName: "KarpenterNodeRole-demo"}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// reset removes everything the bootstrap may have installed, user objects
// and CRDs included, and waits until the CRDs are gone, so each test
// starts from an empty cluster.
func reset(t *testing.T, c *kube.Clients) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	waitStorage(t, c)
	if _, err := Uninstall(ctx, c, Options{RemoveUserObjects: true}); err != nil {
		t.Fatalf("reset: %v", err)
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	// Uninstall deletes only the CRDs the bootstrap created; a test may
	// have made them as Karpenter's chart does.
	for _, crd := range all {
		err := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("reset: deleting CRD %s: %v", crd.Name, err)
		}
	}
	// The API server's own controller finishes a CRD's deletion (its
	// objects deleted, then the CRD); it retries with a growing backoff,
	// which on a loaded machine (CI, the integration packages side by
	// side) took over a minute.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, crd := range all {
			_, err := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err == nil {
				return false, nil
			}
			if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("reset: waiting for the CRDs to go: %v", err)
	}
}

// waitStorage lists the objects of each installed CRD once, which returns
// when the API server's storage for it is ready (about a second after it
// is Established). A namespaced CRD (CapacityBuffer) deleted before then
// keeps its cleanup finalizer for a minute or more: the API server's
// finalizer cannot list its objects ("storage is (re)initializing") and
// retries with a growing backoff, longer than a test waits. A test that
// deletes the CRDs it has just installed calls it first.
func waitStorage(t *testing.T, c *kube.Clients) {
	t.Helper()
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	d, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, crd := range all {
		if _, err := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{}); err != nil {
			continue // not installed: nothing to wait for
		}
		gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: crd.Spec.Versions[0].Name, Resource: crd.Spec.Names.Plural}
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := d.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			return err == nil, nil
		})
	}
}

// versions are the resourceVersions of everything Install owns.
func versions(t *testing.T, c *kube.Clients, o Options) map[string]string {
	t.Helper()
	ctx := testCtx(t)
	o = o.withDefaults()
	out := map[string]string{}
	rec := func(key string, m metav1.Object, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !isOwned(m) && !strings.HasPrefix(key, "user ") {
			t.Errorf("%s lacks the label %s=%s: %v", key, ManagedByLabel, ManagedByValue, m.GetLabels())
		}
		out[key] = m.GetResourceVersion()
	}
	all, _ := crds.All()
	for _, crd := range all {
		got, err := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		rec("crd "+crd.Name, got, err)
	}
	cr, err := c.Core.RbacV1().ClusterRoles().Get(ctx, ClusterRoleName, metav1.GetOptions{})
	rec("clusterrole", cr, err)
	crb, err := c.Core.RbacV1().ClusterRoleBindings().Get(ctx, ClusterRoleName, metav1.GetOptions{})
	rec("clusterrolebinding", crb, err)
	ro, err := c.Core.RbacV1().Roles(o.Namespace).Get(ctx, RoleName, metav1.GetOptions{})
	rec("role", ro, err)
	rb, err := c.Core.RbacV1().RoleBindings(o.Namespace).Get(ctx, RoleName, metav1.GetOptions{})
	rec("rolebinding", rb, err)
	for _, name := range FlowSchemas() {
		fs, err := c.Core.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
		rec("flowschema "+name, fs, err)
		// The API server's flow-control controller writes a FlowSchema's
		// status (its Dangling condition) on its own, moving the
		// resourceVersion; what Install writes is the spec: its generation.
		if err == nil {
			out["flowschema "+name] = fmt.Sprintf("generation %d", fs.Generation)
		}
	}
	for _, name := range []string{UnavailableOfferingsConfigMap, PricingConfigMap, PauseConfigMap} {
		cm, err := c.Core.CoreV1().ConfigMaps(o.Namespace).Get(ctx, name, metav1.GetOptions{})
		rec("configmap "+name, cm, err)
	}
	if o.DefaultNodePool {
		np, err := c.NodePools.Get(ctx, DefaultName, metav1.GetOptions{})
		rec("nodepool", np, err)
		nc, err := c.EC2NodeClasses.Get(ctx, DefaultName, metav1.GetOptions{})
		rec("ec2nodeclass", nc, err)
	}
	return out
}

// checkInstalled verifies the state a complete Install leaves.
func checkInstalled(t *testing.T, c *kube.Clients, o Options) map[string]string {
	t.Helper()
	ctx := testCtx(t)
	o = o.withDefaults()
	v := versions(t, c, o)
	crb, err := c.Core.RbacV1().ClusterRoleBindings().Get(ctx, ClusterRoleName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(crb.Subjects) != 1 || crb.Subjects[0].Kind != "Group" || crb.Subjects[0].Name != o.ControllersGroup || crb.RoleRef.Name != ClusterRoleName {
		t.Errorf("ClusterRoleBinding = %+v -> %+v", crb.Subjects, crb.RoleRef)
	}
	rb, err := c.Core.RbacV1().RoleBindings(o.Namespace).Get(ctx, RoleName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rb.Subjects) != 1 || rb.Subjects[0].Name != o.ControllersGroup || rb.RoleRef.Kind != "Role" {
		t.Errorf("RoleBinding = %+v -> %+v", rb.Subjects, rb.RoleRef)
	}
	all, _ := crds.All()
	for _, crd := range all {
		got, err := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		managed := false
		for _, mf := range got.ManagedFields {
			managed = managed || (mf.Manager == kube.FieldManager && mf.Operation == metav1.ManagedFieldsOperationApply)
		}
		if !managed {
			t.Errorf("CRD %s is not server-side applied by %s: %+v", crd.Name, kube.FieldManager, got.ManagedFields)
		}
	}
	if o.DefaultNodePool {
		nc, err := c.EC2NodeClasses.Get(ctx, DefaultName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if nc.Spec.Role != o.NodeRoleName || nc.Spec.AMISelectorTerms[0].Alias != "al2023@latest" ||
			nc.Spec.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] != o.ClusterName ||
			nc.Spec.SecurityGroupSelectorTerms[0].Tags["karpenter.sh/discovery"] != o.ClusterName {
			t.Errorf("default EC2NodeClass spec = %+v", nc.Spec)
		}
		np, err := c.NodePools.Get(ctx, DefaultName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cpu := np.Spec.Limits[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("1000")) != 0 ||
			np.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized ||
			np.Spec.Disruption.ConsolidateAfter.String() != "1m0s" || len(np.Spec.Template.Spec.Requirements) != 5 ||
			np.Spec.Template.Spec.NodeClassRef.Name != DefaultName {
			t.Errorf("default NodePool spec = %+v", np.Spec)
		}
	}
	return v
}

// checkUninstalled verifies that nothing Install owns is left but the CRDs.
func checkUninstalled(t *testing.T, c *kube.Clients, o Options) {
	t.Helper()
	ctx := testCtx(t)
	o = o.withDefaults()
	gone := func(what string, err error) {
		t.Helper()
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: want NotFound, got %v", what, err)
		}
	}
	_, err := c.Core.RbacV1().ClusterRoles().Get(ctx, ClusterRoleName, metav1.GetOptions{})
	gone("ClusterRole", err)
	_, err = c.Core.RbacV1().ClusterRoleBindings().Get(ctx, ClusterRoleName, metav1.GetOptions{})
	gone("ClusterRoleBinding", err)
	_, err = c.Core.RbacV1().Roles(o.Namespace).Get(ctx, RoleName, metav1.GetOptions{})
	gone("Role", err)
	_, err = c.Core.RbacV1().RoleBindings(o.Namespace).Get(ctx, RoleName, metav1.GetOptions{})
	gone("RoleBinding", err)
	for _, name := range []string{UnavailableOfferingsConfigMap, PricingConfigMap, PauseConfigMap} {
		_, err = c.Core.CoreV1().ConfigMaps(o.Namespace).Get(ctx, name, metav1.GetOptions{})
		gone("ConfigMap "+name, err)
	}
	for _, name := range FlowSchemas() {
		_, err = c.Core.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
		gone("FlowSchema "+name, err)
	}
	_, err = c.NodePools.Get(ctx, DefaultName, metav1.GetOptions{})
	gone("default NodePool", err)
	_, err = c.EC2NodeClasses.Get(ctx, DefaultName, metav1.GetOptions{})
	gone("default EC2NodeClass", err)
}

func TestInstallOnEmptyCluster(t *testing.T) {
	e := kubetest.Need(t, env)
	reset(t, e.Clients)
	res, err := Install(testCtx(t), e.Clients, defaultOpts())
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, e.Clients, defaultOpts())
	for _, want := range []string{"NodePool/default", "EC2NodeClass/default", "ConfigMap/kube-system/" + PricingConfigMap} {
		if !slices.Contains(res.Created, want) {
			t.Errorf("Created = %v, missing %s", res.Created, want)
		}
	}
	if len(res.Applied) != 15 { // 5 CRDs, the controllers' and the watcher's ClusterRole(Binding) and Role(Binding), 2 FlowSchemas
		t.Errorf("Applied = %v", res.Applied)
	}
}

func TestInstallTwiceIsNoOp(t *testing.T) {
	e := kubetest.Need(t, env)
	reset(t, e.Clients)
	ctx := testCtx(t)
	if _, err := Install(ctx, e.Clients, defaultOpts()); err != nil {
		t.Fatal(err)
	}
	before := checkInstalled(t, e.Clients, defaultOpts())
	res, err := Install(ctx, e.Clients, defaultOpts())
	if err != nil {
		t.Fatal(err)
	}
	after := checkInstalled(t, e.Clients, defaultOpts())
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: resourceVersion %s -> %s on the second Install", k, v, after[k])
		}
	}
	if len(res.Created) != 0 {
		t.Errorf("second Install created %v", res.Created)
	}
	if len(res.Kept) != 2 {
		t.Errorf("second Install kept %v, want the default NodePool and EC2NodeClass", res.Kept)
	}
}

func TestUserDefaultNodePoolIsLeftAlone(t *testing.T) {
	e := kubetest.Need(t, env)
	c := e.Clients
	reset(t, c)
	ctx := testCtx(t)
	if _, err := Install(ctx, c, Options{}); err != nil { // CRDs and RBAC only
		t.Fatal(err)
	}
	mine := DefaultNodePool()
	mine.Labels = map[string]string{"team": "platform"}
	mine.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("10")}
	mine, err := c.NodePools.Create(ctx, mine, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Install(ctx, c, defaultOpts())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Kept, func(s string) bool { return strings.HasPrefix(s, "NodePool/default (exists and is not Karpless's") }) {
		t.Errorf("Kept = %v", res.Kept)
	}
	got, err := c.NodePools.Get(ctx, DefaultName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != mine.ResourceVersion || isOwned(got) {
		t.Errorf("the user's NodePool was changed: %v %v", got.Labels, got.Spec.Limits)
	}

	res, err = Uninstall(ctx, c, defaultOpts())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NodePools.Get(ctx, DefaultName, metav1.GetOptions{}); err != nil {
		t.Errorf("the user's NodePool was deleted: %v", err)
	}
	if _, err := c.EC2NodeClasses.Get(ctx, DefaultName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the EC2NodeClass the bootstrap created is still there: %v", err)
	}
	if !slices.ContainsFunc(res.Left, func(s string) bool { return strings.HasPrefix(s, "NodePool/default") }) {
		t.Errorf("Left = %v", res.Left)
	}
}

func TestUninstallKeepsCRDsUnlessAsked(t *testing.T) {
	e := kubetest.Need(t, env)
	c := e.Clients
	reset(t, c)
	ctx := testCtx(t)
	if _, err := Install(ctx, c, defaultOpts()); err != nil {
		t.Fatal(err)
	}
	user := DefaultNodePool()
	user.Name, user.Labels = "team-a", nil
	if _, err := c.NodePools.Create(ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second run finds nothing to do
		if _, err := Uninstall(ctx, c, defaultOpts()); err != nil {
			t.Fatalf("Uninstall #%d: %v", i+1, err)
		}
		checkUninstalled(t, c, defaultOpts())
	}
	all, _ := crds.All()
	for _, crd := range all {
		if _, err := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("CRD %s: %v", crd.Name, err)
		}
	}
	if _, err := c.NodePools.Get(ctx, "team-a", metav1.GetOptions{}); err != nil {
		t.Errorf("user NodePool: %v", err)
	}

	// A NodeClaim whose instance no controller terminated keeps its
	// finalizer: Uninstall reports it and does not remove the finalizer.
	claim, err := c.NodeClaims.Create(ctx, &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim-1", Finalizers: []string{wellknown.TerminationFinalizer}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/arch", Operator: "In", Values: []string{"amd64"}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := defaultOpts()
	o.RemoveUserObjects = true
	waitStorage(t, c) // the CRDs go next
	res, err := Uninstall(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Left, func(s string) bool { return strings.HasPrefix(s, "NodeClaim/claim-1 (terminating") }) {
		t.Errorf("Left = %v", res.Left)
	}
	if _, err := Uninstall(ctx, c, o); err != nil {
		t.Fatalf("Uninstall again with a NodeClaim stuck on its finalizer: %v", err)
	}
	got, err := c.NodeClaims.Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil || len(got.Finalizers) != 1 {
		t.Fatalf("NodeClaim: %v %+v", err, got)
	}
	got.Finalizers = nil // what the disruption function would do
	if _, err := c.NodeClaims.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, crd := range all {
		got, err := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err == nil && got.DeletionTimestamp == nil {
			t.Errorf("CRD %s not deleted", crd.Name)
		}
	}
	if _, err := Uninstall(ctx, c, o); err != nil {
		t.Fatalf("Uninstall again after removing the CRDs: %v", err)
	}
}

var errKilled = errors.New("killed")

// TestKilledInstallConverges stops an Install after each of its steps in
// turn (make test: a sample of them, deploy.SampleSteps), then checks a
// full Install finishes the job.
func TestKilledInstallConverges(t *testing.T) {
	e := kubetest.Need(t, env)
	c := e.Clients
	o := defaultOpts()
	steps := installSteps(o.withDefaults())
	// make test kills after every third step and the last; make test-kills
	// after each.
	sample := deploy.SampleSteps(len(steps), 3, 0)
	for k := range steps {
		if !sample[k] {
			continue
		}
		t.Run(fmt.Sprintf("after_%d_%s", k+1, strings.ReplaceAll(steps[k].name, " ", "_")), func(t *testing.T) {
			reset(t, c)
			ctx := testCtx(t)
			done := 0
			_, err := run(ctx, c, o, steps, func(string) error {
				if done++; done > k {
					return errKilled
				}
				return nil
			})
			if !errors.Is(err, errKilled) {
				t.Fatalf("killed run: %v", err)
			}
			if _, err := Install(ctx, c, o); err != nil {
				t.Fatalf("Install after a run killed after step %d: %v", k+1, err)
			}
			before := checkInstalled(t, c, o)
			if _, err := Install(ctx, c, o); err != nil {
				t.Fatal(err)
			}
			if after := versions(t, c, o); !maps.Equal(before, after) {
				t.Errorf("a third Install changed objects: %v -> %v", before, after)
			}
		})
	}
}

// TestKilledUninstallConverges does the same for Uninstall, with and
// without the removal of user objects and CRDs.
func TestKilledUninstallConverges(t *testing.T) {
	e := kubetest.Need(t, env)
	c := e.Clients
	for _, remove := range []bool{false, true} {
		o := defaultOpts()
		o.RemoveUserObjects = remove
		steps := uninstallSteps(o.withDefaults())
		// make test kills after every second step (the other half with
		// the other option) and the last; make test-kills after each.
		offset := 0
		if remove {
			offset = 1
		}
		sample := deploy.SampleSteps(len(steps), 2, offset)
		for k := range steps {
			if !sample[k] {
				continue
			}
			t.Run(fmt.Sprintf("remove_%v_after_%d_%s", remove, k+1, strings.ReplaceAll(steps[k].name, " ", "_")), func(t *testing.T) {
				reset(t, c)
				ctx := testCtx(t)
				if _, err := Install(ctx, c, o); err != nil {
					t.Fatal(err)
				}
				user := DefaultNodePool()
				user.Name, user.Labels = "team-a", nil
				if _, err := c.NodePools.Create(ctx, user, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				waitStorage(t, c) // the runs may delete the CRDs
				done := 0
				_, err := run(ctx, c, o, steps, func(string) error {
					if done++; done > k {
						return errKilled
					}
					return nil
				})
				if !errors.Is(err, errKilled) {
					t.Fatalf("killed run: %v", err)
				}
				if _, err := Uninstall(ctx, c, o); err != nil {
					t.Fatalf("Uninstall after a run killed after step %d: %v", k+1, err)
				}
				checkUninstalled(t, c, o)
				_, err = c.NodePools.Get(ctx, "team-a", metav1.GetOptions{})
				if remove != apierrors.IsNotFound(err) {
					t.Errorf("user NodePool with RemoveUserObjects=%v: %v", remove, err)
				}
			})
		}
	}
}

func TestNamespaceOption(t *testing.T) {
	e := kubetest.Need(t, env)
	c := e.Clients
	reset(t, c)
	ctx := testCtx(t)
	o := Options{Namespace: kubetest.Name(t), ControllersGroup: "karpless:test"}
	res, err := Install(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Created, "Namespace/"+o.Namespace) {
		t.Errorf("Created = %v", res.Created)
	}
	checkInstalled(t, c, o)

	// Moving to kube-system removes the Role and RoleBinding left in the
	// former namespace.
	res, err = Install(ctx, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, c, Options{})
	if _, err := c.Core.RbacV1().Roles(o.Namespace).Get(ctx, RoleName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Role in the former namespace: %v (Deleted = %v)", err, res.Deleted)
	}

	if _, err := Uninstall(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	ns, err := c.Core.CoreV1().Namespaces().Get(ctx, o.Namespace, metav1.GetOptions{})
	if err == nil && ns.DeletionTimestamp == nil {
		t.Errorf("the namespace the bootstrap created was not deleted")
	}
	// kube-system is never deleted.
	if _, err := Uninstall(ctx, c, Options{}); err != nil {
		t.Fatal(err)
	}
	if ks, err := c.Core.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{}); err != nil || ks.DeletionTimestamp != nil {
		t.Errorf("kube-system: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{}, ""},
		{defaultOpts(), ""},
		{Options{ControllersGroup: "system:authenticated"}, "reserved"},
		{Options{ControllersGroup: "a b"}, "whitespace"},
		{Options{Namespace: "Not_A_Label"}, "namespace"},
		{Options{ClusterName: "-bad"}, "not a valid EKS cluster name"},
		{Options{DefaultNodePool: true}, "needs the cluster name"},
		{Options{DefaultNodePool: true, ClusterName: "c"}, "needs the node role name"},
		{Options{DefaultNodePool: true, ClusterName: "c", NodeRoleName: "arn:aws:iam::1:role/x"}, "not an IAM role name"},
	} {
		err := tc.o.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.o, err, tc.want)
		}
	}
}

// TestInstallDropsAConversionWebhook: CRDs left by an old Karpenter chart
// may convert through a webhook whose service is gone; Install takes the
// field over and sets the strategy to None.
func TestInstallDropsAConversionWebhook(t *testing.T) {
	e := kubetest.Need(t, env)
	c := e.Clients
	reset(t, c)
	ctx := testCtx(t)
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	old := all[0].DeepCopy()
	port := int32(8443)
	old.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: "karpenter", Name: "karpenter", Port: &port}},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	if _, err := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, old, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(ctx, c, defaultOpts()); err != nil {
		t.Fatal(err)
	}
	got, err := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, old.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if conv := got.Spec.Conversion; conv == nil || conv.Strategy != apiextensionsv1.NoneConverter || conv.Webhook != nil {
		t.Errorf("conversion = %+v", conv)
	}
	checkInstalled(t, c, defaultOpts())
}
