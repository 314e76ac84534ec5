package cluster

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Trimmer trims the pods of one snapshot as TrimPod does, and shares what
// many pods hold alike: the pods of one ReplicaSet have the same
// containers, labels, tolerations and owner, and the decoder gives each
// its own copy. Held once, a 50,000-pod cluster takes about half the
// memory (shared/local/scale BenchmarkScale, snapshot). A snapshot is
// read-only, so the shared parts are never written; a decision that
// changes a pod works on a DeepCopy, as the simulator does. One Trimmer
// per snapshot: it keeps every distinct value it met until dropped.
type Trimmer struct {
	affinities map[string]*corev1.Affinity
	spreads    map[string][]corev1.TopologySpreadConstraint
	resources  map[string]corev1.ResourceList
	containers map[string][]corev1.Container
	// stringMaps holds labels and node selectors alike: both are
	// read-only maps of strings.
	stringMaps  map[string]map[string]string
	tolerations map[string][]corev1.Toleration
	owners      map[string][]metav1.OwnerReference
	strs        map[string]string
	key         strings.Builder
}

// NewTrimmer is a Trimmer for one snapshot.
func NewTrimmer() *Trimmer {
	return &Trimmer{
		containers: map[string][]corev1.Container{}, stringMaps: map[string]map[string]string{},
		tolerations: map[string][]corev1.Toleration{}, owners: map[string][]metav1.OwnerReference{},
		strs: map[string]string{}, affinities: map[string]*corev1.Affinity{},
		spreads: map[string][]corev1.TopologySpreadConstraint{}, resources: map[string]corev1.ResourceList{},
	}
}

// Pod is TrimPod(p) with its common parts shared.
func (t *Trimmer) Pod(p *corev1.Pod) *corev1.Pod {
	out := TrimPod(p)
	out.Namespace = t.str(out.Namespace)
	out.Labels = t.stringMapOf(out.Labels)
	out.OwnerReferences = t.ownersOf(out.OwnerReferences)
	out.Spec.NodeName = t.str(out.Spec.NodeName)
	out.Spec.SchedulerName = t.str(out.Spec.SchedulerName)
	out.Spec.PriorityClassName = t.str(out.Spec.PriorityClassName)
	out.Spec.Tolerations = t.tolerationsOf(out.Spec.Tolerations)
	out.Spec.NodeSelector = t.stringMapOf(out.Spec.NodeSelector)
	out.Spec.Affinity = t.affinityOf(out.Spec.Affinity)
	out.Spec.TopologySpreadConstraints = t.spreadsOf(out.Spec.TopologySpreadConstraints)
	out.Spec.Containers = t.containersOf(out.Spec.Containers)
	out.Spec.InitContainers = t.containersOf(out.Spec.InitContainers)
	return out
}

// Node is TrimNode(n) with its capacity and allocatable shared (nodes of
// one type and configuration report the same).
func (t *Trimmer) Node(n *corev1.Node) *corev1.Node {
	out := TrimNode(n)
	out.Status.Capacity = t.resourcesOf(out.Status.Capacity)
	out.Status.Allocatable = t.resourcesOf(out.Status.Allocatable)
	return out
}

func (t *Trimmer) resourcesOf(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	t.key.Reset()
	for _, name := range slices.Sorted(maps.Keys(l)) {
		q := l[name]
		t.field(string(name))
		t.field(q.String())
	}
	return shared(t, t.resources, l)
}

// affinityOf and spreadsOf key by the protobuf encoding, which is
// deterministic for these types (no maps).
func (t *Trimmer) affinityOf(a *corev1.Affinity) *corev1.Affinity {
	if a == nil {
		return nil
	}
	b, err := a.Marshal()
	if err != nil {
		return a
	}
	t.key.Reset()
	t.key.Write(b)
	return shared(t, t.affinities, a)
}

func (t *Trimmer) spreadsOf(ts []corev1.TopologySpreadConstraint) []corev1.TopologySpreadConstraint {
	if len(ts) == 0 {
		return ts
	}
	t.key.Reset()
	for i := range ts {
		b, err := ts[i].Marshal()
		if err != nil {
			return ts
		}
		t.key.Write(b)
		t.key.WriteByte(0)
	}
	return shared(t, t.spreads, ts)
}

func (t *Trimmer) str(s string) string {
	if s == "" {
		return s
	}
	if v, ok := t.strs[s]; ok {
		return v
	}
	t.strs[s] = s
	return s
}

// shared returns the value kept under the key built so far, or keeps v.
func shared[V any](t *Trimmer, m map[string]V, v V) V {
	k := t.key.String()
	if old, ok := m[k]; ok {
		return old
	}
	m[k] = v
	return v
}

func (t *Trimmer) field(s string) { t.key.WriteString(s); t.key.WriteByte(0) }

// stringMapOf shares a map of strings (labels, a node selector).
func (t *Trimmer) stringMapOf(l map[string]string) map[string]string {
	if len(l) == 0 {
		return l
	}
	t.key.Reset()
	for _, k := range slices.Sorted(maps.Keys(l)) {
		t.field(k)
		t.field(l[k])
	}
	return shared(t, t.stringMaps, l)
}

func (t *Trimmer) ownersOf(o []metav1.OwnerReference) []metav1.OwnerReference {
	if len(o) == 0 {
		return o
	}
	t.key.Reset()
	for _, r := range o {
		t.field(r.APIVersion)
		t.field(r.Kind)
		t.field(r.Name)
		t.field(string(r.UID))
		t.field(boolPtr(r.Controller))
		t.field(boolPtr(r.BlockOwnerDeletion))
	}
	return shared(t, t.owners, o)
}

func (t *Trimmer) tolerationsOf(ts []corev1.Toleration) []corev1.Toleration {
	if len(ts) == 0 {
		return ts
	}
	t.key.Reset()
	for _, x := range ts {
		t.field(x.Key)
		t.field(string(x.Operator))
		t.field(x.Value)
		t.field(string(x.Effect))
		if x.TolerationSeconds != nil {
			t.field(strconv.FormatInt(*x.TolerationSeconds, 10))
		} else {
			t.field("-")
		}
	}
	return shared(t, t.tolerations, ts)
}

// containersOf shares trimmed containers (name, resources, restart
// policy, host ports: what trimContainers keeps).
func (t *Trimmer) containersOf(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return cs
	}
	t.key.Reset()
	for _, c := range cs {
		t.field(c.Name)
		if c.RestartPolicy != nil {
			t.field(string(*c.RestartPolicy))
		} else {
			t.field("-")
		}
		for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for _, name := range slices.Sorted(maps.Keys(l)) {
				q := l[name]
				t.field(string(name))
				t.field(q.String())
			}
			t.field("|")
		}
		for _, rc := range c.Resources.Claims {
			t.field(rc.Name)
			t.field(rc.Request)
		}
		t.field("|")
		for _, p := range c.Ports {
			t.field(strconv.Itoa(int(p.HostPort)))
			t.field(strconv.Itoa(int(p.ContainerPort)))
			t.field(string(p.Protocol))
			t.field(p.HostIP)
			t.field(p.Name)
		}
		t.key.WriteByte(1)
	}
	return shared(t, t.containers, cs)
}

func boolPtr(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "t"
	default:
		return "f"
	}
}
