package bootstrap

import (
	"context"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	flowcontrolv1ac "k8s.io/client-go/applyconfigurations/flowcontrol/v1"

	"github.com/karpless/karpless/shared/kube"
)

// API Priority and Fairness for the functions' requests.
//
// The functions reach the API server as users of their own, in the
// controllers' group (the EKS access entries map their roles to it), and
// the watcher in WatcherGroup. No built-in FlowSchema matches those
// users, so without these their requests would fall into global-default,
// the level people's kubectl and every other unmatched client share: a
// busy team could throttle Karpless, and a large Karpless pass could
// throttle them.
//
// This mirrors what Karpenter v1.14.1 does. Its chart ships no FlowSchema:
// installed in kube-system, its controller matches the built-in
// system-leader-election (leases at the leader-election level) and
// kube-system-service-accounts (everything else at workload-high); for
// any other namespace its documentation
// (getting-started-with-karpenter, "Preventing APIServer Request
// Throttling") gives two FlowSchemas, karpenter-leader-election
// (leases get/create/update, precedence 200, leader-election) and
// karpenter-workload (everything, precedence 1000, workload-high), both
// distinguished by user. Karpless installs those two for its groups.
//
// No PriorityLevelConfiguration of Karpless's own: leader-election and
// workload-high are the suggested levels every API server keeps (it
// recreates them if deleted), sized for controllers; a new level would take
// its seats from every other level (seats are shared out by nominal
// concurrency shares), and its size would have to be tuned per cluster.
// workload-high is where Karpenter's own controller runs.
const (
	LeaderElectionFlowSchema = "karpless-leader-election"
	WorkloadFlowSchema       = "karpless-workload"

	// The suggested priority levels of every API server, Karpenter's.
	LeaderElectionPriorityLevel = "leader-election"
	WorkloadPriorityLevel       = "workload-high"

	// Karpenter's precedences: its leases schema before its catch-all,
	// and both before the built-in service-accounts (9000) and
	// global-default (9900); after the built-in system schemas (exempt
	// 1, system-leader-election 100, ...), which match only system users.
	leaderElectionPrecedence = 200
	workloadPrecedence       = 1000
)

// FlowSchemas are the names of the FlowSchemas the bootstrap installs.
func FlowSchemas() []string { return []string{LeaderElectionFlowSchema, WorkloadFlowSchema} }

// flowSchemas are the two FlowSchemas, for the controllers' group and the
// watcher's.
func flowSchemas(o Options) []*flowcontrolv1ac.FlowSchemaApplyConfiguration {
	subjects := func() []*flowcontrolv1ac.SubjectApplyConfiguration {
		var out []*flowcontrolv1ac.SubjectApplyConfiguration
		for _, g := range []string{o.ControllersGroup, WatcherGroup} {
			out = append(out, flowcontrolv1ac.Subject().WithKind(flowcontrolv1.SubjectKindGroup).
				WithGroup(flowcontrolv1ac.GroupSubject().WithName(g)))
		}
		return out
	}
	byUser := flowcontrolv1ac.FlowDistinguisherMethod().WithType(flowcontrolv1.FlowDistinguisherMethodByUserType)
	leases := flowcontrolv1ac.FlowSchema(LeaderElectionFlowSchema).WithLabels(ownedLabels()).WithSpec(
		flowcontrolv1ac.FlowSchemaSpec().
			WithPriorityLevelConfiguration(flowcontrolv1ac.PriorityLevelConfigurationReference().WithName(LeaderElectionPriorityLevel)).
			WithMatchingPrecedence(leaderElectionPrecedence).
			WithDistinguisherMethod(byUser).
			WithRules(flowcontrolv1ac.PolicyRulesWithSubjects().
				WithSubjects(subjects()...).
				WithResourceRules(flowcontrolv1ac.ResourcePolicyRule().
					WithAPIGroups("coordination.k8s.io").WithResources("leases").
					WithVerbs("get", "create", "update").WithNamespaces(o.Namespace))))
	workload := flowcontrolv1ac.FlowSchema(WorkloadFlowSchema).WithLabels(ownedLabels()).WithSpec(
		flowcontrolv1ac.FlowSchemaSpec().
			WithPriorityLevelConfiguration(flowcontrolv1ac.PriorityLevelConfigurationReference().WithName(WorkloadPriorityLevel)).
			WithMatchingPrecedence(workloadPrecedence).
			WithDistinguisherMethod(byUser).
			WithRules(flowcontrolv1ac.PolicyRulesWithSubjects().
				WithSubjects(subjects()...).
				WithResourceRules(flowcontrolv1ac.ResourcePolicyRule().
					WithAPIGroups(flowcontrolv1.APIGroupAll).WithResources(flowcontrolv1.ResourceAll).
					WithVerbs(flowcontrolv1.VerbAll).WithClusterScope(true).WithNamespaces(flowcontrolv1.NamespaceEvery)).
				WithNonResourceRules(flowcontrolv1ac.NonResourcePolicyRule().
					WithNonResourceURLs(flowcontrolv1.NonResourceAll).WithVerbs(flowcontrolv1.VerbAll))))
	return []*flowcontrolv1ac.FlowSchemaApplyConfiguration{leases, workload}
}

// applyFlowSchemas applies the FlowSchemas. An API server that does not
// serve flowcontrol.apiserver.k8s.io/v1 (Kubernetes before 1.29) leaves
// the functions in its defaults; the install goes on.
func applyFlowSchemas(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	api := c.Core.FlowcontrolV1().FlowSchemas()
	for _, fs := range flowSchemas(o) {
		_, err := api.Apply(ctx, fs, applyOptions())
		switch {
		case err == nil:
			r.add(&r.Applied, "FlowSchema", "", *fs.Name)
		case apierrors.IsNotFound(err):
			r.add(&r.Kept, "FlowSchema", "", *fs.Name, "not installed: the API server does not serve flowcontrol.apiserver.k8s.io/v1 (Kubernetes 1.29 or later)")
			o.Log.Warn("FlowSchemas not installed: the API server does not serve flowcontrol.apiserver.k8s.io/v1; the functions' requests stay in its default levels", "error", err)
			return nil
		default:
			return err
		}
	}
	return nil
}

func deleteFlowSchemas(ctx context.Context, c *kube.Clients, o Options, r *Result) error {
	api := c.Core.FlowcontrolV1().FlowSchemas()
	for _, name := range FlowSchemas() {
		err := deleteIfOwned(ctx, api.Get, api.Delete, "FlowSchema", "", name, r)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
