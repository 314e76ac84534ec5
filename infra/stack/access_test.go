package stack

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

func TestAccessEntries(t *testing.T) {
	for _, name := range []string{Provisioner, Disruption, Interruption} {
		role := logicalID(st, st.Roles[name])
		check(t, name+" access entry", func() {
			tmpl.HasResourceProperties(jsii.String("AWS::EKS::AccessEntry"), &map[string]interface{}{
				"ClusterName":      testCluster,
				"PrincipalArn":     getAtt(role, "Arn"),
				"Type":             "STANDARD",
				"Username":         "karpless:" + name,
				"KubernetesGroups": []interface{}{"karpless:controllers"},
				// No access policy: the RBAC the bootstrap installs for
				// the group grants what the controllers need.
				"AccessPolicies": assertions.Match_Absent(),
			})
		})
	}
	check(t, "bootstrap access entry and its cluster-admin association", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::EKS::AccessEntry"), &map[string]interface{}{
			"ClusterName":      testCluster,
			"PrincipalArn":     getAtt(logicalID(st, st.Roles[Bootstrap]), "Arn"),
			"Type":             "STANDARD",
			"KubernetesGroups": assertions.Match_Absent(),
			"AccessPolicies": []interface{}{map[string]interface{}{
				"PolicyArn":   map[string]interface{}{"Fn::Sub": "arn:${AWS::Partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"},
				"AccessScope": map[string]interface{}{"Type": "cluster"},
			}},
		})
	})
	check(t, "only the bootstrap has an access policy", func() {
		tmpl.ResourcePropertiesCountIs(jsii.String("AWS::EKS::AccessEntry"), &map[string]interface{}{
			"AccessPolicies": assertions.Match_AnyValue(),
		}, jsii.Number(1))
	})
	check(t, "node role EC2_LINUX entry", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::EKS::AccessEntry"), &map[string]interface{}{
			"ClusterName":      testCluster,
			"PrincipalArn":     getAtt(logicalID(st, st.NodeRole), "Arn"),
			"Type":             "EC2_LINUX",
			"KubernetesGroups": assertions.Match_Absent(),
			"AccessPolicies":   assertions.Match_Absent(),
		})
	})
	check(t, "watcher access entry: its own read-only group", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::EKS::AccessEntry"), &map[string]interface{}{
			"ClusterName":      testCluster,
			"PrincipalArn":     getAtt(logicalID(st, st.Roles[Watcher]), "Arn"),
			"Type":             "STANDARD",
			"Username":         "karpless:watcher",
			"KubernetesGroups": []interface{}{"karpless:watcher"},
			"AccessPolicies":   assertions.Match_Absent(),
		})
	})
	check(t, "6 entries", func() { tmpl.ResourceCountIs(jsii.String("AWS::EKS::AccessEntry"), jsii.Number(6)) })
}
