package planning

import (
	"maps"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// PodsToProvision are the pods a pass simulates: those the scheduler found
// no node for, and, as Karpenter does, the pods of nodes being deleted, so
// their replacement capacity is launched before they are evicted (on a node
// already replaced, the simulation finds the replacement in flight and
// launches nothing more). Nodes only tainted karpenter.sh/disrupted are not
// leaving yet: a disruption command taints its candidates before it creates
// their replacements, and provisioning for their pods in between would
// launch the same capacity twice (Karpenter marks them for deletion only
// after their replacements exist).
//
// Of a leaving node's pods, only those Karpenter finds currently
// reschedulable get capacity ahead (podutil.IsCurrentlyReschedulable at
// now): a terminating StatefulSet pod does, a pod a PDB never lets go or an
// active do-not-disrupt annotation holds does not.
func PodsToProvision(snap *cluster.Snapshot, now time.Time) []*corev1.Pod {
	leaving := map[string]bool{}
	deletingClaims := map[string]bool{}
	for _, nc := range snap.NodeClaims {
		if nc.DeletionTimestamp != nil && nc.Status.ProviderID != "" {
			deletingClaims[nc.Status.ProviderID] = true
		}
	}
	for _, n := range snap.Nodes {
		if n.DeletionTimestamp != nil || deletingClaims[n.Spec.ProviderID] {
			leaving[n.Name] = true
		}
	}
	var out []*corev1.Pod
	for _, pod := range snap.Pods {
		if podutil.IsProvisionable(pod) || (leaving[pod.Spec.NodeName] && podutil.IsCurrentlyReschedulable(pod, snap.PDBs, now)) {
			out = append(out, pod)
		}
	}
	return out
}

// NodeClaimFor is the NodeClaim object for a simulated new claim, labelled,
// annotated and owned as Karpenter creates them.
func NodeClaimFor(np *karpv1.NodePool, nc *awsv1.EC2NodeClass, n *scheduling.NewNodeClaim) *karpv1.NodeClaim {
	labels := maps.Clone(n.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, np.Spec.Template.Labels)
	labels[wellknown.NodePoolLabel] = np.Name
	labels[wellknown.EC2NodeClassLabel] = nc.Name
	annotations := maps.Clone(np.Spec.Template.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[wellknown.NodePoolHashAnnotation] = np.Hash()
	annotations[wellknown.NodePoolHashVersionAnnotation] = wellknown.NodePoolHashVersion
	if h, ok := nc.Annotations[wellknown.EC2NodeClassHashAnnotation]; ok {
		annotations[wellknown.EC2NodeClassHashAnnotation] = h
		// The class's own version (nodeclass.HashVersion), so that the
		// disruption function's drift check compares like with like.
		annotations[wellknown.EC2NodeClassHashVersionAnnotation] = nc.Annotations[wellknown.EC2NodeClassHashVersionAnnotation]
	}
	// As Karpenter's scheduler, on every NodeClaim it provisions: "true"
	// when minValues were relaxed (MIN_VALUES_POLICY=BestEffort), else
	// "false". The launch skips the class's context for a relaxed claim.
	annotations[wellknown.NodeClaimMinValuesRelaxedAnnotation] = strconv.FormatBool(n.MinValuesRelaxed)
	reqs := slices.Clone(n.Requirements)
	if !slices.ContainsFunc(reqs, func(r karpv1.NodeSelectorRequirementWithMinValues) bool { return r.Key == wellknown.NodePoolLabel }) {
		reqs = append(reqs, karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{np.Name}})
	}
	tmpl := np.Spec.Template.Spec
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       labels,
			Annotations:  annotations,
			Finalizers:   []string{wellknown.TerminationFinalizer},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool", Name: np.Name, UID: np.UID, BlockOwnerDeletion: new(true),
			}},
		},
		Spec: karpv1.NodeClaimSpec{
			Taints:                 n.Taints,
			StartupTaints:          n.StartupTaints,
			Requirements:           reqs,
			Resources:              karpv1.ResourceRequirements{Requests: n.Requests},
			NodeClassRef:           tmpl.NodeClassRef,
			TerminationGracePeriod: tmpl.TerminationGracePeriod,
			ExpireAfter:            tmpl.ExpireAfterOrDefault(),
		},
	}
}

// NewClaim asks for one NodeClaim to be created and launched (the
// disruption tick's replacements).
type NewClaim struct {
	// Claim is the simulated claim (NodeClaimFor builds the object).
	Claim *scheduling.NewNodeClaim
	// Name, when set, replaces generateName: creating the same name twice
	// finds the first instead of launching a second node.
	Name string
	// Annotations are added to the object.
	Annotations map[string]string
	// Reason labels the karpenter_nodeclaims_created_total metric.
	Reason string
}
