// Package bootstrap installs what Karpless needs in a cluster (CRDs, RBAC, state
// ConfigMaps, default NodePool) and removes it, as a CloudFormation custom resource.
package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/karpless/karpless/shared/apis/crds"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/pause"
)

// Every object the bootstrap creates or applies carries this label. Delete
// removes an object only if it still carries it (and has one of the names
// the bootstrap uses): remove the label from a default NodePool to keep it.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "karpless"
)

// Defaults of Options.
const (
	DefaultNamespace        = "kube-system"
	DefaultControllersGroup = "karpless:controllers"
)

// WatcherGroup is the Kubernetes group the watcher function's access
// entry maps to (read-only); its requests share the controllers'
// FlowSchemas.
const WatcherGroup = "karpless:watcher"

// CreatedLabel marks a CRD the bootstrap created, as opposed to one it
// found (Karpenter's, installed by its Helm chart, or another tool's) and
// applied over. A stack deleted with RemoveUserObjectsOnDelete deletes
// only CRDs that carry it: deleting a CRD deletes every object of its
// kind, and one Karpless did not create is not Karpless's to delete.
const (
	CreatedLabel = "karpless.dev/created-by"
	CreatedValue = "bootstrap"
)

func ownedLabels() map[string]string { return map[string]string{ManagedByLabel: ManagedByValue} }

func isOwned(m metav1.Object) bool { return m.GetLabels()[ManagedByLabel] == ManagedByValue }

// Options say what to install or remove.
type Options struct {
	// ClusterName fills the discovery selectors of the default
	// EC2NodeClass; required with DefaultNodePool.
	ClusterName string
	// Namespace holds the controllers' leases, state ConfigMaps and the
	// Events about cluster-scoped objects; DefaultNamespace when empty. A
	// namespace other than kube-system and default is created if absent.
	Namespace string
	// ControllersGroup is the Kubernetes group the controller functions'
	// access entries map to; DefaultControllersGroup when empty.
	ControllersGroup string
	// DefaultNodePool installs the NodePool and EC2NodeClass "default"
	// unless objects of that name exist.
	DefaultNodePool bool
	// NodeRoleName is the default EC2NodeClass's spec.role; required with
	// DefaultNodePool.
	NodeRoleName string
	// RemoveUserObjects makes Uninstall also delete every NodePool,
	// NodeClaim and EC2NodeClass and the CRDs.
	RemoveUserObjects bool
	// Pause turns the pause switch on (cdk deploy -c paused=true).
	// Otherwise Install creates the switch, not paused, only when it is
	// absent, and leaves it as it is: a deploy never resumes what a person
	// paused, nor pauses what a person resumed.
	Pause bool
	// Shadow (cdk deploy -c mode=shadow): Karpless runs beside Karpenter,
	// whose CRDs these are; Install checks they are served and applies
	// none, and no default NodePool or removal of user objects is allowed.
	Shadow bool
	// CRDs to apply; nil means the embedded ones (crds.All).
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Log receives one line per step; nil discards.
	Log *slog.Logger
}

var (
	clusterNameRE = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$`)
	roleNameRE    = regexp.MustCompile(`^[\w+=,.@-]{1,64}$`)
)

func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.ControllersGroup == "" {
		o.ControllersGroup = DefaultControllersGroup
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Validate reports every problem of the options (after defaults) at once.
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	if o.ClusterName != "" && !clusterNameRE.MatchString(o.ClusterName) {
		errs = append(errs, fmt.Errorf("cluster name %q is not a valid EKS cluster name", o.ClusterName))
	}
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q: %s", o.Namespace, strings.Join(msgs, "; ")))
	}
	g := o.ControllersGroup
	switch {
	case strings.TrimSpace(g) != g || strings.ContainsAny(g, " \t\n"):
		errs = append(errs, fmt.Errorf("controllers group %q contains whitespace", g))
	case strings.HasPrefix(g, "system:"):
		// system:authenticated, system:masters, system:nodes ...: binding
		// the controllers' grants to a built-in group would hand them to
		// users who are not Karpless.
		errs = append(errs, fmt.Errorf("controllers group %q is reserved (system: prefix)", g))
	}
	if o.Shadow && (o.DefaultNodePool || o.RemoveUserObjects) {
		errs = append(errs, errors.New("shadow mode installs no default NodePool and removes no user object: they are Karpenter's"))
	}
	if o.DefaultNodePool {
		if o.ClusterName == "" {
			errs = append(errs, errors.New("the default NodePool needs the cluster name (its EC2NodeClass selects subnets and security groups by karpenter.sh/discovery=<cluster>)"))
		}
		if o.NodeRoleName == "" {
			errs = append(errs, errors.New("the default NodePool needs the node role name (its EC2NodeClass's spec.role)"))
		} else if !roleNameRE.MatchString(o.NodeRoleName) {
			errs = append(errs, fmt.Errorf("node role name %q is not an IAM role name (not an ARN: 1-64 of letters, digits and +=,.@_-)", o.NodeRoleName))
		}
	}
	return errors.Join(errs...)
}

// Result lists what a run did, as "Kind/name" or "Kind/namespace/name".
type Result struct {
	// Applied were server-side applied (unchanged ones included).
	Applied []string
	// Created did not exist and were created.
	Created []string
	// Kept existed and were left exactly as they were, because someone
	// else owns them or because their owner may have edited them.
	Kept []string
	// Deleted were deleted (or their deletion was started).
	Deleted []string
	// Left are still there after Uninstall, with the reason.
	Left []string
}

func (r *Result) add(list *[]string, kind, ns, name string, why ...string) {
	s := kind + "/" + name
	if ns != "" {
		s = kind + "/" + ns + "/" + name
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, "; ") + ")"
	}
	*list = append(*list, s)
}

// step is one idempotent unit of Install or Uninstall.
type step struct {
	name string
	run  func(ctx context.Context, c *kube.Clients, o Options, r *Result) error
}

// Install first refuses, changing nothing, a cluster whose CRDs still
// store a version Karpless's CRDs lack (StoredVersionsError). Then it
// applies the CRDs (server-side, field manager karpless, forced),
// creates the namespace if needed, applies the controllers' RBAC and
// FlowSchemas, creates the state ConfigMaps and the pause switch and, when
// asked, the default EC2NodeClass and NodePool, each only if absent. Running it again changes nothing; running
// it after a run that died half-way finishes that run.
func Install(ctx context.Context, c *kube.Clients, o Options) (Result, error) {
	return run(ctx, c, o, installSteps(o.withDefaults()), nil)
}

// Uninstall removes what Install created: the default NodePool and
// EC2NodeClass (if still labelled as Karpless's), the state ConfigMaps, the
// RBAC, and a namespace Install created. With RemoveUserObjects it also
// deletes every NodePool, NodeClaim and EC2NodeClass and the CRDs;
// otherwise the CRDs stay, since deleting a CRD deletes all its objects.
// Deletions are started, not waited for.
func Uninstall(ctx context.Context, c *kube.Clients, o Options) (Result, error) {
	return run(ctx, c, o, uninstallSteps(o.withDefaults()), nil)
}

// run executes steps in order; after, if set, runs after each step and may
// stop the run (tests use it to kill a run half-way).
func run(ctx context.Context, c *kube.Clients, o Options, steps []step, after func(step string) error) (Result, error) {
	o = o.withDefaults()
	var r Result
	if err := o.Validate(); err != nil {
		return r, err
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.run(ctx, c, o, &r); err != nil {
			return r, fmt.Errorf("%s: %w", s.name, err)
		}
		o.Log.Debug("bootstrap step done", "step", s.name, "duration", time.Since(start).String())
		if after != nil {
			if err := after(s.name); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

func installSteps(o Options) []step {
	steps := []step{
		{"check stored versions", checkStoredVersions}, // changes nothing: before any step that does
		{"apply CRDs", applyCRDs},
		{"create namespace", createNamespace},
		{"apply ClusterRole", func(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
			_, err := c.Core.RbacV1().ClusterRoles().Apply(ctx, clusterRole(), applyOptions())
			if err == nil {
				r.add(&r.Applied, "ClusterRole", "", ClusterRoleName)
			}
			return err
		}},
		{"apply ClusterRoleBinding", func(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
			_, err := c.Core.RbacV1().ClusterRoleBindings().Apply(ctx, clusterRoleBinding(o.ControllersGroup), applyOptions())
			if err == nil {
				r.add(&r.Applied, "ClusterRoleBinding", "", ClusterRoleName)
			}
			return err
		}},
		{"apply Role", func(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
			_, err := c.Core.RbacV1().Roles(o.Namespace).Apply(ctx, role(o.Namespace), applyOptions())
			if err == nil {
				r.add(&r.Applied, "Role", o.Namespace, RoleName)
			}
			return err
		}},
		{"apply RoleBinding", func(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
			_, err := c.Core.RbacV1().RoleBindings(o.Namespace).Apply(ctx, roleBinding(o.Namespace, o.ControllersGroup), applyOptions())
			if err == nil {
				r.add(&r.Applied, "RoleBinding", o.Namespace, RoleName)
			}
			return err
		}},
		{"apply the watcher's RBAC", applyWatcherRBAC},
		{"apply FlowSchemas", applyFlowSchemas},
		{"create state ConfigMaps", createConfigMaps},
		{"pause switch", pauseSwitch},
		{"prune RBAC of a former namespace", pruneOtherNamespaces},
	}
	if o.Shadow {
		// Beside Karpenter: its CRDs stay exactly as its install left
		// them; they only need to be there.
		for i := range steps {
			if steps[i].name == "apply CRDs" {
				steps[i] = step{"check Karpenter's CRDs are served", checkCRDsServed}
			}
		}
	}
	if o.DefaultNodePool {
		steps = append(steps,
			step{"create default EC2NodeClass", createDefaultNodeClass},
			step{"create default NodePool", createDefaultNodePool})
	}
	return steps
}

func uninstallSteps(o Options) []step {
	steps := []step{{"delete default NodePool and EC2NodeClass", deleteDefaults}}
	if o.RemoveUserObjects {
		steps = append(steps,
			step{"delete all NodePools, NodeClaims and EC2NodeClasses", deleteUserObjects},
			step{"delete CRDs", deleteCRDs})
	} else {
		steps = append(steps, step{"keep CRDs", func(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
			all, err := crdsOf(o)
			for _, crd := range all {
				r.add(&r.Left, "CustomResourceDefinition", "", crd.Name, "kept: deleting it would delete every object of its kind")
			}
			return err
		}})
	}
	return append(steps,
		step{"delete state ConfigMaps", deleteConfigMaps},
		step{"delete FlowSchemas", deleteFlowSchemas},
		step{"delete RBAC", deleteRBAC},
		step{"delete namespace", deleteNamespace})
}

func applyOptions() metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: kube.FieldManager, Force: true}
}

func crdsOf(o Options) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if o.CRDs != nil {
		return o.CRDs, nil
	}
	return crds.All()
}

func applyCRDs(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	all, err := crdsOf(o)
	if err != nil {
		return err
	}
	api := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions()
	labelled := make([]*apiextensionsv1.CustomResourceDefinition, len(all))
	for i, crd := range all {
		cp := crd.DeepCopy()
		if cp.Labels == nil {
			cp.Labels = map[string]string{}
		}
		cp.Labels[ManagedByLabel] = ManagedByValue
		if cp.Spec.Conversion == nil {
			// Owned explicitly, so that applying it replaces the
			// conversion webhook an older Karpenter chart set.
			cp.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
		}
		got, err := api.Get(ctx, cp.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			cp.Labels[CreatedLabel] = CreatedValue
		case err != nil:
			return err
		case got.Labels[CreatedLabel] == CreatedValue:
			// Created by an earlier run: applied again, or server-side
			// apply would drop the label this field manager set.
			cp.Labels[CreatedLabel] = CreatedValue
		}
		if err == nil {
			if err := dropConversionWebhook(ctx, api, got, cp); err != nil {
				return err
			}
		}
		labelled[i] = cp
	}
	if err := kube.ApplyCRDs(ctx, c.APIExtensions, labelled); err != nil {
		return err
	}
	for _, crd := range labelled {
		if crd.Labels[CreatedLabel] == CreatedValue {
			r.add(&r.Applied, "CustomResourceDefinition", "", crd.Name)
		} else {
			r.add(&r.Applied, "CustomResourceDefinition", "", crd.Name, "found installed: applied over, never deleted by Karpless")
		}
	}
	return nil
}

// checkCRDsServed checks that every CRD Karpless reads exists and is
// established (shadow mode, where they are Karpenter's).
func checkCRDsServed(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	all, err := crdsOf(o)
	if err != nil {
		return err
	}
	api := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions()
	var missing []string
	for _, want := range all {
		got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, want.Name)
			continue
		case err != nil:
			return err
		}
		established := false
		for _, cond := range got.Status.Conditions {
			established = established || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
		}
		if !established {
			missing = append(missing, want.Name+" (not established)")
			continue
		}
		r.add(&r.Kept, "CustomResourceDefinition", "", want.Name, "shadow mode: Karpenter's")
	}
	if len(missing) > 0 {
		return fmt.Errorf("shadow mode runs beside Karpenter, whose CRDs it reads; not served: %s (install Karpenter first, or deploy without -c mode=shadow)", strings.Join(missing, ", "))
	}
	return nil
}

// dropConversionWebhook clears a conversion webhook the installed CRD has
// and want has not (Karpenter's v1.0 chart converted v1beta1 through its
// own service, which is gone once the chart is uninstalled). Applying
// strategy None alone cannot do it: the webhook settings belong to the
// chart's field manager, and None with a webhook left is invalid.
func dropConversionWebhook(ctx context.Context, api crdClient, got, want *apiextensionsv1.CustomResourceDefinition) error {
	if want.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		return nil
	}
	if got.Spec.Conversion == nil || got.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		return nil
	}
	patch := []byte(`{"spec":{"conversion":{"strategy":"None","webhook":null}}}`)
	if _, err := api.Patch(ctx, want.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: kube.FieldManager}); err != nil {
		return fmt.Errorf("removing the conversion webhook of CRD %s: %w", want.Name, err)
	}
	return nil
}

type crdClient interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*apiextensionsv1.CustomResourceDefinition, error)
}

// managesNamespace: kube-system and default always exist and are never
// created or deleted by Karpless.
func managesNamespace(ns string) bool {
	return ns != metav1.NamespaceSystem && ns != metav1.NamespaceDefault
}

func createNamespace(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	if !managesNamespace(o.Namespace) {
		return nil
	}
	nss := c.Core.CoreV1().Namespaces()
	got, err := nss.Get(ctx, o.Namespace, metav1.GetOptions{})
	switch {
	case err == nil:
		if !isOwned(got) {
			r.add(&r.Kept, "Namespace", "", o.Namespace, "exists, not created by Karpless")
		}
		return nil
	case !apierrors.IsNotFound(err):
		return err
	}
	_, err = nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace, Labels: ownedLabels()}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		r.add(&r.Created, "Namespace", "", o.Namespace)
	}
	return err
}

// createConfigMaps creates the functions' state ConfigMaps and, on a
// shadow stack, their decision stores, empty and only when absent.
func createConfigMaps(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	cms := c.Core.CoreV1().ConfigMaps(o.Namespace)
	names := StateConfigMaps()
	if o.Shadow {
		names = append(names, ShadowStores()...)
	}
	for _, name := range names {
		labels := ownedLabels()
		if slices.Contains(ShadowStores(), name) {
			labels[ShadowStoreLabel] = "true"
		}
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: labels}}, metav1.CreateOptions{})
		switch {
		case err == nil:
			r.add(&r.Created, "ConfigMap", o.Namespace, name)
		case !apierrors.IsAlreadyExists(err):
			return err
		}
	}
	return nil
}

// pauseSwitch creates the pause switch when absent (not paused) and turns
// it on when asked; an existing switch is otherwise left as it is.
func pauseSwitch(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	cms := c.Core.CoreV1()
	if o.Pause {
		before, err := pause.Set(ctx, cms, o.Namespace, pause.Change{Paused: true, By: "cdk deploy -c paused=true"}, ownedLabels())
		if err != nil {
			return err
		}
		if !before.Exists {
			r.add(&r.Created, "ConfigMap", o.Namespace, PauseConfigMap, "paused")
		} else {
			r.add(&r.Applied, "ConfigMap", o.Namespace, PauseConfigMap, "paused; was "+before.String())
		}
		o.Log.Info("paused Karpless (paused=true)", "was", before.String())
		return nil
	}
	created, err := pause.Ensure(ctx, cms, o.Namespace, ownedLabels())
	if err != nil {
		return err
	}
	if created {
		r.add(&r.Created, "ConfigMap", o.Namespace, PauseConfigMap)
	}
	return nil
}

var ownedSelector = metav1.ListOptions{LabelSelector: labels.SelectorFromSet(ownedLabels()).String()}

// pruneOtherNamespaces deletes the Role and RoleBinding an earlier Install
// put in another namespace (the namespace option changed).
func pruneOtherNamespaces(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	return deleteNamespacedRBAC(ctx, c, r, func(ns string) bool { return ns != o.Namespace })
}

func deleteNamespacedRBAC(ctx context.Context, c *kube.Clients, r *Result, match func(ns string) bool) error {
	rbs, err := c.Core.RbacV1().RoleBindings("").List(ctx, ownedSelector)
	if err != nil {
		return err
	}
	for _, rb := range rbs.Items {
		if (rb.Name == RoleName || rb.Name == WatcherRoleName) && match(rb.Namespace) {
			if err := deleteUID(ctx, c.Core.RbacV1().RoleBindings(rb.Namespace).Delete, rb.Name, rb.UID); err != nil {
				return err
			}
			r.add(&r.Deleted, "RoleBinding", rb.Namespace, rb.Name)
		}
	}
	roles, err := c.Core.RbacV1().Roles("").List(ctx, ownedSelector)
	if err != nil {
		return err
	}
	for _, ro := range roles.Items {
		if (ro.Name == RoleName || ro.Name == WatcherRoleName) && match(ro.Namespace) {
			if err := deleteUID(ctx, c.Core.RbacV1().Roles(ro.Namespace).Delete, ro.Name, ro.UID); err != nil {
				return err
			}
			r.add(&r.Deleted, "Role", ro.Namespace, ro.Name)
		}
	}
	return nil
}

// deleteUID deletes name if it is still the object with uid; gone is done.
func deleteUID(ctx context.Context, del func(context.Context, string, metav1.DeleteOptions) error, name string, uid types.UID) error {
	err := del(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone, or replaced by a new object of the same name that this
		// run did not look at; the next run decides about that one.
		return nil
	}
	return err
}

// createServed creates a custom object, waiting while its CRD, just
// Established, is not served yet (the API server answers 404 for a short
// while). It reports whether the object was created.
func createServed(ctx context.Context, create func(context.Context) error) (bool, error) {
	created := false
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timing.CustomResourceWait, true, func(ctx context.Context) (bool, error) {
		err := create(ctx)
		switch {
		case err == nil:
			created = true
			return true, nil
		case apierrors.IsAlreadyExists(err):
			return true, nil
		case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
			last = err
			return false, nil
		}
		return false, err
	})
	if err != nil && last != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w (last: %v)", err, last)
	}
	return created, err
}

func createDefaultNodeClass(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	created, err := createServed(ctx, func(ctx context.Context) error {
		_, err := c.EC2NodeClasses.Create(ctx, DefaultEC2NodeClass(o.ClusterName, o.NodeRoleName), metav1.CreateOptions{FieldManager: kube.FieldManager})
		return err
	})
	if err != nil {
		return err
	}
	if created {
		r.add(&r.Created, "EC2NodeClass", "", DefaultName)
		return nil
	}
	got, err := c.EC2NodeClasses.Get(ctx, DefaultName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	keep(r, "EC2NodeClass", got)
	return nil
}

func createDefaultNodePool(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	created, err := createServed(ctx, func(ctx context.Context) error {
		_, err := c.NodePools.Create(ctx, DefaultNodePool(), metav1.CreateOptions{FieldManager: kube.FieldManager})
		return err
	})
	if err != nil {
		return err
	}
	if created {
		r.add(&r.Created, "NodePool", "", DefaultName)
		return nil
	}
	got, err := c.NodePools.Get(ctx, DefaultName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	keep(r, "NodePool", got)
	return nil
}

func keep(r *Result, kind string, m metav1.Object) {
	if isOwned(m) {
		r.add(&r.Kept, kind, "", m.GetName(), "created by an earlier run; not overwritten, it may have been edited")
		return
	}
	r.add(&r.Kept, kind, "", m.GetName(), "exists and is not Karpless's: left alone")
}

// deleteIfOwned deletes the named object if it carries the managed-by
// label. A missing object, or a missing kind (CRD not installed), is done.
func deleteIfOwned[T metav1.Object](ctx context.Context, get func(context.Context, string, metav1.GetOptions) (T, error),
	del func(context.Context, string, metav1.DeleteOptions) error, kind, ns, name string, r *Result) error {
	got, err := get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !isOwned(got) {
		r.add(&r.Left, kind, ns, name, "not Karpless's (no "+ManagedByLabel+"="+ManagedByValue+" label)")
		return nil
	}
	if got.GetDeletionTimestamp() == nil {
		if err := deleteUID(ctx, del, name, got.GetUID()); err != nil {
			return err
		}
	}
	if fs := got.GetFinalizers(); len(fs) > 0 {
		r.add(&r.Deleted, kind, ns, name, "waits for finalizers "+strings.Join(fs, ", "))
	} else {
		r.add(&r.Deleted, kind, ns, name)
	}
	return nil
}

func deleteDefaults(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	if err := deleteIfOwned(ctx, c.NodePools.Get, c.NodePools.Delete, "NodePool", "", DefaultName, r); err != nil {
		return err
	}
	return deleteIfOwned(ctx, c.EC2NodeClasses.Get, c.EC2NodeClasses.Delete, "EC2NodeClass", "", DefaultName, r)
}

// deleteUserObjects deletes every NodePool (so nothing new is launched),
// NodeClaim and EC2NodeClass. Finalizers are left to the controllers:
// removing them would leak the instances and instance profiles behind.
func deleteUserObjects(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	kinds := []struct {
		name string
		del  func(context.Context, metav1.DeleteOptions, metav1.ListOptions) error
		list func(context.Context) ([]metav1.Object, error)
	}{
		{"NodePool", c.NodePools.DeleteCollection, func(ctx context.Context) ([]metav1.Object, error) {
			l, err := c.NodePools.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return metas(l.Items), nil
		}},
		{"NodeClaim", c.NodeClaims.DeleteCollection, func(ctx context.Context) ([]metav1.Object, error) {
			l, err := c.NodeClaims.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return metas(l.Items), nil
		}},
		{"EC2NodeClass", c.EC2NodeClasses.DeleteCollection, func(ctx context.Context) ([]metav1.Object, error) {
			l, err := c.EC2NodeClasses.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return metas(l.Items), nil
		}},
	}
	for _, k := range kinds {
		if err := k.del(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				continue // CRD not installed
			}
			return fmt.Errorf("deleting all %ss: %w", k.name, err)
		}
		r.add(&r.Deleted, k.name, "", "*")
		left, err := k.list(ctx)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		for _, m := range left {
			r.add(&r.Left, k.name, "", m.GetName(), "terminating, waits for finalizers "+strings.Join(m.GetFinalizers(), ", "))
		}
	}
	return nil
}

func metas[T any, PT interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}

// deleteCRDs deletes the CRDs the bootstrap created (CreatedLabel); the
// others, Karpenter's among them, stay with every object of their kinds.
func deleteCRDs(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	all, err := crdsOf(o)
	if err != nil {
		return err
	}
	api := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range all {
		got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if got.Labels[CreatedLabel] != CreatedValue {
			r.add(&r.Left, "CustomResourceDefinition", "", crd.Name, "not created by Karpless (no "+CreatedLabel+"="+CreatedValue+" label): kept with its objects")
			continue
		}
		if got.DeletionTimestamp == nil {
			if err := deleteUID(ctx, api.Delete, crd.Name, got.UID); err != nil {
				return err
			}
		}
		r.add(&r.Deleted, "CustomResourceDefinition", "", crd.Name)
	}
	return nil
}

func deleteConfigMaps(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	cms := c.Core.CoreV1().ConfigMaps(o.Namespace)
	for _, name := range append(append(StateConfigMaps(), ShadowStores()...), PauseConfigMap) {
		if err := deleteIfOwned(ctx, cms.Get, cms.Delete, "ConfigMap", o.Namespace, name, r); err != nil {
			return err
		}
	}
	return nil
}

func deleteRBAC(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	if err := deleteNamespacedRBAC(ctx, c, r, func(string) bool { return true }); err != nil {
		return err
	}
	if err := deleteWatcherRBAC(ctx, c, o, r); err != nil {
		return err
	}
	crbs := c.Core.RbacV1().ClusterRoleBindings()
	if err := deleteIfOwned(ctx, crbs.Get, crbs.Delete, "ClusterRoleBinding", "", ClusterRoleName, r); err != nil {
		return err
	}
	crs := c.Core.RbacV1().ClusterRoles()
	return deleteIfOwned(ctx, crs.Get, crs.Delete, "ClusterRole", "", ClusterRoleName, r)
}

func deleteNamespace(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	if !managesNamespace(o.Namespace) {
		return nil
	}
	nss := c.Core.CoreV1().Namespaces()
	return deleteIfOwned(ctx, nss.Get, nss.Delete, "Namespace", "", o.Namespace, r)
}
