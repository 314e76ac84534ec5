package scheduling

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodRequests is what a pod needs from a node, with Kubernetes scheduler
// semantics: the larger of the containers' sum and each init container
// (restartable init containers, i.e. sidecars, add to both), plus pod
// overhead, and the resources an in-place resize already allocated. The pods
// resource is set to 1.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	if out := containerRequests(pod); out != nil {
		return out
	}
	out := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{UseStatusResources: true})
	out[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return out
}

// containerRequests is PodRequests for the usual pending pod: no init
// containers, overhead or pod-level resources, and no status the resize
// rules read (container statuses, allocated resources, claim statuses).
// For such a pod the helper's answer is the sum of its containers'
// requests; summed here into one map, it costs a tenth of the helper's
// several maps and copies, which were most of a solve's allocations at
// 5,000 pods. Any other pod gets nil, and the helper.
func containerRequests(pod *corev1.Pod) corev1.ResourceList {
	if !plainRequests(pod) {
		return nil
	}
	n := 1
	for i := range pod.Spec.Containers {
		n += len(pod.Spec.Containers[i].Resources.Requests)
	}
	out := make(corev1.ResourceList, n)
	for i := range pod.Spec.Containers {
		for name, q := range pod.Spec.Containers[i].Resources.Requests {
			if sum, ok := out[name]; ok {
				sum.Add(q)
				out[name] = sum
			} else {
				out[name] = q.DeepCopy()
			}
		}
	}
	out[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return out
}

// plainRequests reports whether the pod's requests are the sum of its
// containers' requests (plus one pod slot): no init containers, overhead
// or pod-level resources, and no status the resize rules read.
func plainRequests(pod *corev1.Pod) bool {
	st := &pod.Status
	return len(pod.Spec.InitContainers) == 0 && pod.Spec.Overhead == nil && pod.Spec.Resources == nil &&
		len(st.ContainerStatuses) == 0 && len(st.InitContainerStatuses) == 0 && st.Resources == nil &&
		st.AllocatedResources == nil && len(st.NodeAllocatableResourceClaimStatuses) == 0 &&
		!resourcehelper.IsPodResizeInfeasible(pod)
}

// SumRequests is the total PodRequests of the pods that hold resources on
// a node (not finished, not terminating): Node.Requested.
func SumRequests(pods []*corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, p := range pods {
		if ignoredForTopology(p) {
			continue
		}
		for name, q := range PodRequests(p) {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	return out
}

// dims interns resource names into vector positions. cpu is kept in
// millicores, everything else in whole units (bytes for memory).
type dims struct {
	names []corev1.ResourceName
	index map[corev1.ResourceName]int
}

const (
	dimCPU = iota
	dimMemory
	dimPods
	dimEphemeral
	numFixedDims
)

func newDims() *dims {
	d := &dims{index: map[corev1.ResourceName]int{}}
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
		d.add(n)
	}
	return d
}

func (d *dims) add(n corev1.ResourceName) int {
	if i, ok := d.index[n]; ok {
		return i
	}
	d.index[n] = len(d.names)
	d.names = append(d.names, n)
	return len(d.names) - 1
}

func (d *dims) addList(l corev1.ResourceList) {
	for n := range l {
		d.add(n)
	}
}

func (d *dims) n() int { return len(d.names) }

// vec converts a resource list into a vector; names not interned are dropped.
func (d *dims) vec(l corev1.ResourceList) []int64 {
	v := make([]int64, len(d.names))
	d.into(v, l)
	return v
}

func (d *dims) into(v []int64, l corev1.ResourceList) {
	for n, q := range l {
		i, ok := d.index[n]
		if !ok {
			continue
		}
		if i == dimCPU {
			v[i] = q.MilliValue()
		} else {
			v[i] = q.Value()
		}
	}
}

// list converts a vector back, omitting zeros except cpu, memory and pods.
func (d *dims) list(v []int64) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i, x := range v {
		if x == 0 && i > dimPods {
			continue
		}
		switch i {
		case dimCPU:
			out[d.names[i]] = *resource.NewMilliQuantity(x, resource.DecimalSI)
		case dimMemory, dimEphemeral:
			out[d.names[i]] = *resource.NewQuantity(x, resource.BinarySI)
		default:
			out[d.names[i]] = *resource.NewQuantity(x, resource.DecimalSI)
		}
	}
	return out
}

// format renders the non-zero entries of v for people: "cpu=1500m memory=2Gi".
func (d *dims) format(v []int64) string {
	l := d.list(v)
	names := make([]string, 0, len(l))
	for n, q := range l {
		if q.IsZero() {
			continue
		}
		names = append(names, string(n)+"="+q.String())
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

func quantityString(d *dims, i int, x int64) string {
	switch i {
	case dimCPU:
		return resource.NewMilliQuantity(x, resource.DecimalSI).String()
	case dimMemory, dimEphemeral:
		return humanBytes(x)
	}
	return fmt.Sprint(x)
}

// humanBytes prints a byte count in the largest binary unit that keeps one
// decimal of precision, as people write memory requests.
func humanBytes(b int64) string {
	const unit = 1024
	units := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi"}
	f := float64(b)
	i := 0
	for f >= unit && i < len(units)-1 {
		f /= unit
		i++
	}
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d%s", int64(f), units[i])
	}
	return fmt.Sprintf("%.1f%s", f, units[i])
}

// fits reports whether req fits into avail in every dimension.
func fits(req, avail []int64) bool {
	for i, r := range req {
		if r > avail[i] {
			return false
		}
	}
	return true
}

// firstShort returns the first dimension where req exceeds avail, or -1.
func firstShort(req, avail []int64) int {
	for i, r := range req {
		if r > avail[i] {
			return i
		}
	}
	return -1
}

func addInto(dst, src []int64) {
	for i, x := range src {
		dst[i] += x
	}
}

func subInto(dst, src []int64) {
	for i, x := range src {
		dst[i] -= x
	}
}
