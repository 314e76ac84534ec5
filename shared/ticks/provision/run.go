package provision

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/function/clockctx"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/tick"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/lease"
)

// Run is one provisioner invocation. holder identifies it in the lease (the
// Lambda request id). A concurrent invocation finds the lease held and
// returns at once, doing nothing.
func (p *Provisioner) Run(ctx context.Context, holder string) (Summary, error) {
	start := p.Clock.Now()
	if err := p.validate(); err != nil {
		return Summary{}, err
	}
	p.prepare()
	var sum Summary
	var errs []error
	sk := p.skeleton(holder, 0)
	// After each pass, the metrics so far are written and the summary so
	// far logged: a tick killed later loses only the pass under way.
	checkpoint := func() {
		so := sum
		so.Duration = p.Clock.Since(start)
		sk.Checkpoint("provisioning pass done", so)
	}
	held, err := sk.Run(ctx, func(ctx context.Context, l *lease.Lease) error {
		inv := &invocation{resolved: map[string]bool{}, guard: l.Hold, podTimings: !p.OffSchedule}
		r, err := p.pass(ctx, inv)
		sum.add(r)
		if err != nil {
			errs = append(errs, err)
		}
		checkpoint()
		if r.work && p.Config.WatchWindow > 0 {
			wctx, cancel := clockctx.WithDeadline(ctx, p.Clock, p.deadline(ctx, start))
			err := p.watch(wctx, l, inv, &sum, r.deferred > 0, checkpoint, sk.FlushMetrics)
			cancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				errs = append(errs, err)
			}
		}
		return nil
	})
	if errors.Is(err, tick.ErrPaused) {
		sum = Summary{Paused: true, Skipped: "paused (karpless resume to resume)", Duration: p.Clock.Since(start)}
		p.Log.Info("provisioning tick done", "summary", sum)
		return sum, nil
	}
	if err != nil {
		return Summary{}, err
	}
	if !held {
		p.Log.Info("another invocation holds the provisioning lease; nothing to do", "holder", holder)
		return Summary{Skipped: "lease held by another invocation"}, nil
	}
	sum.Duration = p.Clock.Since(start)
	for _, e := range errs {
		sum.Errors = append(sum.Errors, e.Error())
	}
	p.Log.Info("provisioning tick done", "summary", sum)
	return sum, errors.Join(errs...)
}

// skeleton is the provisioning lease's invocation skeleton; wait > 0 asks
// a running tick to hand over (interruption).
func (p *Provisioner) skeleton(holder string, wait time.Duration) tick.Skeleton {
	return tick.Skeleton{
		Leases: p.Kube.Core.CoordinationV1(), Namespace: p.Config.Namespace, Lease: LeaseName, Holder: holder,
		Duration: p.Config.LeaseDuration, Wait: wait, Margin: p.Config.DeadlineMargin, Clock: p.Clock, Log: p.Log,
		Events: p.Events, Metrics: p.Metrics, MetricsOut: p.MetricsOut,
		Pause: p.Kube.Core.CoreV1(),
	}
}

func (p *Provisioner) prepare() {
	if p.Metrics == nil {
		p.Metrics = record.NewMetricsAt("Karpless", record.Level(p.Config.MetricsLevel))
	}
	if p.Events == nil {
		p.Events = record.NewRecorder(p.Kube.Core.CoreV1(), p.Clock, p.Log)
	}
}

// PassWithLease runs one pass for another function (interruption, to launch
// replacements at once): it takes the provisioning lease, asking a running
// tick to hand over and waiting up to wait, and releases it after. It
// returns false when the lease could not be had in time; the provisioner's
// own tick then covers the work. While Karpless is paused it returns
// tick.ErrPaused and launches nothing (karpless_paused goes to the
// caller's metrics).
func (p *Provisioner) PassWithLease(ctx context.Context, holder string, wait time.Duration) (bool, error) {
	if err := p.validate(); err != nil {
		return false, err
	}
	p.prepare()
	sk := p.skeleton(holder, wait)
	// The caller flushes its own Events and metrics.
	sk.Events, sk.MetricsOut = nil, nil
	return sk.Run(ctx, func(ctx context.Context, l *lease.Lease) error {
		_, err := p.passOnce(ctx, &invocation{resolved: map[string]bool{}, guard: l.Hold})
		return err
	})
}

// deadline is the end of the watch window: the window's length after start,
// but never later than the invocation's deadline (ctx already carries the
// margin).
func (p *Provisioner) deadline(ctx context.Context, start time.Time) time.Time {
	end := start.Add(p.Config.WatchWindow)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	return end
}

// watch keeps reacting to unschedulable pods until the deadline: a batch
// starts with the first such pod and closes after BatchIdle without another
// or BatchMax in all, then a pass runs. Between batches, in-flight claims are
// advanced so nodes become ready without waiting for the next tick.
// After each pass it calls checkpoint, and after advancing claims
// flushMetrics. While a pass leaves pods for the next (more, at first),
// the next pass runs after BatchIdle, without waiting for a pod event.
func (p *Provisioner) watch(ctx context.Context, l *lease.Lease, inv *invocation, sum *Summary, more bool, checkpoint, flushMetrics func()) error {
	w, err := p.Kube.Core.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
	if err != nil {
		return fmt.Errorf("watching pending pods: %w", err)
	}
	defer w.Stop()
	renew := p.Clock.NewTicker(timing.LeaseRenewEvery(p.Config.LeaseDuration))
	defer renew.Stop()
	advance := p.Clock.NewTicker(timing.LifecycleEvery)
	defer advance.Stop()
	var batchStart, lastPod time.Time
	batching := false
	// again opens a batch as a new pod would: the next pass runs after
	// BatchIdle, not in a tight loop if passes keep failing.
	again := func() {
		now := p.Clock.Now()
		batching, batchStart, lastPod = true, now, now
	}
	if more {
		again()
	}
	idle := p.Clock.NewTicker(100 * time.Millisecond)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The API server closed the watch (timeout): reopen it.
				w.Stop()
				if w, err = p.Kube.Core.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName="}); err != nil {
					return fmt.Errorf("re-watching pending pods: %w", err)
				}
				continue
			}
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || !podutil.IsProvisionable(pod) {
				continue
			}
			now := p.Clock.Now()
			if !batching {
				batching, batchStart = true, now
			}
			lastPod = now
		case <-idle.C():
			if !batching {
				continue
			}
			now := p.Clock.Now()
			if now.Sub(lastPod) < p.Config.BatchIdle && now.Sub(batchStart) < p.Config.BatchMax {
				continue
			}
			batching = false
			r, err := p.pass(ctx, inv)
			sum.add(r)
			if err != nil {
				sum.Errors = append(sum.Errors, err.Error())
				p.Log.Warn("provisioning pass", "error", err)
			}
			checkpoint()
			if r.deferred > 0 {
				again()
			}
		case <-advance.C():
			if batching {
				continue
			}
			if err := p.advance(ctx, inv, sum); err != nil {
				p.Log.Warn("advancing nodeclaims", "error", err)
			}
			flushMetrics()
		case <-renew.C():
			handover, err := l.Renew(ctx)
			if err != nil {
				return err
			}
			if handover {
				p.Log.Info("hand-over requested; ending the watch window")
				return nil
			}
		}
	}
}

// advance runs the lifecycle on NodeClaims that are not initialized yet,
// reading only NodeClaims, Nodes and node classes, not a whole snapshot.
func (p *Provisioner) advance(ctx context.Context, inv *invocation, sum *Summary) error {
	if p.shadow() {
		return nil // Karpenter's claims: Karpenter advances them
	}
	claims, err := kube.AllNodeClaims(ctx, p.Kube)
	if err != nil {
		return err
	}
	var moving []*karpv1.NodeClaim
	for _, nc := range claims {
		if !nc.IsTrue(karpv1.ConditionTypeInitialized) {
			moving = append(moving, nc)
		}
	}
	if len(moving) == 0 {
		return nil
	}
	if err := p.openCloud(ctx, inv); err != nil {
		return err
	}
	defer inv.cloud.Close(ctx)
	ns, err := p.nodesOf(ctx, moving)
	if err != nil {
		return err
	}
	classes, err := p.Kube.EC2NodeClasses.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing ec2nodeclasses: %w", err)
	}
	var ncs []*awsv1.EC2NodeClass
	for i := range classes.Items {
		ncs = append(ncs, &classes.Items[i])
	}
	inv.cloud.ZonalShift(inv.shifted, claims, ncs)
	if err := inv.cloud.Use(ctx, ncs); err != nil {
		return err
	}
	inv.applyOverlays()
	r, err := p.reconcileClaims(ctx, inv, moving, ns)
	sum.add(passResult{lifecycle: r.lifecycle})
	return err
}

// nodesOf reads the Nodes the lifecycle of claims needs, as cheaply as the
// watch window's every-2-s rhythm requires: a registered claim's node by
// name; all Nodes (in pages) only while a launched claim waits for its node
// to register, since only the provider ID can tell which one it is.
func (p *Provisioner) nodesOf(ctx context.Context, claims []*karpv1.NodeClaim) ([]*corev1.Node, error) {
	var names []string
	for _, nc := range claims {
		switch {
		case nc.IsTrue(karpv1.ConditionTypeLaunched) && !nc.IsTrue(karpv1.ConditionTypeRegistered):
			return kube.AllNodes(ctx, p.Kube)
		case nc.Status.NodeName != "":
			names = append(names, nc.Status.NodeName)
		}
	}
	var out []*corev1.Node
	for _, name := range names {
		n, err := p.Kube.Core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading node %s: %w", name, err)
		}
		out = append(out, n)
	}
	return out, nil
}
