package bootstrap

import (
	"context"

	rbacv1 "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/karpless/karpless/shared/kube"
)

// WatcherRoleName names the watcher's ClusterRole, Role and their bindings.
const WatcherRoleName = "karpless-watcher"

// WatcherRules are the watcher function's grants, read-only: it lists and
// watches unbound pods, nodes, NodePools, CapacityBuffers and the
// provisioning lease, and writes nothing (it starts the provisioner
// through Lambda, not the cluster).
func WatcherRules() []Rule {
	return []Rule{
		{Group: "", Resources: []string{"pods", "nodes"}, Verbs: readOnly},
		// An informer's list and watch only: the watcher reads no single
		// NodePool or buffer.
		{Group: "karpenter.sh", Resources: []string{"nodepools"}, Verbs: listWatch},
		{Group: "autoscaling.x-k8s.io", Resources: []string{"capacitybuffers"}, Verbs: listWatch},
		{Group: "coordination.k8s.io", Resources: []string{"leases"}, Verbs: readOnly, Names: []string{ProvisioningLease}, Namespaced: true},
	}
}

func watcherSubject() *rbacv1.SubjectApplyConfiguration {
	return rbacv1.Subject().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Group").WithName(WatcherGroup)
}

var listWatch = []string{"list", "watch"}

// applyWatcherRBAC applies the watcher's ClusterRole, Role and bindings.
func applyWatcherRBAC(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	rbac := c.Core.RbacV1()
	if _, err := rbac.ClusterRoles().Apply(ctx, rbacv1.ClusterRole(WatcherRoleName).WithLabels(ownedLabels()).
		WithRules(rulesOf(WatcherRules(), false)...), applyOptions()); err != nil {
		return err
	}
	r.add(&r.Applied, "ClusterRole", "", WatcherRoleName)
	if _, err := rbac.ClusterRoleBindings().Apply(ctx, rbacv1.ClusterRoleBinding(WatcherRoleName).WithLabels(ownedLabels()).
		WithRoleRef(rbacv1.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("ClusterRole").WithName(WatcherRoleName)).
		WithSubjects(watcherSubject()), applyOptions()); err != nil {
		return err
	}
	r.add(&r.Applied, "ClusterRoleBinding", "", WatcherRoleName)
	if _, err := rbac.Roles(o.Namespace).Apply(ctx, rbacv1.Role(WatcherRoleName, o.Namespace).WithLabels(ownedLabels()).
		WithRules(rulesOf(WatcherRules(), true)...), applyOptions()); err != nil {
		return err
	}
	r.add(&r.Applied, "Role", o.Namespace, WatcherRoleName)
	if _, err := rbac.RoleBindings(o.Namespace).Apply(ctx, rbacv1.RoleBinding(WatcherRoleName, o.Namespace).WithLabels(ownedLabels()).
		WithRoleRef(rbacv1.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Role").WithName(WatcherRoleName)).
		WithSubjects(watcherSubject()), applyOptions()); err != nil {
		return err
	}
	r.add(&r.Applied, "RoleBinding", o.Namespace, WatcherRoleName)
	return nil
}

// deleteWatcherRBAC deletes the watcher's cluster-wide grants (its Role
// and RoleBinding go with the namespaced ones).
func deleteWatcherRBAC(ctx context.Context, c *kube.Clients, _ Options, r *Result) error {
	crbs := c.Core.RbacV1().ClusterRoleBindings()
	if err := deleteIfOwned(ctx, crbs.Get, crbs.Delete, "ClusterRoleBinding", "", WatcherRoleName, r); err != nil {
		return err
	}
	crs := c.Core.RbacV1().ClusterRoles()
	return deleteIfOwned(ctx, crs.Get, crs.Delete, "ClusterRole", "", WatcherRoleName, r)
}
