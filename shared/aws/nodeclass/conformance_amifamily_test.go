package nodeclass

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1's AMI provider suite (aws/karpenter-provider-aws
// pkg/providers/amifamily/suite_test.go, Describe AMIProvider), through the
// resolver's amis: status.amis of the class's amiSelectorTerms, an alias
// read through its SSM parameters. ImageQueries is DescribeImageQueries.
// Its AMIResolver cases (launch template options) are the launch template
// package's.
func amiCase(spec string) conformance.Case {
	return conformance.Case{Suite: "aws/providers/amifamily", File: "pkg/providers/amifamily/suite_test.go", Spec: "AMIProvider > " + spec}
}

const (
	amd64AMI       = "ami-id-amd64"
	arm64AMI       = "ami-id-arm64"
	amd64NvidiaAMI = "ami-id-amd64-nvidia"
	arm64NvidiaAMI = "ami-id-arm64-nvidia"
)

// amiWorld is the suite's BeforeEach images, each named as its id, and
// an empty SSM.
func amiWorld() (*fakeEC2, *fakeSSM) {
	img := func(id, arch string, created time.Time) ec2types.Image {
		return ec2types.Image{Name: aws.String(id), ImageId: aws.String(id), CreationDate: aws.String(created.Format(time.RFC3339)),
			Architecture: ec2types.ArchitectureValues(arch), Tags: ec2Tags("Name", id, "foo", "bar"), State: ec2types.ImageStateAvailable}
	}
	zero := time.Time{}
	return &fakeEC2{images: []ec2types.Image{
		img(amd64AMI, "x86_64", zero),
		img(arm64AMI, "arm64", zero.Add(time.Minute)),
		img(amd64NvidiaAMI, "x86_64", zero.Add(2*time.Minute)),
		img(arm64NvidiaAMI, "arm64", zero.Add(2*time.Minute)),
	}}, &fakeSSM{params: map[string]string{}}
}

func amiClass(terms ...awsv1.AMISelectorTerm) *awsv1.EC2NodeClass {
	nc := selectorClass()
	nc.Spec.AMISelectorTerms = terms
	return nc
}

func resolveAMIs(ec2 *fakeEC2, ssm *fakeSSM, nc *awsv1.EC2NodeClass, k8s string, now time.Time) ([]awsv1.AMI, outcome) {
	cl := cluster
	cl.KubernetesVersion = k8s
	return (&Resolver{EC2: ec2, SSM: ssm}).amis(context.Background(), nc, cl, now)
}

// querySet renders queries order-free, as ExpectConsistsOfAMIQueries
// compares them (owners, filters and values sorted).
func querySet(qs []ImageQuery) []string {
	var out []string
	for _, q := range qs {
		owners := append([]string(nil), q.Owners...)
		sort.Strings(owners)
		var fs []string
		for _, f := range q.Filters {
			vals := append([]string(nil), f.Values...)
			sort.Strings(vals)
			fs = append(fs, aws.ToString(f.Name)+"="+strings.Join(vals, ","))
		}
		sort.Strings(fs)
		out = append(out, fmt.Sprintf("owners=%v filters=%v", owners, fs))
	}
	sort.Strings(out)
	return out
}

func TestConformanceAMIs(t *testing.T) {
	now := time.Now()
	const k8s = "1.32"
	for _, tc := range []struct {
		entry, version, alias string
		fails                 bool
	}{
		{"should fail for AL2 on 1.33.0", "1.33.0", "al2@latest", true},
		{"should fail for AL2 on 1.34.2", "1.34.2", "al2@latest", true},
		{"should succeed for AL2 on 1.32.0", "1.32.0", "al2@latest", false},
		{"should succeed for AL2023 on 1.33.0", "1.33.0", "al2023@latest", false},
	} {
		conformance.Run(t, amiCase("should fail when AL2 is used with Kubernetes version 1.33 or greater > "+tc.entry), func(t *testing.T) {
			a, err := ParseAlias(tc.alias)
			if err != nil {
				t.Fatal(err)
			}
			_, err = AliasParameters(a, tc.version)
			if (err != nil) != tc.fails {
				t.Errorf("AliasParameters(%s, %s): %v, want failure %t", tc.alias, tc.version, err, tc.fails)
			}
		})
	}

	for _, tc := range []struct {
		spec, alias, k8s string
		params           map[string]string
		want             int
	}{
		{"should succeed to resolve AMIs (AL2)", "al2@latest", k8s, map[string]string{
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id":       amd64AMI,
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id":   amd64NvidiaAMI,
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id": arm64AMI,
		}, 4},
		{"should succeed to resolve AMIs (AL2023)", "al2023@latest", k8s, map[string]string{
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id": amd64AMI,
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/standard/recommended/image_id":  arm64AMI,
		}, 2},
		{"should succeed to resolve AMIs (Bottlerocket)", "bottlerocket@latest", k8s, map[string]string{
			"/aws/service/bottlerocket/aws-k8s-1.32/x86_64/latest/image_id":        amd64AMI,
			"/aws/service/bottlerocket/aws-k8s-1.32-nvidia/x86_64/latest/image_id": amd64NvidiaAMI,
			"/aws/service/bottlerocket/aws-k8s-1.32/arm64/latest/image_id":         arm64AMI,
			"/aws/service/bottlerocket/aws-k8s-1.32-nvidia/arm64/latest/image_id":  arm64NvidiaAMI,
		}, 5},
		{"should succeed to resolve AMIs (Windows2019)", "windows2019@latest", k8s, map[string]string{
			"/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.32/image_id": amd64AMI,
		}, 1},
		{"should succeed to resolve AMIs (Windows2022)", "windows2022@latest", k8s, map[string]string{
			"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.32/image_id": amd64AMI,
		}, 1},
		{"should succeed to resolve AMIs (Windows2025)", "windows2025@latest", "1.35", map[string]string{
			"/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.35/image_id": amd64AMI,
		}, 1},
		// Partial resolution: the parameters that exist give their images.
		{"SSM Alias Missing > should succeed to partially resolve AMIs if all SSM aliases don't exist (Al2)", "al2@latest", k8s, map[string]string{
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id":       amd64AMI,
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id": arm64AMI,
		}, 2},
		{"SSM Alias Missing > should succeed to partially resolve AMIs if all SSM aliases don't exist (AL2023)", "al2023@latest", k8s, map[string]string{
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id": amd64AMI,
		}, 1},
		{"SSM Alias Missing > should succeed to partially resolve AMIs if all SSM aliases don't exist (Bottlerocket)", "bottlerocket@latest", k8s, map[string]string{
			"/aws/service/bottlerocket/aws-k8s-1.32/x86_64/latest/image_id":        amd64AMI,
			"/aws/service/bottlerocket/aws-k8s-1.32-nvidia/x86_64/latest/image_id": amd64NvidiaAMI,
			"/aws/service/bottlerocket/aws-k8s-1.32/arm64/latest/image_id":         arm64AMI,
		}, 4},
	} {
		conformance.Run(t, amiCase(tc.spec), func(t *testing.T) {
			ec2, ssm := amiWorld()
			ssm.params = tc.params
			amis, o := resolveAMIs(ec2, ssm, amiClass(awsv1.AMISelectorTerm{Alias: tc.alias}), tc.k8s, now)
			if o.err != nil || !o.ok || len(amis) != tc.want {
				t.Errorf("%d amis (%+v), want %d: %+v", len(amis), o, tc.want, amis)
			}
		})
	}
	conformance.Run(t, amiCase("should fail to resolve AMIs for Windows2025 when EKS version is below 1.35"), func(t *testing.T) {
		ec2, ssm := amiWorld()
		ssm.params = map[string]string{"/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.34/image_id": amd64AMI}
		_, o := resolveAMIs(ec2, ssm, amiClass(awsv1.AMISelectorTerm{Alias: "windows2025@latest"}), "1.34.0", now)
		if o.ok || !strings.Contains(o.message, "Windows Server 2025 requires EKS version 1.35 or higher") {
			t.Errorf("outcome %+v", o)
		}
	})

	conformance.Run(t, amiCase("should not cause data races when calling Get() simultaneously"), func(t *testing.T) {
		ec2, ssm := amiWorld()
		want := []string{arm64AMI + " " + wellknown.ArchLabel + " In arm64;", amd64AMI + " " + wellknown.ArchLabel + " In amd64;"}
		var wg sync.WaitGroup
		errs := make(chan string, 100)
		for range 100 {
			wg.Go(func() {
				amis, o := resolveAMIs(ec2, ssm, amiClass(awsv1.AMISelectorTerm{ID: amd64AMI}, awsv1.AMISelectorTerm{ID: arm64AMI}), k8s, now)
				var got []string
				for _, a := range amis {
					got = append(got, a.ID+" "+requirementsKey(a.Requirements))
				}
				if o.err != nil || !reflect.DeepEqual(got, want) {
					errs <- fmt.Sprintf("%v %v", got, o.err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	})

	for _, state := range ec2types.ImageState("").Values() {
		if state == ec2types.ImageStateAvailable {
			continue
		}
		conformance.Run(t, amiCase("should ignore images when image.state != available > "+string(state)), func(t *testing.T) {
			ec2 := &fakeEC2{images: []ec2types.Image{
				{Name: aws.String("a"), ImageId: aws.String("ami-123"), Architecture: "x86_64", Tags: ec2Tags("test", "test"), CreationDate: aws.String("2022-08-15T12:00:00Z"), State: ec2types.ImageStateAvailable},
				{Name: aws.String("b"), ImageId: aws.String("ami-456"), Architecture: "arm64", Tags: ec2Tags("test", "test"), CreationDate: aws.String("2022-08-15T12:00:00Z"), State: state},
			}}
			amis, _ := resolveAMIs(ec2, &fakeSSM{}, amiClass(awsv1.AMISelectorTerm{Tags: map[string]string{"test": "test"}}), k8s, now)
			if len(amis) != 1 || amis[0].ID != "ami-123" {
				t.Errorf("amis %+v", amis)
			}
		})
	}

	archOnly := func(arch string) []corev1.NodeSelectorRequirement {
		return []corev1.NodeSelectorRequirement{{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}}
	}
	conformance.Run(t, amiCase("AMI Tag Requirements > should succeed to not resolve tags as requirements for NodeClasses"), func(t *testing.T) {
		ec2 := &fakeEC2{images: []ec2types.Image{{Name: aws.String(amd64AMI), ImageId: aws.String("ami-id-amd64"), CreationDate: aws.String(now.Format(time.RFC3339)),
			Architecture: "x86_64", State: ec2types.ImageStateAvailable,
			Tags: ec2Tags("Name", amd64AMI, "foo", "bar", corev1.LabelInstanceTypeStable, "m5.large", corev1.LabelTopologyZone, "test-zone-1a")}}}
		amis, _ := resolveAMIs(ec2, &fakeSSM{}, amiClass(awsv1.AMISelectorTerm{Tags: map[string]string{"*": "*"}}), k8s, now)
		if want := []awsv1.AMI{{ID: "ami-id-amd64", Name: amd64AMI, Requirements: archOnly("amd64")}}; !reflect.DeepEqual(amis, want) {
			t.Errorf("amis %+v, want %+v", amis, want)
		}
	})

	// AMI List requirements: which of two amd64 images is kept.
	deprecatedImg := func(id, name, created string, deprecation *time.Duration) ec2types.Image {
		img := ec2types.Image{Name: aws.String(name), ImageId: aws.String(id), CreationDate: aws.String(created), Architecture: "x86_64",
			Tags: ec2Tags("Name", name, "foo", "bar"), State: ec2types.ImageStateAvailable}
		if deprecation != nil {
			img.DeprecationTime = aws.String(now.Add(*deprecation).Format(time.RFC3339))
		}
		return img
	}
	ago := func(d time.Duration) *time.Duration { return &d }
	for _, tc := range []struct {
		spec   string
		images []ec2types.Image
		want   awsv1.AMI
	}{
		{"should prioritize the older non-deprecated ami without deprecation time", []ec2types.Image{
			deprecatedImg("ami-5678", amd64AMI, "2021-08-31T00:12:42.000Z", ago(-time.Hour)),
			deprecatedImg("ami-1234", amd64AMI, "2020-08-31T00:08:42.000Z", nil),
		}, awsv1.AMI{ID: "ami-1234", Name: amd64AMI, Requirements: archOnly("amd64")}},
		{"should prioritize the non-deprecated ami with deprecation time when both have same creation time", []ec2types.Image{
			deprecatedImg("ami-5678", amd64AMI, "2021-08-31T00:12:42.000Z", ago(-10*time.Minute)),
			deprecatedImg("ami-1234", amd64AMI, "2021-08-31T00:12:42.000Z", ago(10*time.Minute)),
		}, awsv1.AMI{ID: "ami-1234", Name: amd64AMI, Requirements: archOnly("amd64")}},
		{"should prioritize the non-deprecated ami with deprecation time when both have same creation time and different name", []ec2types.Image{
			deprecatedImg("ami-5678", "test-ami-2", "2021-08-31T00:12:42.000Z", ago(-10*time.Minute)),
			deprecatedImg("ami-1234", "test-ami-1", "2021-08-31T00:12:42.000Z", ago(10*time.Minute)),
		}, awsv1.AMI{ID: "ami-1234", Name: "test-ami-1", Requirements: archOnly("amd64")}},
		{"should prioritize the newer ami if both are deprecated", []ec2types.Image{
			deprecatedImg("ami-5678", amd64AMI, "2021-08-31T00:12:42.000Z", ago(-time.Hour)),
			deprecatedImg("ami-1234", amd64AMI, "2020-08-31T00:08:42.000Z", ago(-time.Hour)),
		}, awsv1.AMI{ID: "ami-5678", Name: amd64AMI, Deprecated: true, Requirements: archOnly("amd64")}},
	} {
		conformance.Run(t, amiCase("AMI List requirements > "+tc.spec), func(t *testing.T) {
			amis, _ := resolveAMIs(&fakeEC2{images: tc.images}, &fakeSSM{}, amiClass(awsv1.AMISelectorTerm{Tags: map[string]string{"*": "*"}}), k8s, now)
			if want := []awsv1.AMI{tc.want}; !reflect.DeepEqual(amis, want) {
				t.Errorf("amis %+v, want %+v", amis, want)
			}
		})
	}

	// Karpenter's cases list a class's AMIs once and find both images in
	// the one cache entry; here a warm container resolves the class again
	// within the TTL, after EC2 has forgotten the images, and must answer
	// from its cache.
	for _, tc := range []struct {
		spec  string
		terms []awsv1.AMISelectorTerm
	}{
		{"should resolve AMIs from cache that are filtered by id", []awsv1.AMISelectorTerm{{ID: "ami-123"}, {ID: "ami-456"}}},
		{"should resolve AMIs from cache that are filtered by name", []awsv1.AMISelectorTerm{{Name: "ami-name-1"}, {Name: "ami-name-2"}}},
		{"should resolve AMIs from cache that are filtered by tags", []awsv1.AMISelectorTerm{{Tags: map[string]string{"test": "test"}}}},
	} {
		conformance.Run(t, amiCase("Provider Cache > "+tc.spec), func(t *testing.T) {
			img := func(id, name, arch string) ec2types.Image {
				return ec2types.Image{Name: aws.String(name), ImageId: aws.String(id), Architecture: ec2types.ArchitectureValues(arch), Tags: ec2Tags("test", "test"),
					CreationDate: aws.String("2022-08-15T12:00:00Z"), State: ec2types.ImageStateAvailable}
			}
			api := &fakeEC2{images: []ec2types.Image{img("ami-123", "ami-name-1", "x86_64"), img("ami-456", "ami-name-2", "arm64")}}
			nc := amiClass(tc.terms...)
			cl := cluster
			cl.KubernetesVersion = k8s
			expectFromCache(t, api, "DescribeImages", func() { api.images = nil }, func(r *Resolver) ([]string, outcome) {
				amis, o := r.amis(context.Background(), nc, cl, r.now())
				var got []string
				for _, a := range amis {
					got = append(got, a.ID+"/"+a.Name)
				}
				sort.Strings(got)
				return got, o
			}, []string{"ami-123/ami-name-1", "ami-456/ami-name-2"})
		})
	}
	conformance.Run(t, amiCase("Provider Cache > should correctly disambiguate AND vs OR semantics for tags"), func(t *testing.T) {
		img := func(id, name, arch string, tags ...string) ec2types.Image {
			return ec2types.Image{Name: aws.String(name), ImageId: aws.String(id), Architecture: ec2types.ArchitectureValues(arch), Tags: ec2Tags(tags...),
				CreationDate: aws.String("2022-08-15T12:00:00Z"), State: ec2types.ImageStateAvailable}
		}
		ec2 := &fakeEC2{images: []ec2types.Image{img("ami-789", "ami-name-3", "x86_64", "tag-key-1", "tag-value-1", "tag-key-2", "tag-value-2")}}
		nc := amiClass(awsv1.AMISelectorTerm{Tags: map[string]string{"tag-key-1": "tag-value-1", "tag-key-2": "tag-value-2"}})
		nc.Spec.AMIFamily = aws.String("AL2")
		amis, _ := resolveAMIs(ec2, &fakeSSM{}, nc, k8s, now)
		if len(amis) != 1 || amis[0].Name != "ami-name-3" || ec2.calls["DescribeImages"] != 1 {
			t.Errorf("AND: %+v in %d calls", amis, ec2.calls["DescribeImages"])
		}
		ec2 = &fakeEC2{images: []ec2types.Image{img("ami-123", "ami-name-1", "x86_64", "tag-key-1", "tag-value-1"), img("ami-456", "ami-name-2", "arm64", "tag-key-2", "tag-value-2")}}
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"tag-key-1": "tag-value-1"}}, {Tags: map[string]string{"tag-key-2": "tag-value-2"}}}
		amis, _ = resolveAMIs(ec2, &fakeSSM{}, nc, k8s, now)
		var names []string
		for _, a := range amis {
			names = append(names, a.Name)
		}
		sort.Strings(names)
		if !reflect.DeepEqual(names, []string{"ami-name-1", "ami-name-2"}) || ec2.calls["DescribeImages"] != 2 {
			t.Errorf("OR: %v in %d calls", names, ec2.calls["DescribeImages"])
		}
	})

	for _, tc := range []struct {
		spec  string
		terms []awsv1.AMISelectorTerm
		want  []ImageQuery
	}{
		{"should have empty owners and use tags when prefixes aren't set", []awsv1.AMISelectorTerm{{Tags: map[string]string{"Name": "my-ami"}}},
			[]ImageQuery{{Filters: []ec2types.Filter{{Name: aws.String("tag:Name"), Values: []string{"my-ami"}}}}}},
		{"should have default owners and use name when prefixed", []awsv1.AMISelectorTerm{{Name: "my-ami"}},
			[]ImageQuery{{Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"my-ami"}}}, Owners: []string{"amazon", "self"}}}},
		{"should not set owners when legacy ids are passed", []awsv1.AMISelectorTerm{{ID: "ami-abcd1234"}, {ID: "ami-cafeaced"}},
			[]ImageQuery{{Filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: []string{"ami-abcd1234", "ami-cafeaced"}}}}}},
		{"should allow only specifying owners", []awsv1.AMISelectorTerm{{Owner: "abcdef"}, {Owner: "123456789012"}},
			[]ImageQuery{{Owners: []string{"abcdef"}}, {Owners: []string{"123456789012"}}}},
		{"should allow prefixed name and prefixed owners", []awsv1.AMISelectorTerm{{Name: "my-name", Owner: "0123456789"}, {Name: "my-name", Owner: "self"}},
			[]ImageQuery{
				{Owners: []string{"0123456789"}, Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"my-name"}}}},
				{Owners: []string{"self"}, Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"my-name"}}}},
			}},
	} {
		conformance.Run(t, amiCase("AMI Selectors > "+tc.spec), func(t *testing.T) {
			if got, want := querySet(ImageQueries(tc.terms, nil)), querySet(tc.want); !reflect.DeepEqual(got, want) {
				t.Errorf("queries %v, want %v", got, want)
			}
		})
	}

	type sortAMI struct {
		name, id, created string
		deprecated        bool
	}
	for _, tc := range []struct {
		spec     string
		in, want []sortAMI
	}{
		{"should sort amis by creationDate",
			[]sortAMI{{"test-ami-1", "test-ami-1-id", "2021-08-31T00:10:42.000Z", false}, {"test-ami-2", "test-ami-2-id", "2021-08-31T00:12:42.000Z", false}, {"test-ami-3", "test-ami-3-id", "2021-08-31T00:08:42.000Z", false}, {"test-ami-4", "test-ami-4-id", "", false}},
			[]sortAMI{{"test-ami-2", "test-ami-2-id", "2021-08-31T00:12:42.000Z", false}, {"test-ami-1", "test-ami-1-id", "2021-08-31T00:10:42.000Z", false}, {"test-ami-3", "test-ami-3-id", "2021-08-31T00:08:42.000Z", false}, {"test-ami-4", "test-ami-4-id", "", false}}},
		{"should sort amis with the same name and creation date consistently",
			[]sortAMI{{"test-ami-1", "test-ami-4-id", "2021-08-31T00:10:42.000Z", false}, {"test-ami-1", "test-ami-3-id", "2021-08-31T00:10:42.000Z", false}, {"test-ami-1", "test-ami-2-id", "2021-08-31T00:10:42.000Z", false}, {"test-ami-1", "test-ami-1-id", "2021-08-31T00:10:42.000Z", false}},
			[]sortAMI{{"test-ami-1", "test-ami-1-id", "2021-08-31T00:10:42.000Z", false}, {"test-ami-1", "test-ami-2-id", "2021-08-31T00:10:42.000Z", false}, {"test-ami-1", "test-ami-3-id", "2021-08-31T00:10:42.000Z", false}, {"test-ami-1", "test-ami-4-id", "2021-08-31T00:10:42.000Z", false}}},
		{"should sort deprecated amis with the same name and deprecation time consistently",
			[]sortAMI{{"test-ami-1", "test-ami-4-id", "2021-08-31T00:10:42.000Z", true}, {"test-ami-1", "test-ami-3-id", "2021-08-31T00:10:42.000Z", true}, {"test-ami-1", "test-ami-2-id", "2021-08-31T00:10:42.000Z", true}, {"test-ami-1", "test-ami-1-id", "2021-08-31T00:10:42.000Z", true}},
			[]sortAMI{{"test-ami-1", "test-ami-1-id", "2021-08-31T00:10:42.000Z", true}, {"test-ami-1", "test-ami-2-id", "2021-08-31T00:10:42.000Z", true}, {"test-ami-1", "test-ami-3-id", "2021-08-31T00:10:42.000Z", true}, {"test-ami-1", "test-ami-4-id", "2021-08-31T00:10:42.000Z", true}}},
	} {
		conformance.Run(t, amiCase("AMI Selectors > "+tc.spec), func(t *testing.T) {
			var list []candidate
			createdOf := map[string]string{}
			for _, a := range tc.in {
				created, _ := time.Parse(time.RFC3339, a.created) // "" is the zero time: last
				list = append(list, candidate{ami: awsv1.AMI{ID: a.id, Name: a.name, Deprecated: a.deprecated}, created: created})
				createdOf[a.id] = a.created
			}
			sortCandidates(list)
			var got []sortAMI
			for _, c := range list {
				got = append(got, sortAMI{c.ami.Name, c.ami.ID, createdOf[c.ami.ID], c.ami.Deprecated})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("sorted %v, want %v", got, tc.want)
			}
		})
	}

	ssmCase := func(spec string, params map[string]string, ssmErr error, param string, wantIDs []string, wantErr bool) {
		conformance.Run(t, amiCase("AMI Selectors > "+spec), func(t *testing.T) {
			ec2, ssm := amiWorld()
			ssm.params, ssm.err = params, ssmErr
			amis, o := resolveAMIs(ec2, ssm, amiClass(awsv1.AMISelectorTerm{SSMParameter: param}), k8s, now)
			if (o.err != nil) != wantErr || !reflect.DeepEqual(amiIDs(amis), wantIDs) {
				t.Errorf("amis %v, outcome %+v", amiIDs(amis), o)
			}
			for _, a := range amis {
				if a.Name != amd64AMI {
					t.Errorf("ami %+v, want named %s", a, amd64AMI)
				}
			}
		})
	}
	al2Param := "/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id"
	ssmCase("should succeed to resolve AMIs that use an SSM parameter", map[string]string{al2Param: amd64AMI}, nil, al2Param, []string{amd64AMI}, false)
	ssmCase("should succeed to resolve AMIs that use a custom SSM parameter", map[string]string{"/my/custom/ami/parameter": amd64AMI}, nil, "/my/custom/ami/parameter", []string{amd64AMI}, false)
	ssmCase("should not throw an error if SSM parameter is not found", map[string]string{}, nil, "/my/custom/ami/parameter", nil, false)
	ssmCase("should throw an error if SSM parameter returns a different error", map[string]string{}, fmt.Errorf("some error"), "/my/custom/ami/parameter", nil, true)
}
