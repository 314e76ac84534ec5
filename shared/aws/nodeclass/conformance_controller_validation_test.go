package nodeclass

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/kube/eksauth"
)

// Karpenter v1.14.1's validation status controller
// (pkg/controllers/nodeclass/validation_test.go) through Resolve, whose
// ValidationSucceeded condition is its outcome. The cluster CIDR and user
// data cases are ported beside launchtemplate.Validate, the hook that
// renders the user data.

const (
	differsDryRun = "Karpless makes no dry-run launch when it resolves an EC2NodeClass (it does not call ec2:CreateLaunchTemplate, ec2:CreateFleet or ec2:RunInstances with DryRun; its own CDK stack grants its role these calls): a denial by an SCP or a permissions boundary shows when a launch fails, as the NodeClaim's Launched=False condition (reason LaunchFailed) with AWS's error, not as ValidationSucceeded=False with reason %s; pods wait either way"
	differsProbe  = "Karpless makes no dry-run launch when it resolves an EC2NodeClass, so it chooses no instance type, image or tenancy to validate with; the first real launch uses the NodePool's own instance types and tenancy, as Karpenter's launches do"
)

func TestConformanceNodeClassValidation(t *testing.T) {
	run := func(spec, differs string, body func(t *testing.T)) {
		c := ctrlCase("validation_test.go", "NodeClass Validation Status Controller > "+spec)
		c.Differs = differs
		conformance.Run(t, c, body)
	}
	validation := func(t *testing.T, nc *awsv1.EC2NodeClass, want metav1.ConditionStatus, reason string) {
		t.Helper()
		if c := expectCond(t, nc, awsv1.ConditionTypeValidationSucceeded, want); reason != "" && c.Reason != reason {
			t.Errorf("ValidationSucceeded reason %q, want %q", c.Reason, reason)
		}
	}
	// Preconditions: each dependency False (what it selects does not
	// exist), then each Unknown (its first resolution failed transiently).
	falseInputs := map[string]func(e *ctrlEnv, nc *awsv1.EC2NodeClass){
		awsv1.ConditionTypeAMIsReady: func(_ *ctrlEnv, nc *awsv1.EC2NodeClass) {
			nc.Spec.AMIFamily = aws.String("Custom")
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"foo": "nothing"}}}
		},
		awsv1.ConditionTypeInstanceProfileReady: func(_ *ctrlEnv, nc *awsv1.EC2NodeClass) { nc.Spec.Role = "NoSuchRole" },
		awsv1.ConditionTypeSecurityGroupsReady: func(_ *ctrlEnv, nc *awsv1.EC2NodeClass) {
			nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"foo": "invalid"}}}
		},
		awsv1.ConditionTypeSubnetsReady: func(_ *ctrlEnv, nc *awsv1.EC2NodeClass) {
			nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"foo": "invalid"}}}
		},
	}
	unknownInputs := map[string]func(e *ctrlEnv, nc *awsv1.EC2NodeClass){
		awsv1.ConditionTypeAMIsReady:            func(e *ctrlEnv, _ *awsv1.EC2NodeClass) { e.ssm.err = apiErr("ThrottlingException") },
		awsv1.ConditionTypeInstanceProfileReady: func(e *ctrlEnv, _ *awsv1.EC2NodeClass) { e.iam.getErr = apiErr("Throttling") },
		awsv1.ConditionTypeSecurityGroupsReady: func(e *ctrlEnv, _ *awsv1.EC2NodeClass) {
			e.ec2.opErr = map[string]error{"DescribeSecurityGroups": apiErr("RequestLimitExceeded")}
		},
		awsv1.ConditionTypeSubnetsReady: func(e *ctrlEnv, _ *awsv1.EC2NodeClass) {
			e.ec2.opErr = map[string]error{"DescribeSubnets": apiErr("RequestLimitExceeded")}
		},
	}
	deps := []string{awsv1.ConditionTypeAMIsReady, awsv1.ConditionTypeInstanceProfileReady, awsv1.ConditionTypeSecurityGroupsReady, awsv1.ConditionTypeSubnetsReady}
	for _, dep := range deps {
		run("Preconditions > should set validated status condition to false when any required condition is false > "+dep, "", func(t *testing.T) {
			e, nc := newCtrlEnv(), statusClass()
			falseInputs[dep](e, nc)
			e.mustReconcile(t, nc)
			expectCond(t, nc, dep, metav1.ConditionFalse)
			validation(t, nc, metav1.ConditionFalse, ReasonDependenciesNotReady)
		})
	}
	for _, dep := range deps {
		run("Preconditions > should set validated status condition to unknown when no required condition is false and any are unknown > "+dep, "", func(t *testing.T) {
			e, nc := newCtrlEnv(), statusClass()
			unknownInputs[dep](e, nc)
			_ = e.reconcile(nc) // the transient failure is reported
			if c := cond(nc.Status, dep); c.Status == metav1.ConditionTrue || c.Status == metav1.ConditionFalse {
				t.Fatalf("%s = %s, want unresolved", dep, c.Status)
			}
			validation(t, nc, metav1.ConditionUnknown, ReasonDependenciesNotReady)
		})
	}

	for _, tc := range []struct{ entry, key, value string }{
		{"kubernetes.io/cluster*", "kubernetes.io/cluster/acluster", "owned"},
		{"karpenter.sh/nodepool", "karpenter.sh/nodepool", "testnodepool"},
		{"eks:eks-cluster-name", "eks:eks-cluster-name", "acluster"},
		{"karpenter.k8s.aws/ec2nodeclass", "karpenter.k8s.aws/ec2nodeclass", "testnodeclass"},
		{"karpenter.sh/nodeclaim", "karpenter.sh/nodeclaim", "testnodeclaim"},
	} {
		run("Tag Validation > should update status condition on nodeClass as NotReady when tag validation fails > "+tc.entry, "", func(t *testing.T) {
			e, nc := newCtrlEnv(), customClass()
			nc.Spec.Tags = map[string]string{tc.key: tc.value}
			e.mustReconcile(t, nc)
			validation(t, nc, metav1.ConditionFalse, "TagValidationFailed")
			if c := expectCond(t, nc, awsv1.ConditionTypeReady, metav1.ConditionFalse); c.Message != "ValidationSucceeded=False" {
				t.Errorf("Ready's message %q", c.Message)
			}
		})
	}
	run("Tag Validation > should update status condition as Ready when tags are valid", "", func(t *testing.T) {
		e, nc := newCtrlEnv(), customClass()
		nc.Spec.Tags = map[string]string{}
		e.mustReconcile(t, nc)
		validation(t, nc, metav1.ConditionTrue, "")
		expectCond(t, nc, awsv1.ConditionTypeReady, metav1.ConditionTrue)
	})

	for _, tc := range []struct{ entry, reason string }{
		{"should update status condition as NotReady when CreateFleet unauthorized", "CreateFleetAuthCheckFailed"},
		{"should update status condition as NotReady when RunInstances unauthorized", "RunInstancesAuthCheckFailed"},
		{"should update status condition as NotReady when CreateLaunchTemplate unauthorized", "CreateLaunchTemplateAuthCheckFailed"},
		{"should include permission boundary detail in condition message when denied by permission boundary", "CreateFleetAuthCheckFailed"},
		{"should include service control policy detail in condition message when denied by service control policy", "RunInstancesAuthCheckFailed"},
	} {
		run("Authorization Validation > NodeClass validation failure conditions > "+tc.entry, fmt.Sprintf(differsDryRun, tc.reason), func(*testing.T) {})
	}
	run("Authorization Validation > should succeed RunInstances validation when first subnet returns 500 but another subnet succeeds", "", func(t *testing.T) {
		// Karpless makes no RunInstances call to validate, so no server
		// error of one can fail validation.
		e, nc := newCtrlEnv(), statusClass()
		e.mustReconcile(t, nc)
		validation(t, nc, metav1.ConditionTrue, "")
	})
	for _, entry := range []string{"Windows2019 with m5.large", "Windows2022 with m5.large", "Windows2025 with m6g.large"} {
		run("Authorization Validation > Windows AMI Validation > should fallback to static instance types when windows ami is used > "+entry, differsProbe, func(*testing.T) {})
	}
	run("Authorization Validation > NodeClass Filtering > should succeed validation using fallback instance types when NodePool requirements are incompatible with NodeClass AMI", differsProbe, func(*testing.T) {})
	run("Authorization Validation > NodeClass Filtering > should succeed validation using fallback instance types with no NodePools and NodeClass network interface configs", differsProbe, func(*testing.T) {})
	run("Authorization Validation > Instance Type Prioritization Validation > should prioritize non-GPU instances", differsProbe, func(*testing.T) {})
	run("Authorization Validation > Instance Type Prioritization Validation > should fallback to GPU instances when no non-GPU instances exist", differsProbe, func(*testing.T) {})
	run("Authorization Validation > Tenancy LaunchTemplate Authorization > should validate using default tenancy if no linked nodepool exists", differsProbe, func(*testing.T) {})
	run("Authorization Validation > Tenancy LaunchTemplate Authorization > should validates using default tenancy if unspecified ", differsProbe, func(*testing.T) {})
	for _, entry := range []string{"when default specified", "when default and dedicated specified", "when dedicated specified"} {
		run("Authorization Validation > Tenancy LaunchTemplate Authorization > should validate with tenancy specified in nodepool > "+entry, differsProbe, func(*testing.T) {})
	}

	// counting is a validation hook that counts its runs.
	counting := func(e *ctrlEnv) *int {
		n := 0
		e.validate = func(context.Context, *awsv1.EC2NodeClass, awsv1.EC2NodeClassStatus, eksauth.ClusterInfo) error {
			n++
			return nil
		}
		return &n
	}
	run("should not skip validation when new annotation is added", "", func(t *testing.T) {
		e, nc := newCtrlEnv(), statusClass()
		n := counting(e)
		e.mustReconcile(t, nc)
		nc.Annotations = map[string]string{"testing": "validation"}
		e.mustReconcile(t, nc)
		if *n != 2 {
			t.Errorf("validated %d times, want 2", *n)
		}
		validation(t, nc, metav1.ConditionTrue, "")
	})
	run("should clear the validation cache when the nodeclass is deleted", "", func(t *testing.T) {
		// Karpless keeps no validation result between resolutions: a class
		// made again under the same name is validated afresh.
		e, nc := newCtrlEnv(), statusClass()
		nc.Spec.Tags = map[string]string{}
		n := counting(e)
		e.mustReconcile(t, nc)
		validation(t, nc, metav1.ConditionTrue, "")
		expectCond(t, nc, awsv1.ConditionTypeReady, metav1.ConditionTrue)
		deleteClass(t, e, nc, nil)
		again := statusClass()
		again.Spec.Tags = map[string]string{}
		e.mustReconcile(t, again)
		if *n != 2 {
			t.Errorf("validated %d times, want 2", *n)
		}
	})
	run("should pass validation when the validation controller is disabled", "", func(t *testing.T) {
		// Karpless behaves as Karpenter with DISABLE_DRY_RUN: its EC2 client
		// has no CreateFleet, RunInstances or CreateLaunchTemplate to call
		// (EC2API), so resolving makes none.
		e, nc := newCtrlEnv(), statusClass()
		e.mustReconcile(t, nc)
		validation(t, nc, metav1.ConditionTrue, "")
		expectCond(t, nc, awsv1.ConditionTypeReady, metav1.ConditionTrue)
	})
}
