package stack

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// twoRoles: the node role, a further existing Linux role, and a Windows
// role the stack creates.
func twoRoles() Props {
	p := defaultProps()
	p.NodeRoles = []NodeRole{
		{Name: "TeamB-Nodes"},
		{Name: "KarpenterWindowsNodeRole-demo", Windows: true, Create: true},
	}
	return p
}

// TestSeveralNodeRoles: every node role gets an access entry of its nodes'
// type and is covered by PassRole; a created Windows role is made like the
// node role; the bootstrap waits for every node entry.
func TestSeveralNodeRoles(t *testing.T) {
	s, tm, d, err := synth(twoRoles(), true)
	if err != nil {
		t.Fatal(err)
	}
	winRole := logicalID(s, s.NodeRoles["KarpenterWindowsNodeRole-demo"])
	teamB := map[string]any{"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/TeamB-Nodes"}
	entries := []struct {
		what      string
		principal any
		typ       string
	}{
		{"node role", getAtt(logicalID(s, s.NodeRole), "Arn"), "EC2_LINUX"},
		{"imported Linux role", teamB, "EC2_LINUX"},
		{"created Windows role", getAtt(winRole, "Arn"), "EC2_WINDOWS"},
	}
	for _, e := range entries {
		check(t, e.what+" access entry", func() {
			tm.HasResourceProperties(jsii.String("AWS::EKS::AccessEntry"), &map[string]interface{}{
				"ClusterName":      testCluster,
				"PrincipalArn":     e.principal,
				"Type":             e.typ,
				"KubernetesGroups": assertions.Match_Absent(),
				"AccessPolicies":   assertions.Match_Absent(),
			})
		})
	}
	check(t, "2 EC2_LINUX entries", func() {
		tm.ResourcePropertiesCountIs(jsii.String("AWS::EKS::AccessEntry"), &map[string]interface{}{"Type": "EC2_LINUX"}, jsii.Number(2))
	})
	check(t, "1 EC2_WINDOWS entry", func() {
		tm.ResourcePropertiesCountIs(jsii.String("AWS::EKS::AccessEntry"), &map[string]interface{}{"Type": "EC2_WINDOWS"}, jsii.Number(1))
	})
	check(t, "8 entries", func() { tm.ResourceCountIs(jsii.String("AWS::EKS::AccessEntry"), jsii.Number(8)) })

	check(t, "PassRole on the three roles, to EC2 only", func() {
		tm.HasResourceProperties(jsii.String("AWS::IAM::ManagedPolicy"), &map[string]interface{}{
			"PolicyDocument": assertions.Match_ObjectLike(&map[string]interface{}{
				"Statement": assertions.Match_ArrayWith(&[]interface{}{assertions.Match_ObjectEquals(&map[string]interface{}{
					"Sid": "AllowPassingInstanceRole", "Effect": "Allow", "Action": "iam:PassRole",
					"Condition": map[string]any{"StringEquals": map[string]any{"iam:PassedToService": []any{"ec2.amazonaws.com", "ec2.amazonaws.com.cn"}}},
					// CDK sorts a statement's resources.
					"Resource": assertions.Match_ArrayEquals(&[]interface{}{getAtt(logicalID(s, s.NodeRole), "Arn"), getAtt(winRole, "Arn"), teamB}),
				})}),
			}),
		})
	})

	managed := []interface{}{}
	for _, n := range nodeRoleManagedPolicies {
		managed = append(managed, map[string]interface{}{"Fn::Join": []interface{}{"", []interface{}{
			"arn:", map[string]interface{}{"Ref": "AWS::Partition"}, ":iam::aws:policy/" + n,
		}}})
	}
	check(t, "the Windows role is created like the node role", func() {
		tm.HasResourceProperties(jsii.String("AWS::IAM::Role"), &map[string]interface{}{
			"RoleName":    "KarpenterWindowsNodeRole-demo",
			"Description": "Role of the Windows nodes Karpless launches for EKS cluster demo",
			"AssumeRolePolicyDocument": assertions.Match_ObjectLike(&map[string]interface{}{
				"Statement": []interface{}{map[string]interface{}{
					"Action": "sts:AssumeRole", "Effect": "Allow",
					"Principal": map[string]interface{}{"Service": ec2URLSuffixPrincipal},
				}},
			}),
			"ManagedPolicyArns": assertions.Match_ArrayEquals(&managed),
		})
	})
	check(t, "TeamB-Nodes is not created", func() {
		tm.ResourcePropertiesCountIs(jsii.String("AWS::IAM::Role"), &map[string]interface{}{"RoleName": "TeamB-Nodes"}, jsii.Number(0))
	})

	// On deletion the bootstrap's Delete runs before any node entry goes.
	deps := map[string]bool{}
	for _, dep := range asList(resources(d)[logicalID(s, s.Bootstrap)]["DependsOn"]) {
		deps[dep.(string)] = true
	}
	if len(s.NodeAccessEntries) != 3 {
		t.Errorf("%d node access entries, want 3", len(s.NodeAccessEntries))
	}
	for role, e := range s.NodeAccessEntries {
		if id := *s.GetLogicalId(e); !deps[id] {
			t.Errorf("the bootstrap does not depend on %s's access entry %s (depends on %v)", role, id, sortedKeys(deps))
		}
	}

	for _, v := range guardViolations(d) {
		t.Error(v)
	}
	checkRoleActions(t, s, d, nil)
	checkNag(t, s)
	check(t, "outputs", func() {
		tm.HasOutput(jsii.String("LinuxNodeRoleNames"), &map[string]interface{}{"Value": "TeamB-Nodes"})
		tm.HasOutput(jsii.String("WindowsNodeRoleNames"), &map[string]interface{}{"Value": "KarpenterWindowsNodeRole-demo"})
	})
}

// TestNodeRoleIDsFollowNames: the construct IDs of a role and its access
// entry come from its name, so reordering nodeRoles changes no logical ID
// (an access entry replaced in place would collide with itself: EKS allows
// one per principal).
func TestNodeRoleIDsFollowNames(t *testing.T) {
	ids := func(p Props) map[string]string {
		s, _, _, err := synth(p, false)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for name, e := range s.NodeAccessEntries {
			out[name] = *s.GetLogicalId(e)
		}
		return out
	}
	p := twoRoles()
	before := ids(p)
	p.NodeRoles[0], p.NodeRoles[1] = p.NodeRoles[1], p.NodeRoles[0]
	if after := ids(p); jsonString(after) != jsonString(before) {
		t.Errorf("logical IDs changed with the order:\n before %v\n after  %v", before, after)
	}
	if before[defaultProps().withDefaults().NodeRoleName] != "NodeAccessEntry" {
		t.Errorf("the node role's entry is %q; it must keep NodeAccessEntry, or existing stacks would replace it", before["KarpenterNodeRole-demo"])
	}
}

// TestSkippedNodeRoleEntry: a further role that already has an access
// entry gets PassRole but no entry.
func TestSkippedNodeRoleEntry(t *testing.T) {
	p := defaultProps()
	p.SkipNodeAccessEntry = true
	p.NodeRoles = []NodeRole{{Name: "Legacy", SkipAccessEntry: true}, {Name: "Win", Windows: true}}
	s, tm, _, err := synth(p, false)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "only the Windows entry", func() {
		tm.ResourcePropertiesCountIs(jsii.String("AWS::EKS::AccessEntry"), &map[string]interface{}{"Type": assertions.Match_StringLikeRegexp(jsii.String("EC2_.*"))}, jsii.Number(1))
		tm.ResourcePropertiesCountIs(jsii.String("AWS::EKS::AccessEntry"), &map[string]interface{}{"Type": "EC2_WINDOWS"}, jsii.Number(1))
	})
	if _, ok := s.NodeAccessEntries["Legacy"]; ok {
		t.Error("Legacy has an access entry")
	}
}

// arnAWSLiteral finds ARNs written for the commercial partition.
var arnAWSLiteral = regexp.MustCompile(`arn:aws:`)

// TestPartitions: synthesized for the China and GovCloud regions (and
// without a region), the template holds no ARN of the aws partition: every
// ARN takes ${AWS::Partition}. Node roles trust EC2 through
// ${AWS::URLSuffix} (ec2.amazonaws.com.cn in China), and PassRole accepts
// both names of EC2.
func TestPartitions(t *testing.T) {
	for _, region := range []string{"cn-north-1", "cn-northwest-1", "us-gov-west-1", "us-gov-east-1", ""} {
		t.Run(fmt.Sprintf("region=%q", region), func(t *testing.T) {
			p := twoRoles()
			p.Region = region
			if region == "" {
				p.Account = ""
			}
			p.NodeRoles = append(p.NodeRoles, NodeRole{Name: "Imported-Windows", Windows: true})
			s, _, d, err := synth(p, false)
			if err != nil {
				t.Fatal(err)
			}
			raw := jsonString(d)
			if locs := arnAWSLiteral.FindAllStringIndex(raw, -1); len(locs) > 0 {
				for _, l := range locs {
					t.Errorf("aws-partition ARN literal: ...%s...", raw[max(0, l[0]-120):min(len(raw), l[1]+80)])
				}
			}
			// Service principals: EC2 through the URL suffix (CDK would
			// write ec2.amazonaws.com); the others are the same in every
			// partition.
			var services []string
			for _, doc := range policyDocuments(d) {
				for _, st := range doc {
					if pr, ok := st["Principal"].(map[string]any); ok {
						for _, svc := range asList(pr["Service"]) {
							services = append(services, jsonString(svc))
						}
					}
				}
			}
			sort.Strings(services)
			services = compactStrings(services)
			want := []string{`"events.amazonaws.com"`, `"lambda.amazonaws.com"`, jsonString(ec2URLSuffixPrincipal)}
			sort.Strings(want)
			if strings.Join(services, " ") != strings.Join(want, " ") {
				t.Errorf("service principals %v, want %v", services, want)
			}
			if n := len(s.NodeAccessEntries); n != 4 {
				t.Errorf("%d node access entries, want 4", n)
			}
		})
	}
}

func compactStrings(sorted []string) []string {
	var out []string
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// TestPolicySizesWithNodeRoles: MaxNodeRoles roles of the longest names in
// the longest partition keep the launch policy under IAM's limit.
func TestPolicySizesWithNodeRoles(t *testing.T) {
	p := defaultProps()
	p.ClusterName = strings.Repeat("c", 100)
	p.NodeRoleName = strings.Repeat("r", 64)
	for i := range MaxNodeRoles {
		p.NodeRoles = append(p.NodeRoles, NodeRole{Name: fmt.Sprintf("%02d%s", i, strings.Repeat("n", 62)), Windows: i%2 == 0})
	}
	s, _, d, err := synth(p, false)
	if err != nil {
		t.Fatal(err)
	}
	pd := props(resources(d)[logicalID(s, s.ManagedPolicies[LaunchPolicyID])])["PolicyDocument"]
	// Resolve the tokens to the longest real values.
	out := jsonString(pd)
	out = regexp.MustCompile(`\{"Fn::Sub":"([^"]*)"\}`).ReplaceAllString(out, `"$1"`)
	out = regexp.MustCompile(`\{"Fn::GetAtt":\["[^"]+","Arn"\]\}`).ReplaceAllString(out, `"arn:aws-us-gov:iam::123456789012:role/`+p.NodeRoleName+`"`)
	out = regexp.MustCompile(`\{"Fn::Join":\["",\["arn:",\{"Ref":"AWS::Partition"\},":iam::([^"]*)"\]\]\}`).ReplaceAllString(out, `"arn:aws-us-gov:iam::$1"`)
	out = strings.NewReplacer("${AWS::Partition}", "aws-us-gov", "${AWS::Region}", "ap-southeast-5", "${AWS::AccountId}", testAccount,
		`{"Ref":"AWS::Region"}`, `"ap-southeast-5"`).Replace(out)
	if strings.Contains(out, "Fn::") || strings.Contains(out, `"Ref"`) {
		t.Fatalf("unresolved token in %s", out)
	}
	t.Logf("%s with %d further node roles: %d characters", LaunchPolicyID, MaxNodeRoles, len(out))
	if len(out) > 6144 {
		t.Errorf("%s: %d characters, IAM allows 6144", LaunchPolicyID, len(out))
	}
}

// TestImportedNodeRoleEntriesOutliveTheStack: cdk destroy keeps the
// access entry of a node role the stack imported (its nodes, Karpenter's
// too after a rollback, need it) and deletes that of a role it created.
func TestImportedNodeRoleEntriesOutliveTheStack(t *testing.T) {
	for _, imported := range []bool{false, true} {
		t.Run(fmt.Sprintf("importNodeRole=%v", imported), func(t *testing.T) {
			p := twoRoles()
			p.ImportNodeRole = imported
			s, _, d, err := synth(p, false)
			if err != nil {
				t.Fatal(err)
			}
			resources := d["Resources"].(map[string]any)
			policy := func(role string) any {
				r := resources[*s.GetLogicalId(s.NodeAccessEntries[role])].(map[string]any)
				return r["DeletionPolicy"]
			}
			want := map[string]any{
				p.withDefaults().NodeRoleName:   nil,
				"TeamB-Nodes":                   "Retain",
				"KarpenterWindowsNodeRole-demo": nil,
			}
			if imported {
				want[p.withDefaults().NodeRoleName] = "Retain"
			}
			for role, w := range want {
				if got := policy(role); got != w {
					t.Errorf("%s: DeletionPolicy %v, want %v", role, got, w)
				}
			}
		})
	}
}
