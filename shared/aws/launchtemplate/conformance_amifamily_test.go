package launchtemplate

import (
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/conformance"
)

// The launch template side of Karpenter v1.14.1's amifamily package
// (aws/karpenter-provider-aws pkg/providers/amifamily): its AMIResolver
// cases (suite_test.go), the Bottlerocket version that decides the
// instance store's bind command (bottlerocket_test.go,
// bootstrap/bottlerocket_test.go) and its MIME archives
// (bootstrap/mime/suite_test.go), through Build, BottlerocketAMIVersion
// and the user data's MIME reader and writer.
func amiResolverCase(spec string) conformance.Case {
	return conformance.Case{Suite: "aws/providers/amifamily", File: "pkg/providers/amifamily/suite_test.go", Spec: "AMIResolver > " + spec}
}

func TestConformanceAMIResolver(t *testing.T) {
	for _, tc := range []struct {
		entry, region string
		want          ec2types.LaunchTemplateInstanceMetadataProtocolIpv6
	}{
		{"should be disabled for supported regions", "us-west-2", ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Disabled},
		{"should be nil for iso", "us-iso-east-1", ""},
		{"should be nil for isob", "us-isob-east-1", ""},
		{"should be nil for isof", "us-isof-south-1", ""},
	} {
		conformance.Run(t, amiResolverCase("should set launch template metadata options correctly per region > "+tc.entry), func(t *testing.T) {
			res, err := BuildIn(tc.region, request())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if got := r.Input.LaunchTemplateData.MetadataOptions.HttpProtocolIpv6; got != tc.want {
					t.Errorf("HttpProtocolIpv6 %q, want %q", got, tc.want)
				}
			}
		})
	}
	for _, tc := range []struct {
		spec     string
		requests corev1.ResourceList
		want     bool
	}{
		{"should set EnclaveEnabled to false by default when no resources are requested", nil, false},
		{"should set EnclaveEnabled to true when ResourceNIPSlots is in the NodeClaim's resource requests", corev1.ResourceList{ResourceNIPSlots: resource.MustParse("1")}, true},
		{"should set EnclaveEnabled to false when only other resources are requested (not ResourceNIPSlots)", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}, false},
	} {
		conformance.Run(t, amiResolverCase("EnclaveEnabled > "+tc.spec), func(t *testing.T) {
			req := request()
			req.NodeClaim.Spec.Resources.Requests = tc.requests
			res, err := Build(req)
			if err != nil || len(res) == 0 {
				t.Fatal(res, err)
			}
			for _, r := range res {
				if e := r.Input.LaunchTemplateData.EnclaveOptions; e == nil || aws.ToBool(e.Enabled) != tc.want {
					t.Errorf("enclave options %+v, want enabled %t", e, tc.want)
				}
			}
		})
	}
}

func TestConformanceBottlerocketVersion(t *testing.T) {
	bottlerocketCase := func(spec string) conformance.Case {
		return conformance.Case{Suite: "aws/providers/amifamily", File: "pkg/providers/amifamily/bottlerocket_test.go", Spec: "Bottlerocket > resolveAMIVersion > " + spec}
	}
	for _, tc := range []struct {
		spec  string
		terms []awsv1.AMISelectorTerm
		amis  []awsv1.AMI
		want  string
	}{
		{"should resolve version from alias", []awsv1.AMISelectorTerm{{Alias: "bottlerocket@v1.46.0"}}, nil, "v1.46.0"},
		{"should resolve latest from alias", []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}, nil, "latest"},
		{"should resolve version from name", []awsv1.AMISelectorTerm{{Name: "bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a"}}, nil, "v1.46.0"},
		{"should resolve version from ID with resolved AMI", []awsv1.AMISelectorTerm{{ID: "ami-12345"}},
			[]awsv1.AMI{{ID: "ami-12345", Name: "bottlerocket-aws-k8s-1.33-x86_64-v1.47.0-abc123"}}, "v1.47.0"},
		{"should resolve version from resolved AMI fallback", []awsv1.AMISelectorTerm{{Tags: map[string]string{"Environment": "prod"}}},
			[]awsv1.AMI{{ID: "ami-67890", Name: "bottlerocket-aws-k8s-1.30-arm64-v2.0.1-def456"}}, "v2.0.1"},
		{"should return empty when no version found", []awsv1.AMISelectorTerm{{Name: "some-other-ami"}}, nil, ""},
	} {
		conformance.Run(t, bottlerocketCase(tc.spec), func(t *testing.T) {
			if got := BottlerocketAMIVersion(tc.terms, tc.amis); got != tc.want {
				t.Errorf("version %q, want %q", got, tc.want)
			}
		})
	}

	conformance.Run(t, conformance.Case{Suite: "aws/providers/amifamily/bootstrap", File: "pkg/providers/amifamily/bootstrap/bottlerocket_test.go",
		Spec: "Bottlerocket > EnableDefaultMountPaths > should use the configured flag value"}, func(t *testing.T) {
		for _, defaultBind := range []bool{true, false} {
			ud, err := UserData(UserDataInput{Family: catalog.FamilyBottlerocket, Cluster: testCluster,
				InstanceStorePolicy: ptrTo(awsv1.InstanceStorePolicyRAID0), BottlerocketDefaultBind: defaultBind})
			if err != nil {
				t.Fatal(err)
			}
			if hasDirs := strings.Contains(ud, "'--dirs'") || strings.Contains(ud, `"--dirs"`); hasDirs == defaultBind {
				t.Errorf("default bind %t: user data\n%s", defaultBind, ud)
			}
		}
	})
}

func ptrTo[T any](v T) *T { return &v }

func TestConformanceMIME(t *testing.T) {
	mimeCase := func(spec string) conformance.Case {
		return conformance.Case{Suite: "aws/providers/amifamily/bootstrap/mime", File: "pkg/providers/amifamily/bootstrap/mime/suite_test.go", Spec: "MIME Parser > " + spec}
	}
	read := func(t *testing.T, name string) string {
		t.Helper()
		b, err := os.ReadFile("testdata/mime/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	conformance.Run(t, mimeCase("should fail to parse MIME archive with a malformed header"), func(t *testing.T) {
		if _, err := parseMIME(read(t, "mime_bad_header.txt")); err == nil {
			t.Error("malformed archive parsed")
		}
	})
	conformance.Run(t, mimeCase("should successfully parse a valid MIME archive"), func(t *testing.T) {
		parts, err := parseMIME(read(t, "mime_valid.txt"))
		if err != nil || len(parts) != 2 {
			t.Fatalf("%d parts, %v", len(parts), err)
		}
		for ct, file := range map[string]string{contentTypeNodeCfg: "nodeconfig.txt", contentTypeShell: "shell.txt"} {
			found := false
			for _, p := range parts {
				if p.ContentType == ct {
					found = true
					if p.Body != read(t, file) {
						t.Errorf("%s part %q, want %q", ct, p.Body, read(t, file))
					}
				}
			}
			if !found {
				t.Errorf("no %s part", ct)
			}
		}
	})
	conformance.Run(t, mimeCase("should successfully serialize a MIME archive"), func(t *testing.T) {
		got, err := writeMIME([]mimePart{{ContentType: contentTypeNodeCfg, Body: read(t, "nodeconfig.txt")}, {ContentType: contentTypeShell, Body: read(t, "shell.txt")}})
		if err != nil {
			t.Fatal(err)
		}
		if want := read(t, "mime_valid.txt"); got != want {
			t.Errorf("serialized\n%q\nwant\n%q", got, want)
		}
	})
}
