package whatif

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
	"github.com/karpless/karpless/shared/core/cluster"
)

// The snapshot file's identity. Version grows when a change would make an
// older reader misread a newer file; readers refuse versions they do not
// know.
const (
	FileKind    = "KarplessSnapshot"
	FileVersion = 1
)

// File is a saved snapshot: the cluster objects decisions read and the
// market the functions keep, redacted.
type File struct {
	Kind    string    `json:"kind"`
	Version int       `json:"version"`
	TakenAt time.Time `json:"takenAt"`
	// Source says where it was taken (kubeconfig context, API server).
	Source string `json:"source,omitempty"`
	// Namespace is where the functions keep their ConfigMaps and leases.
	Namespace string `json:"namespace,omitempty"`
	// Redacted lists what was removed before saving, for the reader.
	Redacted []string `json:"redacted,omitempty"`
	Market   Market   `json:"market"`
	Objects  Objects  `json:"objects"`
}

// Objects are the snapshot's objects (see shared/kube/snapshot).
type Objects struct {
	Pods              []*corev1.Pod                   `json:"pods"`
	Nodes             []*corev1.Node                  `json:"nodes"`
	NodeClaims        []*karpv1.NodeClaim             `json:"nodeClaims"`
	NodePools         []*karpv1.NodePool              `json:"nodePools"`
	EC2NodeClasses    []*awsv1.EC2NodeClass           `json:"ec2NodeClasses"`
	NodeOverlays      []*v1alpha1.NodeOverlay         `json:"nodeOverlays,omitempty"`
	DaemonSets        []*appsv1.DaemonSet             `json:"daemonSets,omitempty"`
	PDBs              []*policyv1.PodDisruptionBudget `json:"podDisruptionBudgets,omitempty"`
	PVCs              []*corev1.PersistentVolumeClaim `json:"persistentVolumeClaims,omitempty"`
	PVs               []*corev1.PersistentVolume      `json:"persistentVolumes,omitempty"`
	StorageClasses    []*storagev1.StorageClass       `json:"storageClasses,omitempty"`
	CSINodes          []*storagev1.CSINode            `json:"csiNodes,omitempty"`
	VolumeAttachments []*storagev1.VolumeAttachment   `json:"volumeAttachments,omitempty"`
	// CapacityBuffers keep what each buffer's reference resolved to (its
	// pod template, trimmed as pods are).
	CapacityBuffers []*cluster.CapacityBuffer `json:"capacityBuffers,omitempty"`
}

// redactions are what NewFile removes; written into every file.
var redactions = []string{
	"pods and DaemonSet pod templates: containers keep only name, resources, restart policy and host ports (no image, command, args, env, mounts, probes); volumes other than PVCs and ephemeral volumes",
	"annotations: only those decisions read (karpenter.sh/*, karpenter.k8s.aws/*, karpless.dev/*, the mirror-pod annotation); kubectl's last-applied-configuration and every other annotation are dropped",
	"EC2NodeClass spec.userData",
	"managedFields",
	"Secrets and ConfigMaps are never read (except Karpless's karpless-pricing and karpless-unavailable-offerings)",
}

// NewFile makes a redacted File from a snapshot. The snapshot is not
// modified.
func NewFile(snap *cluster.Snapshot, m Market, takenAt time.Time, source, namespace string) *File {
	f := &File{Kind: FileKind, Version: FileVersion, TakenAt: takenAt.UTC(), Source: source, Namespace: namespace, Redacted: redactions, Market: m}
	o := &f.Objects
	for _, p := range snap.Pods {
		o.Pods = append(o.Pods, redactPod(p))
	}
	for _, n := range snap.Nodes {
		n = cluster.TrimNode(n)
		redactMeta(n)
		o.Nodes = append(o.Nodes, n)
	}
	o.NodeClaims = redactedCopies(snap.NodeClaims)
	o.NodePools = redactedCopies(snap.NodePools)
	o.EC2NodeClasses = redactedCopies(snap.NodeClasses)
	o.NodeOverlays = redactedCopies(snap.NodeOverlays)
	for _, c := range o.EC2NodeClasses {
		c.Spec.UserData = nil
	}
	for _, d := range snap.DaemonSets {
		d = d.DeepCopy()
		redactMeta(d)
		tmpl := redactPod(&corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec})
		d.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
		d.Status = appsv1.DaemonSetStatus{}
		o.DaemonSets = append(o.DaemonSets, d)
	}
	o.PDBs = redactedCopies(snap.PDBs)
	o.PVCs = redactedCopies(snap.PVCs)
	o.PVs = redactedCopies(snap.PVs)
	o.StorageClasses = redactedCopies(snap.StorageClasses)
	o.CSINodes = redactedCopies(snap.CSINodes)
	o.VolumeAttachments = redactedCopies(snap.VolumeAttachments)
	for _, cb := range snap.CapacityBuffers {
		c := *cb
		c.Buffer = cb.Buffer.DeepCopy()
		redactMeta(c.Buffer)
		if cb.Template != nil {
			tmpl := redactPod(&corev1.Pod{ObjectMeta: cb.Template.ObjectMeta, Spec: cb.Template.Spec})
			c.Template = &corev1.PodTemplateSpec{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
		}
		o.CapacityBuffers = append(o.CapacityBuffers, &c)
	}
	return f
}

// redactPod is the snapshot's trimmed pod (no image, command, args or env)
// with the redacted annotations.
func redactPod(p *corev1.Pod) *corev1.Pod {
	out := cluster.TrimPod(p)
	redactMeta(out)
	return out
}

// redactedCopies deep-copies each object and redacts its metadata.
func redactedCopies[T interface {
	metav1.Object
	DeepCopy() T
}](in []T) []T {
	var out []T
	for _, o := range in {
		o = o.DeepCopy()
		redactMeta(o)
		out = append(out, o)
	}
	return out
}

// keptPrefixes are the annotation namespaces decisions read on any object.
var keptPrefixes = []string{"karpenter.sh/", "karpenter.k8s.aws/", "karpless.dev/"}

// keptAnnotations are other annotations decisions read.
var keptAnnotations = map[string]bool{
	corev1.MirrorPodAnnotationKey: true,
	corev1.PodDeletionCost:        true,
}

func redactMeta(m metav1.Object) {
	m.SetManagedFields(nil)
	var kept map[string]string
	for k, v := range m.GetAnnotations() {
		keep := keptAnnotations[k]
		for _, p := range keptPrefixes {
			keep = keep || strings.HasPrefix(k, p)
		}
		if keep {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[k] = v
		}
	}
	m.SetAnnotations(kept)
}

// Snapshot is the file's objects as a snapshot.
func (f *File) Snapshot() *cluster.Snapshot {
	o := f.Objects
	return &cluster.Snapshot{
		Pods: o.Pods, Nodes: o.Nodes, NodeClaims: o.NodeClaims, NodePools: o.NodePools, NodeClasses: o.EC2NodeClasses,
		NodeOverlays: o.NodeOverlays, DaemonSets: o.DaemonSets, PDBs: o.PDBs, PVCs: o.PVCs, PVs: o.PVs, StorageClasses: o.StorageClasses,
		CSINodes: o.CSINodes, VolumeAttachments: o.VolumeAttachments, CapacityBuffers: o.CapacityBuffers,
	}
}

// Input is the file as an Input, its time the moment it was taken.
func (f *File) Input() Input {
	return Input{Cluster: f.Snapshot(), Market: f.Market, Options: Options{Now: f.TakenAt}}
}

// Write saves the file as JSON, gzip-compressed when compress is set.
func (f *File) Write(w io.Writer, compress bool) error {
	var zw *gzip.Writer
	if compress {
		zw = gzip.NewWriter(w)
		w = zw
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetIndent("", " ")
	if err := enc.Encode(f); err != nil {
		return fmt.Errorf("writing snapshot: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing snapshot: %w", err)
	}
	if zw != nil {
		return zw.Close()
	}
	return nil
}

// ReadFile loads a file written by Write, compressed or not.
func ReadFile(r io.Reader) (*File, error) {
	br := bufio.NewReader(r)
	if magic, err := br.Peek(2); err == nil && bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("reading snapshot: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	var head struct {
		Kind    string `json:"kind"`
		Version int    `json:"version"`
	}
	raw, err := io.ReadAll(br)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot: %w", err)
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("not a snapshot file (want JSON written by karpless snapshot): %w", err)
	}
	switch {
	case head.Kind != FileKind:
		return nil, fmt.Errorf("not a snapshot file: kind %q, want %q (written by karpless snapshot)", head.Kind, FileKind)
	case head.Version < 1 || head.Version > FileVersion:
		return nil, fmt.Errorf("snapshot file version %d is not supported by this karpless (it reads version %d): use a karpless of the same release as the one that wrote it", head.Version, FileVersion)
	}
	f := &File{}
	if err := json.Unmarshal(raw, f); err != nil {
		return nil, fmt.Errorf("reading snapshot: %w", err)
	}
	return f, nil
}
