package cloud

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func TestFleetContextLeftOutWhenMinValuesRelaxed(t *testing.T) {
	ctxID := "ctx-1"
	class := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{Context: &ctxID}}
	for _, tc := range []struct {
		relaxed string
		want    string
	}{{"", "ctx-1"}, {"false", "ctx-1"}, {"true", ""}} {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		if tc.relaxed != "" {
			nc.Annotations[wellknown.NodeClaimMinValuesRelaxedAnnotation] = tc.relaxed
		}
		if got := fleetContext(class, nc); got != tc.want {
			t.Errorf("relaxed=%q: context %q, want %q", tc.relaxed, got, tc.want)
		}
	}
	if got := fleetContext(&awsv1.EC2NodeClass{}, &karpv1.NodeClaim{}); got != "" {
		t.Errorf("no context: %q", got)
	}
}
