package stack

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
	"github.com/karpless/karpless/functions"
)

// Each statement of the controllers' managed policies, exactly as
// synthesized, with the conditions of Karpenter's controller policy
// (website/.../getting-started-with-karpenter/cloudformation.yaml, v1.14.1).
// Lists are in CDK's rendering order (actions and resources sorted).
var wantStatements = map[string]string{
	"AllowRegionalReadActions": `{
		"Action": ["ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstanceTypeOfferings",
			"ec2:DescribeInstanceTypes", "ec2:DescribeInstances", "ec2:DescribeLaunchTemplates",
			"ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets"],
		"Condition": {"StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}},
		"Resource": "*"}`,
	"AllowSSMReadActions": `{
		"Action": "ssm:GetParameter",
		"Resource": {"Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}::parameter/aws/service/*"}}`,
	"AllowInstanceProfileReadActions": `{
		"Action": "iam:GetInstanceProfile",
		"Resource": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:instance-profile/*"}}`,
	"AllowPricingReadActions": `{
		"Action": "pricing:GetProducts",
		"Resource": "*"}`,
	"AllowAPIServerEndpointDiscovery": `{
		"Action": "eks:DescribeCluster",
		"Resource": {"Fn::Sub": "arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}:cluster/demo"}}`,
	"AllowScopedEC2InstanceAccessActions": `{
		"Action": ["ec2:CreateFleet", "ec2:RunInstances"],
		"Condition": {"StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}},
		"Resource": [
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:capacity-reservation/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:placement-group/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:security-group/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:subnet/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}::image/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}::snapshot/*"}]}`,
	"AllowScopedEC2LaunchTemplateAccessActions": `{
		"Action": ["ec2:CreateFleet", "ec2:RunInstances"],
		"Condition": {
			"StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/demo": "owned"},
			"StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
		"Resource": {"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:launch-template/*"}}`,
	"AllowScopedEC2InstanceActionsWithTags": `{
		"Action": ["ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:RunInstances"],
		"Condition": {
			"StringEquals": {"aws:RequestTag/eks:eks-cluster-name": "demo", "aws:RequestTag/kubernetes.io/cluster/demo": "owned"},
			"StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}},
		"Resource": [
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:fleet/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:instance/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:launch-template/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:network-interface/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:spot-instances-request/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:volume/*"}]}`,
	"AllowScopedResourceCreationTagging": `{
		"Action": "ec2:CreateTags",
		"Condition": {
			"StringEquals": {"aws:RequestTag/eks:eks-cluster-name": "demo", "aws:RequestTag/kubernetes.io/cluster/demo": "owned",
				"ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
			"StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}},
		"Resource": [
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:fleet/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:instance/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:launch-template/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:network-interface/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:spot-instances-request/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:volume/*"}]}`,
	"AllowScopedResourceTagging": `{
		"Action": "ec2:CreateTags",
		"Condition": {
			"ForAllValues:StringEquals": {"aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]},
			"StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/demo": "owned"},
			"StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": "demo"},
			"StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
		"Resource": {"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:instance/*"}}`,
	"AllowScopedDeletion": `{
		"Action": ["ec2:DeleteLaunchTemplate", "ec2:TerminateInstances"],
		"Condition": {
			"StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/demo": "owned"},
			"StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
		"Resource": [
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:instance/*"},
			{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:launch-template/*"}]}`,
	"AllowPassingInstanceRole": `{
		"Action": "iam:PassRole",
		"Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}},
		"Resource": {"Fn::GetAtt": ["NODEROLE", "Arn"]}}`,
	"AllowScopedInstanceProfileCreationActions": `{
		"Action": "iam:CreateInstanceProfile",
		"Condition": {
			"StringEquals": {"aws:RequestTag/eks:eks-cluster-name": "demo", "aws:RequestTag/kubernetes.io/cluster/demo": "owned",
				"aws:RequestTag/topology.kubernetes.io/region": {"Ref": "AWS::Region"}},
			"StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"}},
		"Resource": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:instance-profile/*"}}`,
	"AllowScopedInstanceProfileTagActions": `{
		"Action": "iam:TagInstanceProfile",
		"Condition": {
			"StringEquals": {"aws:RequestTag/eks:eks-cluster-name": "demo", "aws:RequestTag/kubernetes.io/cluster/demo": "owned",
				"aws:RequestTag/topology.kubernetes.io/region": {"Ref": "AWS::Region"},
				"aws:ResourceTag/kubernetes.io/cluster/demo": "owned",
				"aws:ResourceTag/topology.kubernetes.io/region": {"Ref": "AWS::Region"}},
			"StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*", "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"}},
		"Resource": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:instance-profile/*"}}`,
	"AllowScopedInstanceProfileActions": `{
		"Action": "iam:AddRoleToInstanceProfile",
		"Condition": {
			"StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/demo": "owned",
				"aws:ResourceTag/topology.kubernetes.io/region": {"Ref": "AWS::Region"}},
			"StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"}},
		"Resource": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:instance-profile/*"}}`,
	"AllowScopedInstanceProfileDeletionActions": `{
		"Action": ["iam:DeleteInstanceProfile", "iam:RemoveRoleFromInstanceProfile"],
		"Condition": {
			"StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/demo": "owned",
				"aws:ResourceTag/topology.kubernetes.io/region": {"Ref": "AWS::Region"}},
			"StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"}},
		"Resource": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:instance-profile/*"}}`,
	"AllowUnscopedInstanceProfileListAction": `{
		"Action": "iam:ListInstanceProfiles",
		"Resource": "*"}`,
}

// wantPolicyStatements: which managed policy holds which statements.
var wantPolicyStatements = map[string][]string{
	ReadPolicyID: {"AllowRegionalReadActions", "AllowSSMReadActions", "AllowInstanceProfileReadActions", "AllowPricingReadActions", "AllowAPIServerEndpointDiscovery"},
	LaunchPolicyID: {"AllowScopedEC2InstanceAccessActions", "AllowScopedEC2LaunchTemplateAccessActions",
		"AllowScopedEC2InstanceActionsWithTags", "AllowScopedResourceCreationTagging", "AllowScopedResourceTagging",
		"AllowScopedDeletion", "AllowPassingInstanceRole"},
	InstanceProfilePolicyID:   {"AllowScopedInstanceProfileCreationActions", "AllowScopedInstanceProfileTagActions", "AllowScopedInstanceProfileActions"},
	InstanceProfileGCPolicyID: {"AllowScopedInstanceProfileDeletionActions", "AllowUnscopedInstanceProfileListAction"},
}

// TestIAMStatements proves each statement and each of its conditions, one
// subtest per statement, and that each managed policy holds exactly its
// statements.
func TestIAMStatements(t *testing.T) {
	nodeRole := logicalID(st, st.NodeRole)
	for _, policyID := range sortedKeys(wantPolicyStatements) {
		sids := wantPolicyStatements[policyID]
		var all []interface{}
		for _, sid := range sids {
			sid := sid
			want := mustJSON(t, strings.ReplaceAll(wantStatements[sid], "NODEROLE", nodeRole))
			want["Sid"] = sid
			want["Effect"] = "Allow"
			all = append(all, want)
			t.Run(sid, func(t *testing.T) {
				check(t, sid, func() {
					tmpl.HasResourceProperties(jsii.String("AWS::IAM::ManagedPolicy"), &map[string]interface{}{
						"PolicyDocument": assertions.Match_ObjectLike(&map[string]interface{}{
							"Statement": assertions.Match_ArrayWith(&[]interface{}{assertions.Match_ObjectEquals(&want)}),
						}),
					})
				})
			})
		}
		t.Run(policyID, func(t *testing.T) {
			r := resources(doc)[logicalID(st, st.ManagedPolicies[policyID])]
			if r == nil {
				t.Fatalf("no managed policy %s", policyID)
			}
			got := props(r)["PolicyDocument"].(map[string]any)["Statement"]
			if jsonString(got) != jsonString(all) {
				t.Errorf("%s statements:\n got %s\nwant %s", policyID, jsonString(got), jsonString(all))
			}
		})
	}
}

// wantActions are the only actions each function's role may have
// (besides writing to its own log group).
var wantActions = func() map[string][]string {
	read := []string{
		"ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstanceTypeOfferings",
		"ec2:DescribeInstanceTypes", "ec2:DescribeInstances", "ec2:DescribeLaunchTemplates",
		"ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets",
		"ssm:GetParameter", "iam:GetInstanceProfile", "pricing:GetProducts", "eks:DescribeCluster",
	}
	launch := []string{
		"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:CreateTags",
		"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate", "iam:PassRole",
	}
	profiles := []string{"iam:CreateInstanceProfile", "iam:TagInstanceProfile", "iam:AddRoleToInstanceProfile"}
	gc := []string{"iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile", "iam:ListInstanceProfiles"}
	sqs := []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"}
	logs := []string{"logs:CreateLogStream", "logs:PutLogEvents"}
	join := func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		sort.Strings(out)
		return out
	}
	return map[string][]string{
		Provisioner:  join(read, launch, profiles, gc, logs),
		Disruption:   join(read, launch, profiles, gc, []string{"ec2:DescribeInstanceStatus"}, logs),
		Interruption: join(read, launch, sqs, logs),
		Bootstrap:    join([]string{"cloudformation:DescribeStacks", "eks:DescribeCluster"}, logs),
		Watcher:      join([]string{"eks:DescribeCluster", "lambda:InvokeFunction"}, logs),
	}
}()

// roleGrants collects the statements that apply to a role: its inline
// policies, AWS::IAM::Policy and customer managed policies attached to it,
// and the ARNs of AWS managed policies it has.
func roleGrants(d map[string]any, roleID string) (stmts []map[string]any, awsManaged []string) {
	res := resources(d)
	add := func(pd any) {
		for _, s := range asList(pd.(map[string]any)["Statement"]) {
			stmts = append(stmts, s.(map[string]any))
		}
	}
	role := props(res[roleID])
	for _, p := range asList(role["Policies"]) {
		add(p.(map[string]any)["PolicyDocument"])
	}
	for _, arn := range asList(role["ManagedPolicyArns"]) {
		if m, ok := arn.(map[string]any); ok && m["Ref"] != nil {
			add(props(res[m["Ref"].(string)])["PolicyDocument"])
			continue
		}
		awsManaged = append(awsManaged, jsonString(arn))
	}
	for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"} {
		for _, r := range resourcesOfType(d, typ) {
			if contains(asList(props(r)["Roles"]), ref(roleID)) {
				add(props(r)["PolicyDocument"])
			}
		}
	}
	return stmts, awsManaged
}

// checkRoleActions checks each function's role has exactly its actions
// (wantActions) plus extra, and no AWS managed policy.
func checkRoleActions(t *testing.T, s *Stack, d map[string]any, extra []string) {
	for _, name := range functions.Names() {
		stmts, awsManaged := roleGrants(d, logicalID(s, s.Roles[name]))
		got := map[string]bool{}
		for _, st := range stmts {
			if st["Effect"] != "Allow" || st["NotAction"] != nil || st["NotResource"] != nil {
				t.Errorf("%s: unexpected statement %s", name, jsonString(st))
			}
			for _, a := range asStrings(st["Action"]) {
				if strings.ContainsAny(a, "*?") {
					t.Errorf("%s: wildcard action %s", name, a)
				}
				got[a] = true
			}
		}
		gotList := sortedKeys(got)
		want := append(slices.Clone(wantActions[name]), extra...)
		sort.Strings(want)
		want = slices.Compact(want)
		if strings.Join(gotList, " ") != strings.Join(want, " ") {
			t.Errorf("%s role actions:\n got %v\nwant %v", name, gotList, want)
		}
		if len(awsManaged) > 0 {
			t.Errorf("%s has AWS managed policies %v: every grant is the stack's own", name, awsManaged)
		}
	}
}

// TestRoleActions: each function's role has exactly the actions that
// function calls, and no AWS managed policy.
func TestRoleActions(t *testing.T) {
	checkRoleActions(t, st, doc, nil)
}

// --- the guard ---

// guardedActions may only be granted with a condition and never on "*".
var guardedActions = []string{
	"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate", "ec2:CreateFleet",
	"ec2:CreateLaunchTemplate", "ec2:RunInstances", "iam:PassRole",
}

// actionMatches reports whether an IAM action pattern (with * and ?)
// covers action; IAM matches case-insensitively.
func actionMatches(pattern, action string) bool {
	ok, err := path.Match(strings.ToLower(pattern), strings.ToLower(action))
	return err == nil && ok
}

// policyDocuments finds every policy document in a template: anything
// with a Statement list, wherever it is (IAM policies, managed policies,
// inline role policies, resource policies).
func policyDocuments(d map[string]any) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if stmts, ok := v["Statement"]; ok {
				for _, s := range asList(stmts) {
					if m, ok := s.(map[string]any); ok {
						out[where] = append(out[where], m)
					}
				}
				return
			}
			for k, e := range v {
				walk(where+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", where, i), e)
			}
		}
	}
	for id, r := range resources(d) {
		walk(id, r["Properties"])
	}
	return out
}

// guardViolations lists the statements that grant a guarded action
// without a condition or on "*".
func guardViolations(d map[string]any) []string {
	var out []string
	docs := policyDocuments(d)
	for _, where := range sortedKeys(docs) {
		for _, s := range docs[where] {
			if s["Effect"] != "Allow" {
				continue
			}
			var hits []string
			if s["NotAction"] != nil {
				hits = append(hits, "NotAction")
			}
			for _, a := range asStrings(s["Action"]) {
				for _, g := range guardedActions {
					if actionMatches(a, g) {
						hits = append(hits, g)
					}
				}
			}
			if len(hits) == 0 {
				continue
			}
			var why []string
			if s["NotAction"] != nil {
				// Cannot be reasoned about: it grants every other action.
				why = append(why, "NotAction")
			}
			if c, ok := s["Condition"].(map[string]any); !ok || len(c) == 0 {
				why = append(why, "no condition")
			}
			if s["NotResource"] != nil {
				why = append(why, "NotResource")
			}
			for _, r := range asList(s["Resource"]) {
				if r == "*" {
					why = append(why, `Resource "*"`)
				}
			}
			if s["Resource"] == nil && s["NotResource"] == nil {
				why = append(why, "no resource")
			}
			if len(why) > 0 {
				out = append(out, fmt.Sprintf("%s: %v granted with %s: %s", where, hits, strings.Join(why, ", "), jsonString(s)))
			}
		}
	}
	return out
}

// TestGuardedActions fails if any statement of the stack (default and VPC
// variants are covered where they are synthesized) grants a guarded action
// without a condition or on "*".
func TestGuardedActions(t *testing.T) {
	for _, v := range guardViolations(doc) {
		t.Error(v)
	}
	// And the guard did look at the launch policy.
	n := 0
	for _, stmts := range policyDocuments(doc) {
		for _, s := range stmts {
			for _, a := range asStrings(s["Action"]) {
				for _, g := range guardedActions {
					if a == g {
						n++
					}
				}
			}
		}
	}
	if n < len(guardedActions) {
		t.Errorf("guard saw %d grants of guarded actions, want at least %d", n, len(guardedActions))
	}
}

// TestGuardCatchesBadStatements synthesizes deliberately bad statements and
// proves the guard reports each, and not the good one.
func TestGuardCatchesBadStatements(t *testing.T) {
	app := newApp()
	s := awscdk.NewStack(app, jsii.String("Bad"), &awscdk.StackProps{
		Env: &awscdk.Environment{Account: jsii.String(testAccount), Region: jsii.String(testRegion)},
	})
	role := awsiam.NewRole(s, jsii.String("Role"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
	})
	tagged := &map[string]interface{}{"StringEquals": map[string]interface{}{"aws:ResourceTag/owner": "me"}}
	bad := []*awsiam.PolicyStatementProps{
		{Sid: jsii.String("TerminateOnStar"), Actions: jsii.Strings("ec2:TerminateInstances"), Resources: jsii.Strings("*"), Conditions: tagged},
		{Sid: jsii.String("PassRoleNoCondition"), Actions: jsii.Strings("iam:PassRole"), Resources: jsii.Strings("arn:aws:iam::123456789012:role/node")},
		{Sid: jsii.String("WildcardAction"), Actions: jsii.Strings("ec2:*"), Resources: jsii.Strings("*"), Conditions: tagged},
		{Sid: jsii.String("CreateFleetNoCondition"), Actions: jsii.Strings("ec2:Create*"), Resources: jsii.Strings("arn:aws:ec2:eu-west-1:*:fleet/*")},
		{Sid: jsii.String("NotAction"), NotActions: jsii.Strings("s3:*"), Resources: jsii.Strings("arn:aws:ec2:eu-west-1:*:instance/*"), Conditions: tagged},
	}
	good := &awsiam.PolicyStatementProps{Sid: jsii.String("Good"), Actions: jsii.Strings("ec2:TerminateInstances"),
		Resources: jsii.Strings("arn:aws:ec2:eu-west-1:*:instance/*"), Conditions: tagged}
	for _, p := range append(bad, good) {
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(p))
	}
	// Also in a managed policy and a resource policy, to prove the walk.
	awsiam.NewManagedPolicy(s, jsii.String("Managed"), &awsiam.ManagedPolicyProps{
		Statements: &[]awsiam.PolicyStatement{awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("ManagedDeleteLTOnStar"), Actions: jsii.Strings("ec2:DeleteLaunchTemplate"), Resources: jsii.Strings("*"), Conditions: tagged,
		})},
		Roles: &[]awsiam.IRole{role},
	})

	d := *assertions.Template_FromStack(s, nil).ToJSON()
	violations := strings.Join(guardViolations(d), "\n")
	for _, sid := range []string{"TerminateOnStar", "PassRoleNoCondition", "WildcardAction", "CreateFleetNoCondition", "NotAction", "ManagedDeleteLTOnStar"} {
		if !regexp.MustCompile(`"Sid":"` + sid + `"`).MatchString(violations) {
			t.Errorf("guard missed %s; it reported:\n%s", sid, violations)
		}
	}
	if strings.Contains(violations, `"Sid":"Good"`) {
		t.Errorf("guard reported the good statement:\n%s", violations)
	}
}

// TestPolicySizes: with the longest names, each managed policy stays under
// IAM's 6,144-character limit and each role's inline policies under 10,240
// (IAM counts without whitespace).
func TestPolicySizes(t *testing.T) {
	long := strings.Repeat("c", 100) // longest EKS cluster name
	p := defaultProps()
	p.ClusterName = long
	p.NodeRoleName = strings.Repeat("r", 64)
	s, _, d, err := synth(p, false)
	if err != nil {
		t.Fatal(err)
	}
	// Resolve tokens to long but real values.
	partition, region, account := "aws-us-gov", "ap-southeast-5", testAccount
	arnRole := fmt.Sprintf("arn:%s:iam::%s:role/%s", partition, account, p.NodeRoleName)
	resolve := func(v any) int {
		b, _ := json.Marshal(v)
		out := string(b)
		out = regexp.MustCompile(`\{"Fn::Sub":"([^"]*)"\}`).ReplaceAllString(out, `"$1"`)
		out = regexp.MustCompile(`\{"Fn::GetAtt":\["[^"]+","Arn"\]\}`).ReplaceAllString(out, `"`+arnRole+`"`)
		out = strings.NewReplacer(
			"${AWS::Partition}", partition, "${AWS::Region}", region, "${AWS::AccountId}", account,
			`{"Ref":"AWS::Region"}`, `"`+region+`"`,
		).Replace(out)
		return len(out)
	}
	for id, mp := range s.ManagedPolicies {
		n := resolve(props(resources(d)[logicalID(s, mp)])["PolicyDocument"])
		t.Logf("%s: %d characters", id, n)
		if n > 6144 {
			t.Errorf("%s: %d characters, IAM allows 6144", id, n)
		}
	}
	for name, role := range s.Roles {
		n := 0
		for _, r := range resourcesOfType(d, "AWS::IAM::Policy") {
			if contains(asList(props(r)["Roles"]), ref(logicalID(s, role))) {
				n += resolve(props(r)["PolicyDocument"])
			}
		}
		if n > 10240 {
			t.Errorf("%s inline policies: %d characters, IAM allows 10240", name, n)
		}
	}
}

// ec2URLSuffixPrincipal is EC2's service principal in the stack's
// partition, as a node role trusts it.
var ec2URLSuffixPrincipal = map[string]interface{}{"Fn::Join": []interface{}{"", []interface{}{"ec2.", map[string]interface{}{"Ref": "AWS::URLSuffix"}}}}

func TestNodeRole(t *testing.T) {
	managed := []interface{}{}
	for _, n := range []string{"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly", "AmazonSSMManagedInstanceCore"} {
		managed = append(managed, map[string]interface{}{"Fn::Join": []interface{}{"", []interface{}{
			"arn:", map[string]interface{}{"Ref": "AWS::Partition"}, ":iam::aws:policy/" + n,
		}}})
	}
	check(t, "node role", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::IAM::Role"), &map[string]interface{}{
			"RoleName": "KarpenterNodeRole-demo",
			"AssumeRolePolicyDocument": assertions.Match_ObjectLike(&map[string]interface{}{
				"Statement": []interface{}{map[string]interface{}{
					"Action": "sts:AssumeRole", "Effect": "Allow",
					"Principal": map[string]interface{}{"Service": ec2URLSuffixPrincipal},
				}},
			}),
			"ManagedPolicyArns": assertions.Match_ArrayEquals(&managed),
		})
	})
}

func TestImportedNodeRole(t *testing.T) {
	p := defaultProps()
	p.NodeRoleName = "KarpenterNodeRole-existing"
	p.ImportNodeRole = true
	p.SkipNodeAccessEntry = true
	s, tm, d, err := synth(p, true)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "no node role created", func() {
		tm.ResourcePropertiesCountIs(jsii.String("AWS::IAM::Role"), &map[string]interface{}{
			"RoleName": assertions.Match_AnyValue(),
		}, jsii.Number(0))
	})
	check(t, "no EC2_LINUX entry", func() {
		tm.ResourcePropertiesCountIs(jsii.String("AWS::EKS::AccessEntry"), &map[string]interface{}{"Type": "EC2_LINUX"}, jsii.Number(0))
	})
	check(t, "PassRole on the imported role only", func() {
		tm.HasResourceProperties(jsii.String("AWS::IAM::ManagedPolicy"), &map[string]interface{}{
			"PolicyDocument": assertions.Match_ObjectLike(&map[string]interface{}{
				"Statement": assertions.Match_ArrayWith(&[]interface{}{assertions.Match_ObjectLike(&map[string]interface{}{
					"Sid":      "AllowPassingInstanceRole",
					"Resource": map[string]interface{}{"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/KarpenterNodeRole-existing"},
				})}),
			}),
		})
	})
	for _, v := range guardViolations(d) {
		t.Error(v)
	}
	checkRoleActions(t, s, d, nil)
	checkNag(t, s)
}

// A node role with an IAM path: the imported role's ARN (PassRole and its
// access entry) carries the path, a created role of nodeRoles is created
// under its path, and a path that is not an IAM path is refused.
func TestNodeRolePaths(t *testing.T) {
	p := defaultProps()
	p.NodeRoleName, p.ImportNodeRole, p.NodeRolePath = "KarpenterNodeRole-existing", true, "/platform/karpenter/"
	team, err := ParseNodeRole("TeamB-Nodes:create:path=/teams/b/")
	if err != nil || team.Path != "/teams/b/" {
		t.Fatalf("ParseNodeRole: %+v %v", team, err)
	}
	p.NodeRoles = []NodeRole{team}
	s, tm, d, err := synth(p, true)
	if err != nil {
		t.Fatal(err)
	}
	imported := map[string]any{"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/platform/karpenter/KarpenterNodeRole-existing"}
	check(t, "PassRole on the imported role's ARN with its path", func() {
		tm.HasResourceProperties(jsii.String("AWS::IAM::ManagedPolicy"), &map[string]interface{}{
			"PolicyDocument": assertions.Match_ObjectLike(&map[string]interface{}{
				"Statement": assertions.Match_ArrayWith(&[]interface{}{assertions.Match_ObjectLike(&map[string]interface{}{
					"Sid":      "AllowPassingInstanceRole",
					"Resource": assertions.Match_ArrayWith(&[]interface{}{imported}),
				})}),
			}),
		})
	})
	check(t, "the imported role's access entry names its path", func() {
		tm.HasResourceProperties(jsii.String("AWS::EKS::AccessEntry"), &map[string]interface{}{"PrincipalArn": imported, "Type": "EC2_LINUX"})
	})
	check(t, "the created role is under its path", func() {
		tm.HasResourceProperties(jsii.String("AWS::IAM::Role"), &map[string]interface{}{"RoleName": "TeamB-Nodes", "Path": "/teams/b/"})
	})
	checkNag(t, s)
	for _, v := range guardViolations(d) {
		t.Error(v)
	}
	for _, bad := range []string{"platform", "/platform", "platform/", "/a//b/", "/${AWS::AccountId}/"} {
		q := defaultProps()
		q.NodeRolePath = bad
		if err := q.Validate(); err == nil || !strings.Contains(err.Error(), "nodeRolePath") {
			t.Errorf("nodeRolePath %q: %v", bad, err)
		}
	}
	if _, err := ParseNodeRole("X:path=nope"); err != nil {
		t.Fatal(err) // parsed; refused by Validate below
	}
	q := defaultProps()
	q.NodeRoles = []NodeRole{{Name: "X", Path: "nope"}}
	if err := q.Validate(); err == nil || !strings.Contains(err.Error(), "not an IAM path") {
		t.Errorf("nodeRoles path nope: %v", err)
	}
}

// ssmParameterPaths widens SSM reads to the account's own parameters
// under those prefixes; without it only EKS's public parameters are
// readable, and a prefix under /aws/ or not a prefix is refused.
func TestSSMParameterPaths(t *testing.T) {
	p := defaultProps()
	p.SSMParameterPaths = []string{"/platform/amis/", "/team-b/ami"}
	_, tm, _, err := synth(p, false)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "SSM reads under the prefixes", func() {
		tm.HasResourceProperties(jsii.String("AWS::IAM::ManagedPolicy"), &map[string]interface{}{
			"PolicyDocument": assertions.Match_ObjectLike(&map[string]interface{}{
				"Statement": assertions.Match_ArrayWith(&[]interface{}{assertions.Match_ObjectEquals(&map[string]interface{}{
					"Sid": "AllowSSMReadActions", "Effect": "Allow", "Action": "ssm:GetParameter",
					"Resource": []any{ // CDK's order
						map[string]any{"Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/platform/amis/*"},
						map[string]any{"Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/team-b/ami*"},
						map[string]any{"Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}::parameter/aws/service/*"},
					},
				})}),
			}),
		})
	})
	for _, bad := range []string{"platform/amis", "/aws/service/custom", "/x/${AWS::AccountId}", "/"} {
		q := defaultProps()
		q.SSMParameterPaths = []string{bad}
		if err := q.Validate(); err == nil || !strings.Contains(err.Error(), "ssmParameterPaths") {
			t.Errorf("ssmParameterPaths %q: %v", bad, err)
		}
	}
}
