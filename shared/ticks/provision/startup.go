package provision

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The pod metrics of Karpenter's pod metrics controller (core
// pkg/controllers/metrics/pod/controller.go), both without labels.
const (
	// podStartupMetric is the time from a pod's creation to its Ready
	// condition turning True ("until the pod is running"): a Summary there,
	// each value kept here.
	podStartupMetric = "karpenter_pods_startup_duration_seconds"
	// podBoundMetric is the time from a pod's creation to its PodScheduled
	// condition turning True, when a scheduler bound it.
	podBoundMetric = "karpenter_pods_bound_duration_seconds"
)

// How a tick observes each pod once without remembering anything: Karpenter
// keeps the pods it saw pending in memory and observes each when it turns
// Ready (or bound); a tick starts cold. Instead, the first pass of each
// scheduled provisioner tick (Run) observes the pods whose Ready (or
// PodScheduled) condition turned True in the minute that ends podTimingLag
// before the pass: ticks a minute apart tile time, so each transition falls
// in one tick's window. Passes of the same tick's watch window, and the
// passes other functions borrow (interruption, disruption), observe
// nothing: the next tick's window covers their time.
//
// What this misses, or counts twice: a tick that does not run its pass (the
// lease held by another invocation, a tick that failed before its
// snapshot) loses its minute; ticks that EventBridge delivers less or more
// than a minute apart leave a gap or an overlap of the difference; a pod
// that finished (Succeeded, Failed) before the tick is not in the
// snapshot.
const (
	// podTimingWindow is the provisioner's schedule period (rate(1 minute)).
	podTimingWindow = time.Minute
	// podTimingLag is how far behind the pass the window ends: the kubelet
	// stamps Ready with its node's clock and reports it moments later, the
	// scheduler its binding likewise; a transition stamped just before
	// the pass may not have reached the API server by its list.
	podTimingLag = 10 * time.Second
	// podReadyAfterStartMax keeps a pod that turns Ready again later (a
	// readiness probe that failed for a while) from being observed again
	// with the whole of its life, which Karpenter, observing each pod once,
	// never does: a Ready transition counts only within this long of the
	// kubelet's start of the pod (status.startTime), which covers image
	// pulls, init containers and slow readiness probes.
	podReadyAfterStartMax = 30 * time.Minute
)

// podTimings are the startup and bound durations, in seconds, of the pods
// whose Ready, respectively PodScheduled, condition turned True within
// (from, to].
func podTimings(pods []*corev1.Pod, from, to time.Time) (startup, bound []float64) {
	in := func(t time.Time) bool { return t.After(from) && !t.After(to) }
	for _, p := range pods {
		created := p.CreationTimestamp.Time
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue || !in(c.LastTransitionTime.Time) || c.LastTransitionTime.Time.Before(created) {
				continue
			}
			d := c.LastTransitionTime.Sub(created).Seconds()
			switch c.Type {
			case corev1.PodReady:
				if st := p.Status.StartTime; st != nil && c.LastTransitionTime.Sub(st.Time) > podReadyAfterStartMax {
					continue
				}
				startup = append(startup, d)
			case corev1.PodScheduled:
				bound = append(bound, d)
			}
		}
	}
	return startup, bound
}

// recordPodTimings observes the startup and bound durations of the pods
// of a pass's snapshot, taken at snapAt (see podTimingWindow).
func (p *Provisioner) recordPodTimings(pods []*corev1.Pod, snapAt time.Time) {
	to := snapAt.Add(-podTimingLag)
	startup, bound := podTimings(pods, to.Add(-podTimingWindow), to)
	for _, v := range startup {
		p.Metrics.Observe(podStartupMetric, "Seconds", v, nil)
	}
	for _, v := range bound {
		p.Metrics.Observe(podBoundMetric, "Seconds", v, nil)
	}
}
