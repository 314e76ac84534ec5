package nodeclass

import (
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/catalog"
)

// filterString renders filter sets compactly: sets separated by " | ",
// filters by " & ", values by ",".
func filterString(sets [][]ec2types.Filter) string {
	var out []string
	for _, set := range sets {
		var fs []string
		for _, f := range set {
			fs = append(fs, aws.ToString(f.Name)+"="+strings.Join(f.Values, ","))
		}
		out = append(out, strings.Join(fs, " & "))
	}
	return strings.Join(out, " | ")
}

func TestSubnetFilterSets(t *testing.T) {
	for _, tc := range []struct {
		name  string
		terms []awsv1.SubnetSelectorTerm
		want  string
	}{
		{"one tag", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c1"}}}, "tag:karpenter.sh/discovery=c1"},
		{"tags ANDed, sorted", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"tier": "private", "env": "prod"}}}, "tag:env=prod & tag:tier=private"},
		{"wildcard is tag-key", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"kubernetes.io/role/internal-elb": "*"}}}, "tag-key=kubernetes.io/role/internal-elb"},
		{"terms ORed", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"a": "1"}}, {Tags: map[string]string{"b": "2"}}}, "tag:a=1 | tag:b=2"},
		{"ids batched", []awsv1.SubnetSelectorTerm{{ID: "subnet-1"}, {Tags: map[string]string{"a": "1"}}, {ID: "subnet-2"}}, "tag:a=1 | subnet-id=subnet-1,subnet-2"},
		{"empty term dropped", []awsv1.SubnetSelectorTerm{{}}, ""},
	} {
		if got := filterString(SubnetFilterSets(tc.terms)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSecurityGroupFilterSets(t *testing.T) {
	for _, tc := range []struct {
		name  string
		terms []awsv1.SecurityGroupSelectorTerm
		want  string
	}{
		{"tags", []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c1", "Name": "*"}}}, "tag-key=Name & tag:karpenter.sh/discovery=c1"},
		{"ids and names batched", []awsv1.SecurityGroupSelectorTerm{{ID: "sg-1"}, {Name: "nodes"}, {ID: "sg-2"}, {Name: "eks-cluster-sg"}},
			"group-id=sg-1,sg-2 | group-name=nodes,eks-cluster-sg"},
		{"mixed", []awsv1.SecurityGroupSelectorTerm{{Name: "nodes"}, {Tags: map[string]string{"a": "b"}}}, "tag:a=b | group-name=nodes"},
	} {
		if got := filterString(SecurityGroupFilterSets(tc.terms)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestImageQueries(t *testing.T) {
	render := func(qs []ImageQuery) string {
		var out []string
		for _, q := range qs {
			in := q.Input()
			s := filterString([][]ec2types.Filter{in.Filters})
			if len(in.Owners) > 0 {
				s += " owners=" + strings.Join(in.Owners, ",")
			}
			if !aws.ToBool(in.IncludeDeprecated) || aws.ToInt32(in.MaxResults) != 1000 {
				s += " (bad paging/deprecation flags)"
			}
			out = append(out, s)
		}
		return strings.Join(out, " | ")
	}
	for _, tc := range []struct {
		name  string
		terms []awsv1.AMISelectorTerm
		ssm   []string
		want  string
	}{
		{"name defaults owners", []awsv1.AMISelectorTerm{{Name: "my-ami-*"}}, nil, "name=my-ami-* & state=available owners=self,amazon"},
		{"name with owner", []awsv1.AMISelectorTerm{{Name: "my-ami-*", Owner: "123456789012"}}, nil, "name=my-ami-* & state=available owners=123456789012"},
		{"tags, no owner", []awsv1.AMISelectorTerm{{Tags: map[string]string{"golden": "*", "team": "a"}}}, nil, "tag-key=golden & tag:team=a & state=available"},
		{"owner and tags", []awsv1.AMISelectorTerm{{Owner: "self", Tags: map[string]string{"x": "y"}}}, nil, "tag:x=y & state=available owners=self"},
		{"ids and ssm batched", []awsv1.AMISelectorTerm{{ID: "ami-1"}, {SSMParameter: "/p"}, {ID: "ami-2"}}, []string{"ami-3", "ami-1"}, "image-id=ami-1,ami-2,ami-3 & state=available"},
		{"alias ignored", []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}, nil, ""},
	} {
		if got := render(ImageQueries(tc.terms, tc.ssm)); got != tc.want {
			t.Errorf("%s: %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestAliasParameters(t *testing.T) {
	paths := func(a string, k8s string) []string {
		al, err := ParseAlias(a)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := AliasParameters(al, k8s)
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		var out []string
		for _, p := range ps {
			var reqs []string
			for _, set := range p.Requirements {
				reqs = append(reqs, requirementsKey(set))
			}
			out = append(out, p.Path+" "+p.Arch+" "+strings.Join(reqs, " OR "))
		}
		return out
	}
	const (
		std    = "karpenter.k8s.aws/instance-accelerator-count DoesNotExist ;karpenter.k8s.aws/instance-gpu-count DoesNotExist ;"
		nvidia = "karpenter.k8s.aws/instance-gpu-count Exists ;"
		neuron = "karpenter.k8s.aws/instance-accelerator-count Exists ;"
	)
	for _, tc := range []struct {
		alias, k8s string
		want       []string
	}{
		{"al2023@latest", "1.33", []string{
			"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id x86_64 " + std,
			"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/nvidia/recommended/image_id x86_64 " + nvidia,
			"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/neuron/recommended/image_id x86_64 " + neuron,
			"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id arm64 " + std,
			"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/nvidia/recommended/image_id arm64 " + nvidia,
		}},
		{"AL2023@v20240807", "1.30.4", []string{
			"/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.30-v20240807/image_id x86_64 " + std,
			"/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.30-v20240807/image_id x86_64 " + nvidia,
			"/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/neuron/amazon-eks-node-al2023-x86_64-neuron-1.30-v20240807/image_id x86_64 " + neuron,
			"/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.30-v20240807/image_id arm64 " + std,
			"/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.30-v20240807/image_id arm64 " + nvidia,
		}},
		{"al2@latest", "1.32", []string{
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id x86_64 " + std,
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id arm64 " + std,
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id x86_64 " + neuron + " OR " + nvidia,
		}},
		{"al2@v20240807", "1.30", []string{
			"/aws/service/eks/optimized-ami/1.30/amazon-linux-2/amazon-eks-node-1.30-v20240807/image_id x86_64 " + std,
			"/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/amazon-eks-arm64-node-1.30-v20240807/image_id arm64 " + std,
			"/aws/service/eks/optimized-ami/1.30/amazon-linux-2-gpu/amazon-eks-gpu-node-1.30-v20240807/image_id x86_64 " + neuron + " OR " + nvidia,
		}},
		{"al2@latest", "1.33", []string{"error: alias al2@latest: AL2 AMIs are not published for Kubernetes 1.33 (EKS stopped AL2 at 1.32); use al2023@latest or bottlerocket@latest"}},
		{"bottlerocket@latest", "1.33", []string{
			"/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id x86_64 " + std + " OR " + neuron,
			"/aws/service/bottlerocket/aws-k8s-1.33/arm64/latest/image_id arm64 " + std,
			"/aws/service/bottlerocket/aws-k8s-1.33-nvidia/x86_64/latest/image_id x86_64 " + nvidia,
			"/aws/service/bottlerocket/aws-k8s-1.33-nvidia/arm64/latest/image_id arm64 " + nvidia,
		}},
		{"bottlerocket@v1.26.0", "1.31", []string{
			"/aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.26.0/image_id x86_64 " + std + " OR " + neuron,
			"/aws/service/bottlerocket/aws-k8s-1.31/arm64/1.26.0/image_id arm64 " + std,
			"/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/1.26.0/image_id x86_64 " + nvidia,
			"/aws/service/bottlerocket/aws-k8s-1.31-nvidia/arm64/1.26.0/image_id arm64 " + nvidia,
		}},
		{"windows2022@latest", "1.33", []string{
			"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.33/image_id x86_64 kubernetes.io/os In windows;node.kubernetes.io/windows-build In 10.0.20348;",
		}},
		{"windows2019@latest", "1.30", []string{
			"/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.30/image_id x86_64 kubernetes.io/os In windows;node.kubernetes.io/windows-build In 10.0.17763;",
		}},
		{"windows2025@latest", "1.35", []string{
			"/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.35/image_id x86_64 kubernetes.io/os In windows;node.kubernetes.io/windows-build In 10.0.26100;",
		}},
		{"windows2025@latest", "1.34", []string{"error: alias windows2025@latest: Windows Server 2025 requires EKS version 1.35 or higher, current version: 1.34"}},
		{"al2023@latest", "2.0", []string{`error: kubernetes version "2.0" is not 1.<minor>`}},
	} {
		if got := paths(tc.alias, tc.k8s); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s on %s:\n%s\nwant\n%s", tc.alias, tc.k8s, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

func TestParseAliasAndFamily(t *testing.T) {
	for _, tc := range []struct{ in, family, version string }{
		{"al2023@latest", catalog.FamilyAL2023, "latest"},
		{"Bottlerocket@v1.2.3", catalog.FamilyBottlerocket, "v1.2.3"},
		{"windows2019@latest", catalog.FamilyWindows2019, "latest"},
	} {
		a, err := ParseAlias(tc.in)
		if err != nil || a.Family != tc.family || a.Version != tc.version {
			t.Errorf("ParseAlias(%s) = %+v %v", tc.in, a, err)
		}
	}
	for _, bad := range []string{"al2023", "al2023@", "@latest", "ubuntu@latest", "al2@1@2"} {
		if _, err := ParseAlias(bad); err == nil {
			t.Errorf("ParseAlias(%s) should fail", bad)
		}
	}
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}}}
	if Family(nc) != catalog.FamilyBottlerocket {
		t.Error("family from alias")
	}
	nc.Spec.AMIFamily = aws.String(catalog.FamilyCustom)
	if Family(nc) != catalog.FamilyCustom {
		t.Error("amiFamily wins")
	}
	nc = &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{ID: "ami-1"}}}}
	if Family(nc) != catalog.FamilyCustom {
		t.Error("no family, no alias: Custom")
	}
}
