package v1

// The one NodeClass Karpless provides: the AWS provider's EC2NodeClass.
// (karpenter.k8s.aws/v1 imports this package, so its group is spelled here.)
const (
	ec2NodeClassGroup = "karpenter.k8s.aws"
	ec2NodeClassKind  = "EC2NodeClass"
)

// IsManaged reports whether the reference names an EC2NodeClass, the only
// kind of NodeClass Karpless serves (Karpenter's nodeclaimutils.IsManaged
// against the provider's supported NodeClasses). An empty group or kind is
// taken for it, and so is a missing reference, which the CRD refuses and
// only hand-built objects have.
func (in *NodeClassReference) IsManaged() bool {
	if in == nil {
		return true
	}
	return (in.Group == "" || in.Group == ec2NodeClassGroup) && (in.Kind == "" || in.Kind == ec2NodeClassKind)
}

// IsManaged reports whether Karpless manages the NodeClaim: its NodeClass
// is an EC2NodeClass. A claim another provider's Karpenter made (a NodeClass
// of its own kind) is left to it: Karpless neither launches, registers,
// disrupts, expires nor finalizes it, as Karpenter ignores claims of a
// NodeClass its cloud provider does not support.
func (in *NodeClaim) IsManaged() bool { return in.Spec.NodeClassRef.IsManaged() }
