package cloud

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/instancetype"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1's instance provider suite, its EFA Count context: how
// many EFA devices a launched claim advertises (Karpenter's EFACount,
// which gates vpc.amazonaws.com/efa in the claim's capacity), here the
// resources record writes (launchedResources).
func TestConformanceInstanceProviderEFACount(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "aws/providers/instance", File: "pkg/providers/instance/suite_test.go", Spec: "InstanceProvider > EFA Count > " + spec}
	}
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	typeFor := func(t *testing.T, class *awsv1.EC2NodeClass, name string) *scheduling.InstanceType {
		t.Helper()
		types, err := instancetype.Build(cat, catalog.NodeConfigFor(class, nodeclass.Family(class)), []string{"us-west-2a"}, instancetype.Prices{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range types {
			if it.Name == name {
				return it
			}
		}
		t.Fatalf("no %s built", name)
		return nil
	}
	efa := func(t *testing.T, class *awsv1.EC2NodeClass, claim *karpv1.NodeClaim, it *scheduling.InstanceType) int64 {
		t.Helper()
		capacity, allocatable := launchedResources(claim, class, it)
		c, a := capacity[wellknown.ResourceEFA], allocatable[wellknown.ResourceEFA]
		if c.Value() != a.Value() {
			t.Errorf("capacity %s EFA, allocatable %s", c.String(), a.String())
		}
		return c.Value()
	}
	class := func(nis ...*awsv1.NetworkInterface) *awsv1.EC2NodeClass {
		return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{NetworkInterfaces: nis}}
	}
	claim := func() *karpv1.NodeClaim { return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x"}} }
	for _, tc := range []struct {
		entry string
		nis   []*awsv1.NetworkInterface
		want  int64
	}{
		{"with 1 EFA device", []*awsv1.NetworkInterface{
			{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
			{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		}, 1},
		{"with no EFA device", []*awsv1.NetworkInterface{{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface}}, 0},
	} {
		conformance.Run(t, c("should set EFACount based on NodeClass NetworkInterfaces configuration > "+tc.entry), func(t *testing.T) {
			cl := class(tc.nis...)
			if got := efa(t, cl, claim(), typeFor(t, cl, "g4dn.8xlarge")); got != tc.want {
				t.Errorf("advertises %d EFA devices, want %d", got, tc.want)
			}
		})
	}
	conformance.Run(t, c("should set EFACount based on instance type capacity when NodeClaim requests EFA"), func(t *testing.T) {
		cl, nc := class(), claim()
		nc.Spec.Resources.Requests = corev1.ResourceList{wellknown.ResourceEFA: resource.MustParse("1")}
		if got := efa(t, cl, nc, typeFor(t, cl, "g4dn.8xlarge")); got != 1 {
			t.Errorf("advertises %d EFA devices, want g4dn.8xlarge's 1", got)
		}
	})
	conformance.Run(t, c("should set EFACount to 0 when no EFA is configured"), func(t *testing.T) {
		cl := class()
		it := typeFor(t, cl, "g4dn.8xlarge")
		if q := it.Capacity[wellknown.ResourceEFA]; q.Value() == 0 {
			t.Fatal("g4dn.8xlarge is built without EFA: the case would prove nothing")
		}
		if got := efa(t, cl, claim(), it); got != 0 {
			t.Errorf("advertises %d EFA devices for a launch without EFA interfaces, want 0", got)
		}
	})
}
