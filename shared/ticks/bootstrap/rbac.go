package bootstrap

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/client-go/applyconfigurations/rbac/v1"
)

// Names of the RBAC objects the bootstrap installs. The ClusterRole and its
// binding carry the cluster-wide grants; the Role and its binding, in
// Karpless's namespace, the grants on leases and ConfigMaps, so the
// controllers cannot touch those anywhere else.
const (
	ClusterRoleName = "karpless-controllers"
	RoleName        = "karpless-controllers"
)

// ConfigMaps the controllers keep state in (the names shared/aws/unavailable and
// shared/aws/pricing use, and the disruption function's state; a test checks they
// agree). The bootstrap creates them empty, so the controllers only need
// get and update on these names and
// no create on ConfigMaps at all: create cannot be limited by name, and in
// kube-system it would let a controller create an aws-auth ConfigMap that
// maps any IAM role to system:masters.
const (
	UnavailableOfferingsConfigMap = "karpless-unavailable-offerings"
	PricingConfigMap              = "karpless-pricing"
	DisruptionStateConfigMap      = "karpless-disruption"
)

// PauseConfigMap is the pause switch (shared/kube/pause): the bootstrap
// creates it, not paused, and sets it on a deploy with -c paused=true;
// `karpless pause` and `karpless resume` set it with the user's own
// access. The controllers may only get it: a function that could write
// it could resume what a person paused.
const PauseConfigMap = "karpless-pause"

// StateConfigMaps are the ConfigMaps the bootstrap creates for the functions.
func StateConfigMaps() []string {
	return []string{UnavailableOfferingsConfigMap, PricingConfigMap, DisruptionStateConfigMap}
}

// ShadowStores are the ConfigMaps the provisioner and disruption functions
// keep their decisions in, in shadow mode (shared/function/shadow's
// StoreName; a test checks they agree). The bootstrap creates them on a
// shadow stack, labelled ShadowStoreLabel for the report to find, so the
// functions need no create on ConfigMaps there either.
func ShadowStores() []string {
	return []string{"karpless-shadow-provisioner", "karpless-shadow-disruption"}
}

// ShadowStoreLabel marks the shadow decision stores (shadow.StoreLabel).
const ShadowStoreLabel = "karpless.dev/shadow-decisions"

// The leases the controllers hold (shared/ticks/provision's and
// shared/ticks/disrupt's LeaseName; a test checks they agree).
const (
	ProvisioningLease = "karpless-provisioning"
	DisruptionLease   = "karpless-disruption"
)

// ControllerLeases are the only Leases the controllers may renew, as
// Karpenter's chart limits update and patch to its own lease.
func ControllerLeases() []string { return []string{ProvisioningLease, DisruptionLease} }

// Rule is one grant of the controllers' RBAC.
type Rule struct {
	// Group is the API group ("" for core).
	Group     string
	Resources []string
	Verbs     []string
	// Names limits the grant to these objects; empty means all.
	Names []string
	// Namespaced grants live in the Role in Karpless's namespace; the
	// others in the ClusterRole.
	Namespaced bool
}

var (
	readOnly = []string{"get", "list", "watch"}
	owned    = []string{"get", "list", "watch", "create", "patch", "update", "delete"}
	status   = []string{"patch", "update"}
)

// ControllerRules are exactly the grants the provisioner, disruption and
// interruption functions need, in the order the docs list them.
func ControllerRules() []Rule {
	return []Rule{
		{Group: "", Resources: []string{"nodes"}, Verbs: owned},
		{Group: "", Resources: []string{"nodes/status"}, Verbs: status},
		// Termination deletes a pod only once the node's termination grace
		// period has passed; before that it goes through the Eviction API.
		{Group: "", Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "delete"}},
		{Group: "", Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
		{Group: "", Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{Group: "events.k8s.io", Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{Group: "", Resources: []string{"namespaces"}, Verbs: []string{"get", "list"}},
		{Group: "", Resources: []string{"persistentvolumeclaims", "persistentvolumes"}, Verbs: readOnly},
		{Group: "karpenter.sh", Resources: []string{"nodeclaims", "nodepools"}, Verbs: owned},
		{Group: "karpenter.sh", Resources: []string{"nodeclaims/status", "nodepools/status"}, Verbs: status},
		// NodeOverlays are the user's: the provisioner only reads them and
		// writes their Ready condition.
		{Group: "karpenter.sh", Resources: []string{"nodeoverlays"}, Verbs: readOnly},
		{Group: "karpenter.sh", Resources: []string{"nodeoverlays/status"}, Verbs: status},
		{Group: "karpenter.k8s.aws", Resources: []string{"ec2nodeclasses"}, Verbs: owned},
		{Group: "karpenter.k8s.aws", Resources: []string{"ec2nodeclasses/status"}, Verbs: status},
		{Group: "apps", Resources: []string{"daemonsets"}, Verbs: readOnly},
		// CapacityBuffers are the user's: the provisioner reads them, and
		// the one object each refers to (as Karpenter does, the workload's
		// pod template and spec.replicas, not its scale subresource, which
		// has no template), and writes their status.
		{Group: "autoscaling.x-k8s.io", Resources: []string{"capacitybuffers"}, Verbs: readOnly},
		{Group: "autoscaling.x-k8s.io", Resources: []string{"capacitybuffers/status"}, Verbs: status},
		{Group: "", Resources: []string{"podtemplates"}, Verbs: []string{"get"}},
		{Group: "apps", Resources: []string{"deployments", "replicasets", "statefulsets"}, Verbs: []string{"get"}},
		{Group: "policy", Resources: []string{"poddisruptionbudgets"}, Verbs: readOnly},
		{Group: "storage.k8s.io", Resources: []string{"storageclasses", "csinodes", "volumeattachments"}, Verbs: readOnly},
		// Create cannot be limited by name (the object does not exist
		// yet); reading and renewing can.
		{Group: "coordination.k8s.io", Resources: []string{"leases"}, Verbs: []string{"create"}, Namespaced: true},
		{Group: "coordination.k8s.io", Resources: []string{"leases"}, Verbs: []string{"get", "update", "patch"},
			Names: ControllerLeases(), Namespaced: true},
		{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "update"},
			Names: append(StateConfigMaps(), ShadowStores()...), Namespaced: true},
		{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get"},
			Names: []string{PauseConfigMap}, Namespaced: true},
	}
}

func policyRules(namespaced bool) []*rbacv1.PolicyRuleApplyConfiguration {
	return rulesOf(ControllerRules(), namespaced)
}

func rulesOf(rules []Rule, namespaced bool) []*rbacv1.PolicyRuleApplyConfiguration {
	var out []*rbacv1.PolicyRuleApplyConfiguration
	for _, r := range rules {
		if r.Namespaced != namespaced {
			continue
		}
		pr := rbacv1.PolicyRule().WithAPIGroups(r.Group).WithResources(r.Resources...).WithVerbs(r.Verbs...)
		if len(r.Names) > 0 {
			pr.WithResourceNames(r.Names...)
		}
		out = append(out, pr)
	}
	return out
}

func clusterRole() *rbacv1.ClusterRoleApplyConfiguration {
	return rbacv1.ClusterRole(ClusterRoleName).WithLabels(ownedLabels()).WithRules(policyRules(false)...)
}

func clusterRoleBinding(group string) *rbacv1.ClusterRoleBindingApplyConfiguration {
	return rbacv1.ClusterRoleBinding(ClusterRoleName).WithLabels(ownedLabels()).
		WithRoleRef(rbacv1.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("ClusterRole").WithName(ClusterRoleName)).
		WithSubjects(rbacv1.Subject().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Group").WithName(group))
}

func role(ns string) *rbacv1.RoleApplyConfiguration {
	return rbacv1.Role(RoleName, ns).WithLabels(ownedLabels()).WithRules(policyRules(true)...)
}

func roleBinding(ns, group string) *rbacv1.RoleBindingApplyConfiguration {
	return rbacv1.RoleBinding(RoleName, ns).WithLabels(ownedLabels()).
		WithRoleRef(rbacv1.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Role").WithName(RoleName)).
		WithSubjects(rbacv1.Subject().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Group").WithName(group))
}

// rbacMarkdown renders ControllerRules as the table in docs/deploy.md.
func rbacMarkdown(ns string) string {
	var b strings.Builder
	b.WriteString("| API group | resources | verbs | where |\n|---|---|---|---|\n")
	for _, r := range ControllerRules() {
		group := "`" + r.Group + "`"
		if r.Group == "" {
			group = "`\"\"` (core)"
		}
		res := make([]string, len(r.Resources))
		for i, x := range r.Resources {
			res[i] = "`" + x + "`"
		}
		resources := strings.Join(res, ", ")
		if len(r.Names) > 0 {
			names := make([]string, len(r.Names))
			for i, x := range r.Names {
				names[i] = "`" + x + "`"
			}
			resources += " named " + strings.Join(names, ", ")
		}
		where := "cluster (ClusterRole)"
		if r.Namespaced {
			where = fmt.Sprintf("namespace `%s` (Role)", ns)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", group, resources, strings.Join(r.Verbs, ", "), where)
	}
	return b.String()
}
