package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of CapacityBuffer, SIG Autoscaling's, shared with
// Cluster Autoscaler.
const Group = "autoscaling.x-k8s.io"

// SchemeGroupVersion is the group and version of every type in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1beta1"}

// AddToScheme registers the package's types with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &CapacityBuffer{}, &CapacityBufferList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
