package nodeclass

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/eksauth"
)

// Karpenter v1.14.1's EC2NodeClass controller suites
// (aws/karpenter-provider-aws pkg/controllers/nodeclass/ami_test.go,
// capacityreservation_test.go, placementgroup_test.go, instanceprofile_test.go,
// validation_test.go and suite_test.go's termination cases) through
// Resolver.Resolve, the controller's reconcile: one Resolve is one
// reconcile, the status it returns what the tick writes. The account is
// Karpenter's fake EC2's subnets and security groups (karpenterFakeEC2),
// the AL2023 images of the cluster's version, and an IAM holding the
// suites' roles.

// ctrlEnv is one test's AWS account and clock; it keeps IAM, EC2 and SSM
// between reconciles, as Karpenter's awsEnv does within an It.
type ctrlEnv struct {
	ec2      *fakeEC2
	ssm      *fakeSSM
	iam      *fakeIAM
	now      time.Time
	cluster  eksauth.ClusterInfo
	validate func(ctx context.Context, nc *awsv1.EC2NodeClass, status awsv1.EC2NodeClassStatus, cluster eksauth.ClusterInfo) error
}

// newCtrlEnv is the suites' account: its images are the AL2023 images of
// the cluster's version (for the alias) and the AMI suite's tagged images
// (for amiFamily Custom with every image).
func newCtrlEnv() *ctrlEnv {
	_, ssm, _ := world()
	ec2 := karpenterFakeEC2()
	ec2.images = append(ec2.images, amiSuiteImages(testNow)...)
	return &ctrlEnv{ec2: ec2, ssm: ssm, now: testNow, cluster: cluster,
		iam: newFakeIAM("KarpenterNodeRole-c1", "test-role", "role-A", "role-B", "role-C", "other-role", "fake-role")}
}

func (e *ctrlEnv) resolver() *Resolver {
	return &Resolver{EC2: e.ec2, SSM: e.ssm, IAM: e.iam, Region: "eu-west-1", Now: func() time.Time { return e.now }, Validate: e.validate}
}

// reconcile resolves nc and stores its status, as the tick writes it; the
// error is what the reconcile returned.
func (e *ctrlEnv) reconcile(nc *awsv1.EC2NodeClass) error {
	st, err := e.resolver().Resolve(context.Background(), nc, e.cluster)
	nc.Status = st
	return err
}

func (e *ctrlEnv) mustReconcile(t *testing.T, nc *awsv1.EC2NodeClass) {
	t.Helper()
	if err := e.reconcile(nc); err != nil {
		t.Fatal(err)
	}
}

func expectCond(t *testing.T, nc *awsv1.EC2NodeClass, typ string, want metav1.ConditionStatus) metav1.Condition {
	t.Helper()
	c := cond(nc.Status, typ)
	if c.Status != want {
		t.Errorf("%s = %s (%s: %s), want %s", typ, c.Status, c.Reason, c.Message, want)
	}
	return c
}

func ctrlCase(file, spec string) conformance.Case {
	return conformance.Case{Suite: "aws/controllers/nodeclass", File: "pkg/controllers/nodeclass/" + file, Spec: spec}
}

// Requirements of the AMIs in status, as Karpenter's suites spell them.
func archReq(a string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{a}}
}

var (
	noGPUReq = corev1.NodeSelectorRequirement{Key: wellknown.InstanceGPUCountLabel, Operator: corev1.NodeSelectorOpDoesNotExist}
	noAccReq = corev1.NodeSelectorRequirement{Key: wellknown.InstanceAcceleratorCountLabel, Operator: corev1.NodeSelectorOpDoesNotExist}
	gpuReq   = corev1.NodeSelectorRequirement{Key: wellknown.InstanceGPUCountLabel, Operator: corev1.NodeSelectorOpExists}
	accReq   = corev1.NodeSelectorRequirement{Key: wellknown.InstanceAcceleratorCountLabel, Operator: corev1.NodeSelectorOpExists}
)

func reqs(r ...corev1.NodeSelectorRequirement) []corev1.NodeSelectorRequirement { return r }

// sameAMIs compares status.amis as a set (Karpenter's HaveLen and
// ContainElements), each AMI's requirements in order.
func sameAMIs(t *testing.T, got, want []awsv1.AMI) {
	t.Helper()
	key := func(a awsv1.AMI) string { return a.ID + "|" + requirementsKey(a.Requirements) }
	norm := func(in []awsv1.AMI) []awsv1.AMI {
		out := append([]awsv1.AMI(nil), in...)
		sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
		return out
	}
	if !reflect.DeepEqual(norm(got), norm(want)) {
		t.Errorf("amis\n%+v\nwant\n%+v", got, want)
	}
}

// amiSuiteImages is the AMI suite's DescribeImages answer.
func amiSuiteImages(now time.Time) []ec2types.Image {
	img := func(name, arch string, created time.Time) ec2types.Image {
		tagName := name
		if name == "amd64-standard-new" {
			tagName = "amd64-standard"
		}
		return ec2types.Image{Name: aws.String(name), ImageId: aws.String("ami-" + name), CreationDate: aws.String(created.Format(time.RFC3339)),
			Architecture: ec2types.ArchitectureValues(arch), Tags: ec2Tags("Name", tagName, "foo", "bar"), State: ec2types.ImageStateAvailable}
	}
	return []ec2types.Image{
		img("amd64-standard", "x86_64", now),
		img("amd64-standard-new", "x86_64", now.Add(time.Minute)),
		img("amd64-nvidia", "x86_64", now),
		img("amd64-neuron", "x86_64", now),
		img("arm64-standard", "arm64", now),
		img("arm64-nvidia", "arm64", now),
	}
}

// customClass is the suites' BeforeEach class with amiFamily Custom and
// every image of the account.
func customClass() *awsv1.EC2NodeClass {
	nc := statusClass()
	nc.Spec.AMIFamily = aws.String("Custom")
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"*": "*"}}}
	return nc
}

func TestConformanceNodeClassAMIs(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, ctrlCase("ami_test.go", "NodeClass AMI Status Controller > "+spec), body)
	}
	setup := func() (*ctrlEnv, *awsv1.EC2NodeClass) {
		e := newCtrlEnv()
		e.ec2.images = amiSuiteImages(e.now)
		return e, customClass()
	}
	alias := func(t *testing.T, version, alias string, params map[string]string, want []awsv1.AMI) {
		e, nc := setup()
		e.cluster.KubernetesVersion = version
		e.ssm.params = params
		nc.Spec.AMIFamily = nil // an alias names the family
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: alias}}
		e.mustReconcile(t, nc)
		sameAMIs(t, nc.Status.AMIs, want)
		expectCond(t, nc, awsv1.ConditionTypeAMIsReady, metav1.ConditionTrue)
	}
	ami := func(name string, r ...corev1.NodeSelectorRequirement) awsv1.AMI {
		return awsv1.AMI{Name: name, ID: "ami-" + name, Requirements: r}
	}
	amd, arm := archReq("amd64"), archReq("arm64")
	run("Aliases > Should resolve all AMIs with correct requirements for AL2023", func(t *testing.T) {
		p := "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/"
		alias(t, "1.33", "al2023@latest", map[string]string{
			p + "x86_64/standard/recommended/image_id": "ami-amd64-standard",
			p + "x86_64/nvidia/recommended/image_id":   "ami-amd64-nvidia",
			p + "x86_64/neuron/recommended/image_id":   "ami-amd64-neuron",
			p + "arm64/standard/recommended/image_id":  "ami-arm64-standard",
			p + "arm64/nvidia/recommended/image_id":    "ami-arm64-nvidia",
		}, []awsv1.AMI{
			ami("amd64-standard", amd, noGPUReq, noAccReq), ami("amd64-nvidia", amd, gpuReq), ami("amd64-neuron", amd, accReq),
			ami("arm64-standard", arm, noGPUReq, noAccReq), ami("arm64-nvidia", arm, gpuReq),
		})
	})
	run("Aliases > Should resolve all AMIs with correct requirements for AL2", func(t *testing.T) {
		// Karpenter skips it past 1.32, where EKS publishes no AL2 AMI.
		p := "/aws/service/eks/optimized-ami/1.32/"
		alias(t, "1.32", "al2@latest", map[string]string{
			p + "amazon-linux-2/recommended/image_id":       "ami-amd64-standard",
			p + "amazon-linux-2-gpu/recommended/image_id":   "ami-amd64-nvidia",
			p + "amazon-linux-2-arm64/recommended/image_id": "ami-arm64-standard",
		}, []awsv1.AMI{
			ami("amd64-standard", amd, noGPUReq, noAccReq), ami("amd64-nvidia", amd, gpuReq), ami("amd64-nvidia", amd, accReq),
			ami("arm64-standard", arm, noGPUReq, noAccReq),
		})
	})
	run("Aliases > Should resolve all AMIs with correct requirements for Bottlerocket", func(t *testing.T) {
		p := "/aws/service/bottlerocket/aws-k8s-1.33"
		alias(t, "1.33", "bottlerocket@latest", map[string]string{
			p + "/x86_64/latest/image_id":        "ami-amd64-standard",
			p + "/arm64/latest/image_id":         "ami-arm64-standard",
			p + "-nvidia/x86_64/latest/image_id": "ami-amd64-nvidia",
			p + "-nvidia/arm64/latest/image_id":  "ami-arm64-nvidia",
		}, []awsv1.AMI{
			ami("amd64-standard", amd, noGPUReq, noAccReq), ami("arm64-standard", arm, noGPUReq, noAccReq),
			ami("amd64-standard", amd, accReq), ami("amd64-nvidia", amd, gpuReq), ami("arm64-nvidia", arm, gpuReq),
		})
	})
	windows := func(year, version, build string) func(t *testing.T) {
		return func(t *testing.T) {
			alias(t, version, "windows"+year+"@latest", map[string]string{
				fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", year, version): "ami-amd64-standard",
			}, []awsv1.AMI{ami("amd64-standard",
				corev1.NodeSelectorRequirement{Key: wellknown.OSLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"windows"}},
				amd,
				corev1.NodeSelectorRequirement{Key: wellknown.WindowsBuildLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{build}},
			)})
		}
	}
	run("Aliases > Should resolve all AMIs with correct requirements for Windows2019", windows("2019", "1.33", "10.0.17763"))
	run("Aliases > Should resolve all AMIs with correct requirements for Windows2022", windows("2022", "1.33", "10.0.20348"))
	// Karpenter skips it before 1.35, the first version with the image.
	run("Aliases > Should resolve all AMIs with correct requirements for Windows2025", windows("2025", "1.35", "10.0.26100"))
	run("should resolve amiSelector AMIs and requirements into status when all SSM parameters don't resolve", func(t *testing.T) {
		p := "/aws/service/bottlerocket/aws-k8s-1.33"
		alias(t, "1.33", "bottlerocket@latest", map[string]string{
			p + "/x86_64/latest/image_id": "ami-amd64-standard",
			p + "/arm64/latest/image_id":  "ami-arm64-standard",
		}, []awsv1.AMI{
			ami("arm64-standard", arm, noGPUReq, noAccReq), ami("amd64-standard", amd, noGPUReq, noAccReq), ami("amd64-standard", amd, accReq),
		})
	})
	run("should resolve a valid AMI selector", func(t *testing.T) {
		e, nc := setup()
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"Name": "amd64-standard"}}}
		e.mustReconcile(t, nc)
		if want := []awsv1.AMI{ami("amd64-standard-new", amd)}; !reflect.DeepEqual(nc.Status.AMIs, want) {
			t.Errorf("amis %+v, want %+v", nc.Status.AMIs, want)
		}
		expectCond(t, nc, awsv1.ConditionTypeAMIsReady, metav1.ConditionTrue)
	})
	run("should get error when resolving AMIs and have status condition set to false", func(t *testing.T) {
		e, nc := setup()
		e.ec2.err = apiErr("InternalError")
		if err := e.reconcile(nc); err == nil {
			t.Error("the reconcile did not fail")
		}
		if c := cond(nc.Status, awsv1.ConditionTypeAMIsReady); c.Status == metav1.ConditionTrue {
			t.Errorf("AMIsReady %+v", c)
		}
	})
	// NodeClass AMI Status: two images, one deprecated 30 minutes from now.
	statusImages := func(now time.Time, x86Name, x86ID string) []ec2types.Image {
		return []ec2types.Image{
			{Name: aws.String(x86Name), ImageId: aws.String(x86ID), CreationDate: aws.String("2021-08-31T00:12:42.000Z"),
				DeprecationTime: aws.String(now.Add(30 * time.Minute).Format(time.RFC3339)), Architecture: "x86_64",
				Tags: ec2Tags("Name", x86Name, "foo", "bar"), State: ec2types.ImageStateAvailable},
			{Name: aws.String("test-ami-2"), ImageId: aws.String("ami-id-456"), CreationDate: aws.String("2021-08-31T00:12:42.000Z"),
				Architecture: "arm64", Tags: ec2Tags("Name", "test-ami-2", "foo", "bar"), State: ec2types.ImageStateAvailable},
		}
	}
	run("NodeClass AMI Status > should update nodeclass AMI status with correct deprecation value and conditions", func(t *testing.T) {
		e, nc := setup()
		e.ec2.images = statusImages(e.now, "test-ami-3", "ami-id-789")
		e.mustReconcile(t, nc)
		want := []awsv1.AMI{{Name: "test-ami-2", ID: "ami-id-456", Requirements: reqs(arm)}, {Name: "test-ami-3", ID: "ami-id-789", Requirements: reqs(amd)}}
		if !reflect.DeepEqual(nc.Status.AMIs, want) {
			t.Errorf("amis %+v, want %+v", nc.Status.AMIs, want)
		}
		expectCond(t, nc, awsv1.ConditionTypeAMIsReady, metav1.ConditionTrue)
		e.now = e.now.Add(40 * time.Minute)
		e.mustReconcile(t, nc)
		want[1].Deprecated = true
		if !reflect.DeepEqual(nc.Status.AMIs, want) {
			t.Errorf("amis %+v, want %+v", nc.Status.AMIs, want)
		}
		expectCond(t, nc, awsv1.ConditionTypeAMIsReady, metav1.ConditionTrue)
	})
	run("NodeClass AMI Status > should remove AMIDeprecated status condition when non deprecated AMIs are discovered", func(t *testing.T) {
		e, nc := setup()
		e.ec2.images = statusImages(e.now, "test-ami-3", "ami-id-789")
		e.now = e.now.Add(40 * time.Minute)
		e.mustReconcile(t, nc)
		want := []awsv1.AMI{{Name: "test-ami-2", ID: "ami-id-456", Requirements: reqs(arm)}, {Name: "test-ami-3", ID: "ami-id-789", Deprecated: true, Requirements: reqs(amd)}}
		if !reflect.DeepEqual(nc.Status.AMIs, want) {
			t.Errorf("amis %+v, want %+v", nc.Status.AMIs, want)
		}
		expectCond(t, nc, awsv1.ConditionTypeAMIsReady, metav1.ConditionTrue)
		e.ec2.images = statusImages(e.now, "test-ami-4", "ami-id-123")
		e.mustReconcile(t, nc)
		want = []awsv1.AMI{{Name: "test-ami-4", ID: "ami-id-123", Requirements: reqs(amd)}, {Name: "test-ami-2", ID: "ami-id-456", Requirements: reqs(arm)}}
		if !reflect.DeepEqual(nc.Status.AMIs, want) {
			t.Errorf("amis %+v, want %+v", nc.Status.AMIs, want)
		}
		expectCond(t, nc, awsv1.ConditionTypeAMIsReady, metav1.ConditionTrue)
	})
}

const crSelfOwner, crAltOwner = "012345678901", "123456789012"

// crSuiteReservations is the capacity reservation suite's account.
func crSuiteReservations(now time.Time) []ec2types.CapacityReservation {
	cr := func(id, zone, itype, owner string, imc ec2types.InstanceMatchCriteria, n int32, typ ec2types.CapacityReservationType, interruptible *bool, tags ...string) ec2types.CapacityReservation {
		return ec2types.CapacityReservation{AvailabilityZone: aws.String(zone), InstanceType: aws.String(itype), OwnerId: aws.String(owner),
			InstanceMatchCriteria: imc, CapacityReservationId: aws.String(id), AvailableInstanceCount: aws.Int32(n), Tags: ec2Tags(tags...),
			State: ec2types.CapacityReservationStateActive, ReservationType: typ, Interruptible: interruptible}
	}
	tgt, open, def := ec2types.InstanceMatchCriteriaTargeted, ec2types.InstanceMatchCriteriaOpen, ec2types.CapacityReservationTypeDefault
	no, yes := aws.Bool(false), aws.Bool(true)
	block := cr("cr-p5.48xlarge-1a", "test-zone-1a", "p5.48xlarge", crAltOwner, tgt, 2, ec2types.CapacityReservationTypeCapacityBlock, no, "reservation-type", "capacity-block")
	block.EndDate = aws.Time(now.Add(24 * time.Hour))
	return []ec2types.CapacityReservation{
		cr("cr-m5.large-1a-1", "test-zone-1a", "m5.large", crSelfOwner, tgt, 10, def, no),
		cr("cr-m5.large-1a-2", "test-zone-1a", "m5.large", crSelfOwner, tgt, 10, def, no, "karpenter.sh/discovery", "test"),
		block,
		cr("cr-m5.large-1b-1", "test-zone-1b", "m5.large", crSelfOwner, tgt, 15, def, no),
		cr("cr-m5.large-1b-2", "test-zone-1b", "m5.large", crAltOwner, tgt, 15, def, no, "karpenter.sh/discovery", "test"),
		cr("cr-m5.large-1a-3", "test-zone-1a", "m5.large", crSelfOwner, open, 5, def, no),
		cr("cr-i-m5.large-1a-1", "test-zone-1a", "m5.large", crSelfOwner, open, 10, def, yes, "reservation-interruptible", "true"),
		cr("cr-nil-interruptible", "test-zone-1a", "m5.large", crSelfOwner, tgt, 5, def, nil),
	}
}

func crIDs(crs []awsv1.CapacityReservation) []string {
	var out []string
	for _, c := range crs {
		out = append(out, c.ID)
	}
	sort.Strings(out)
	return out
}

func TestConformanceNodeClassCapacityReservations(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, ctrlCase("capacityreservation_test.go", "NodeClass Capacity Reservation Reconciler > "+spec), body)
	}
	setup := func(terms ...awsv1.CapacityReservationSelectorTerm) (*ctrlEnv, *awsv1.EC2NodeClass) {
		e := newCtrlEnv()
		e.ec2.crs = crSuiteReservations(e.now)
		nc := statusClass()
		nc.Spec.CapacityReservationSelectorTerms = terms
		return e, nc
	}
	discovery := map[string]string{"karpenter.sh/discovery": "test"}
	// resolves reconciles and expects the reservations ids, the condition
	// true.
	resolves := func(t *testing.T, e *ctrlEnv, nc *awsv1.EC2NodeClass, ids ...string) {
		t.Helper()
		e.mustReconcile(t, nc)
		expectCond(t, nc, awsv1.ConditionTypeCapacityReservationsReady, metav1.ConditionTrue)
		sort.Strings(ids)
		if got := crIDs(nc.Status.CapacityReservations); !reflect.DeepEqual(got, ids) {
			t.Errorf("reservations %v, want %v", got, ids)
		}
	}
	run("should handle capacity reservations with nil Interruptible field", func(t *testing.T) {
		e, nc := setup(awsv1.CapacityReservationSelectorTerm{ID: "cr-nil-interruptible"})
		resolves(t, e, nc, "cr-nil-interruptible")
		if len(nc.Status.CapacityReservations) == 1 && nc.Status.CapacityReservations[0].Interruptible {
			t.Error("interruptible")
		}
	})
	run("should resolve capacity reservations by ID", func(t *testing.T) {
		e, nc := setup(awsv1.CapacityReservationSelectorTerm{ID: "cr-m5.large-1a-1"})
		resolves(t, e, nc, "cr-m5.large-1a-1")
		want := awsv1.CapacityReservation{ID: "cr-m5.large-1a-1", InstanceMatchCriteria: "targeted", OwnerID: crSelfOwner, InstanceType: "m5.large",
			AvailabilityZone: "test-zone-1a", ReservationType: ReservationTypeDefault, State: ReservationStateActive}
		if len(nc.Status.CapacityReservations) == 1 && !reflect.DeepEqual(nc.Status.CapacityReservations[0], want) {
			t.Errorf("%+v\nwant %+v", nc.Status.CapacityReservations[0], want)
		}
	})
	run("should resolve capacity reservations by tags", func(t *testing.T) {
		e, nc := setup(awsv1.CapacityReservationSelectorTerm{Tags: discovery})
		resolves(t, e, nc, "cr-m5.large-1a-2", "cr-m5.large-1b-2")
	})
	run("should resolve capacity reservations by tags + owner", func(t *testing.T) {
		e, nc := setup(awsv1.CapacityReservationSelectorTerm{Tags: discovery, OwnerID: crSelfOwner})
		resolves(t, e, nc, "cr-m5.large-1a-2")
	})
	criteria := func(t *testing.T, nc *awsv1.EC2NodeClass, want string) {
		t.Helper()
		for _, c := range nc.Status.CapacityReservations {
			if c.InstanceMatchCriteria != want {
				t.Errorf("%s: instanceMatchCriteria %s", c.ID, c.InstanceMatchCriteria)
			}
		}
	}
	run("should resolve capacity reservations by instance match criteria 'open'", func(t *testing.T) {
		e, nc := setup(awsv1.CapacityReservationSelectorTerm{InstanceMatchCriteria: "open"})
		resolves(t, e, nc, "cr-m5.large-1a-3", "cr-i-m5.large-1a-1")
		criteria(t, nc, "open")
	})
	run("should resolve capacity reservations by instance match criteria 'targeted'", func(t *testing.T) {
		e, nc := setup(awsv1.CapacityReservationSelectorTerm{InstanceMatchCriteria: "targeted"})
		resolves(t, e, nc, "cr-m5.large-1a-1", "cr-m5.large-1a-2", "cr-p5.48xlarge-1a", "cr-m5.large-1b-1", "cr-m5.large-1b-2", "cr-nil-interruptible")
		criteria(t, nc, "targeted")
	})
	run("should resolve capacity reservations by instance match criteria with tags", func(t *testing.T) {
		e, nc := setup(awsv1.CapacityReservationSelectorTerm{InstanceMatchCriteria: "targeted", Tags: discovery})
		resolves(t, e, nc, "cr-m5.large-1a-2", "cr-m5.large-1b-2")
		criteria(t, nc, "targeted")
	})
	run("should resolve capacity reservations by instance match criteria with tags and owner", func(t *testing.T) {
		e, nc := setup(awsv1.CapacityReservationSelectorTerm{InstanceMatchCriteria: "targeted", Tags: discovery, OwnerID: crSelfOwner})
		resolves(t, e, nc, "cr-m5.large-1a-2")
		criteria(t, nc, "targeted")
		if len(nc.Status.CapacityReservations) == 1 && nc.Status.CapacityReservations[0].OwnerID != crSelfOwner {
			t.Errorf("owner %s", nc.Status.CapacityReservations[0].OwnerID)
		}
	})
	run("should exclude expired capacity reservations", func(t *testing.T) {
		e, nc := setup(awsv1.CapacityReservationSelectorTerm{ID: "cr-m5.large-1a-1"})
		e.ec2.crs[0].EndDate = aws.Time(e.now.Add(time.Hour))
		resolves(t, e, nc, "cr-m5.large-1a-1")
		e.now = e.now.Add(2 * time.Hour)
		resolves(t, e, nc)
	})
	for _, state := range ec2types.CapacityReservationStateActive.Values() {
		if state == ec2types.CapacityReservationStateActive {
			continue
		}
		run("should exclude non-active capacity reservations > "+string(state), func(t *testing.T) {
			e, nc := setup(awsv1.CapacityReservationSelectorTerm{ID: "cr-m5.large-1a-1"})
			e.ec2.crs[0].State = state
			resolves(t, e, nc)
		})
	}
	blocks := map[string]string{"reservation-type": "capacity-block"}
	run("should discover capacity block reservations", func(t *testing.T) {
		e, nc := setup(awsv1.CapacityReservationSelectorTerm{Tags: blocks})
		resolves(t, e, nc, "cr-p5.48xlarge-1a")
		if c := nc.Status.CapacityReservations; len(c) == 1 && (c[0].ReservationType != ReservationTypeCapacityBlock || c[0].State != ReservationStateActive) {
			t.Errorf("%+v", c[0])
		}
	})
	run("should mark capacity blocks as expiring 40 minutes prior to their endDate", func(t *testing.T) {
		e, nc := setup(awsv1.CapacityReservationSelectorTerm{Tags: blocks})
		e.ec2.crs[2].EndDate = aws.Time(e.now.Add(40 * time.Minute))
		resolves(t, e, nc, "cr-p5.48xlarge-1a")
		if c := nc.Status.CapacityReservations; len(c) == 1 && (c[0].ReservationType != ReservationTypeCapacityBlock || c[0].State != ReservationStateExpiring) {
			t.Errorf("%+v", c[0])
		}
	})
	run("shouldn't mark default capacity reservations as expiring 40 minutes prior to their endDate", func(t *testing.T) {
		e, nc := setup(awsv1.CapacityReservationSelectorTerm{Tags: discovery})
		for i := range e.ec2.crs {
			e.ec2.crs[i].EndDate = aws.Time(e.now.Add(40 * time.Minute))
		}
		resolves(t, e, nc, "cr-m5.large-1a-2", "cr-m5.large-1b-2")
		for _, c := range nc.Status.CapacityReservations {
			if c.ReservationType != ReservationTypeDefault || c.State != ReservationStateActive {
				t.Errorf("%+v", c)
			}
		}
	})
	run("should update status condition on nodeClass as Ready > when reserved capacity feature flag is enabled", func(t *testing.T) {
		e, nc := setup()
		e.mustReconcile(t, nc)
		if len(nc.Status.Conditions) != 8 {
			t.Errorf("%d conditions: %+v", len(nc.Status.Conditions), nc.Status.Conditions)
		}
		expectCond(t, nc, awsv1.ConditionTypeReady, metav1.ConditionTrue)
	})
	conformance.Run(t, conformance.Case{Suite: "aws/controllers/nodeclass", File: "pkg/controllers/nodeclass/capacityreservation_test.go",
		Spec:    "NodeClass Capacity Reservation Reconciler > should update status condition on nodeClass as Ready > when reserved capacity feature flag is disabled",
		Differs: "Karpless has no ReservedCapacity feature gate: it always resolves capacityReservationSelectorTerms, so an EC2NodeClass always carries the CapacityReservationsReady condition (8 conditions, not 7) and Ready depends on it, as with Karpenter's gate at its default, on"}, func(*testing.T) {})
	run("should discover interruptible reservations", func(t *testing.T) {
		e, nc := setup(awsv1.CapacityReservationSelectorTerm{Tags: map[string]string{"reservation-interruptible": "true"}})
		resolves(t, e, nc, "cr-i-m5.large-1a-1")
		if c := nc.Status.CapacityReservations; len(c) == 1 && (!c[0].Interruptible || c[0].State != ReservationStateActive) {
			t.Errorf("%+v", c[0])
		}
	})
}

func TestConformanceNodeClassPlacementGroups(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, ctrlCase("placementgroup_test.go", "NodeClass Placement Group Reconciler > "+spec), body)
	}
	setup := func(sel *awsv1.PlacementGroupSelector) (*ctrlEnv, *awsv1.EC2NodeClass) {
		e := newCtrlEnv()
		e.ec2.pgs = []ec2types.PlacementGroup{
			{GroupId: aws.String("pg-cluster123"), GroupName: aws.String("my-cluster-pg"), State: ec2types.PlacementGroupStateAvailable, Strategy: ec2types.PlacementStrategyCluster},
			{GroupId: aws.String("pg-partition456"), GroupName: aws.String("my-partition-pg"), State: ec2types.PlacementGroupStateAvailable, Strategy: ec2types.PlacementStrategyPartition, PartitionCount: aws.Int32(7)},
			{GroupId: aws.String("pg-spread789"), GroupName: aws.String("my-spread-pg"), State: ec2types.PlacementGroupStateAvailable, Strategy: ec2types.PlacementStrategySpread, SpreadLevel: ec2types.SpreadLevelRack},
			{GroupId: aws.String("pg-pending000"), GroupName: aws.String("my-pending-pg"), State: ec2types.PlacementGroupStatePending, Strategy: ec2types.PlacementStrategyCluster},
		}
		nc := statusClass()
		nc.Spec.PlacementGroupSelector = sel
		return e, nc
	}
	byName := func(n string) *awsv1.PlacementGroupSelector {
		return &awsv1.PlacementGroupSelector{Name: aws.String(n)}
	}
	// resolved reconciles and expects the condition true and the group
	// (nil: none).
	resolved := func(t *testing.T, e *ctrlEnv, nc *awsv1.EC2NodeClass, want *awsv1.PlacementGroup) {
		t.Helper()
		e.mustReconcile(t, nc)
		expectCond(t, nc, awsv1.ConditionTypePlacementGroupReady, metav1.ConditionTrue)
		var wantList []awsv1.PlacementGroup
		if want != nil {
			wantList = []awsv1.PlacementGroup{*want}
		}
		if !reflect.DeepEqual(nc.Status.PlacementGroups, wantList) {
			t.Errorf("placement groups %+v, want %+v", nc.Status.PlacementGroups, wantList)
		}
	}
	clusterPG := &awsv1.PlacementGroup{ID: "pg-cluster123", Name: "my-cluster-pg", Strategy: "cluster"}
	spreadPG := &awsv1.PlacementGroup{ID: "pg-spread789", Name: "my-spread-pg", Strategy: "spread", SpreadLevel: "rack"}
	run("should have PlacementGroupReady condition set to true when no placement group selector is specified", func(t *testing.T) {
		e, nc := setup(nil)
		resolved(t, e, nc, nil)
	})
	run("should resolve a cluster placement group by name", func(t *testing.T) {
		e, nc := setup(byName("my-cluster-pg"))
		resolved(t, e, nc, clusterPG)
	})
	run("should resolve a placement group by ID", func(t *testing.T) {
		e, nc := setup(&awsv1.PlacementGroupSelector{ID: aws.String("pg-cluster123")})
		resolved(t, e, nc, clusterPG)
	})
	run("should resolve a partition placement group with partition count", func(t *testing.T) {
		e, nc := setup(byName("my-partition-pg"))
		resolved(t, e, nc, &awsv1.PlacementGroup{ID: "pg-partition456", Name: "my-partition-pg", Strategy: "partition", PartitionCount: 7})
	})
	run("should resolve a spread placement group with spread level", func(t *testing.T) {
		e, nc := setup(byName("my-spread-pg"))
		resolved(t, e, nc, spreadPG)
	})
	notFound := func(name string) func(t *testing.T) {
		return func(t *testing.T) {
			e, nc := setup(byName(name))
			e.mustReconcile(t, nc)
			c := expectCond(t, nc, awsv1.ConditionTypePlacementGroupReady, metav1.ConditionFalse)
			if c.Reason != "PlacementGroupNotFound" || !strings.Contains(c.Message, name) {
				t.Errorf("PlacementGroupReady %+v", c)
			}
			if len(nc.Status.PlacementGroups) != 0 {
				t.Errorf("placement groups %+v", nc.Status.PlacementGroups)
			}
		}
	}
	run("should set condition false when placement group is not found", notFound("nonexistent-pg"))
	run("should set condition false when placement group is not in available state", notFound("my-pending-pg"))
	run("should clear in-memory state and condition when placement group selector is removed", func(t *testing.T) {
		e, nc := setup(byName("my-cluster-pg"))
		resolved(t, e, nc, clusterPG)
		nc.Spec.PlacementGroupSelector = nil
		resolved(t, e, nc, nil)
	})
	run("should update in-memory state when placement group selector changes", func(t *testing.T) {
		e, nc := setup(byName("my-cluster-pg"))
		resolved(t, e, nc, clusterPG)
		nc.Spec.PlacementGroupSelector = byName("my-spread-pg")
		resolved(t, e, nc, spreadPG)
	})
}
