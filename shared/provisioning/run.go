package provisioning

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/lease"
	"github.com/karpless/karpless/shared/lifecycle"
	"github.com/karpless/karpless/shared/podutil"
	"github.com/karpless/karpless/shared/record"
)

// renewEvery is how often the watch window renews the lease.
const renewEvery = 10 * time.Second

// lifecycleEvery is how often the watch window advances in-flight claims
// (registration and initialization) between pod batches.
const lifecycleEvery = 2 * time.Second

// Run is one provisioner invocation. holder identifies it in the lease (the
// Lambda request id). A concurrent invocation finds the lease held and
// returns at once, doing nothing.
func (p *Provisioner) Run(ctx context.Context, holder string) (Summary, error) {
	start := p.Clock.Now()
	if err := p.validate(); err != nil {
		return Summary{}, err
	}
	p.prepare()
	defer func() {
		// Events and metrics must be out before the Lambda is frozen.
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		p.Events.Flush(flushCtx)
		if p.MetricsOut != nil {
			_ = p.Metrics.Flush(p.MetricsOut, p.Clock.Now().UnixMilli())
		}
	}()
	l := lease.New(p.Kube.Core.CoordinationV1(), p.Config.Namespace, LeaseName, holder, p.Config.LeaseDuration, p.Clock)
	ok, err := l.TryAcquire(ctx)
	if err != nil {
		return Summary{}, err
	}
	if !ok {
		p.Log.Info("another invocation holds the provisioning lease; nothing to do", "holder", holder)
		return Summary{Skipped: "lease held by another invocation"}, nil
	}
	defer func() {
		relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		if err := l.Release(relCtx); err != nil {
			p.Log.Warn("releasing lease", "error", err)
		}
	}()

	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-p.Config.DeadlineMargin))
		defer cancel()
	}

	inv := &invocation{resolved: map[string]bool{}}
	var sum Summary
	var errs []error
	r, err := p.pass(ctx, inv)
	sum.add(r)
	if err != nil {
		errs = append(errs, err)
	}
	if r.work && p.Config.WatchWindow > 0 {
		wctx, cancel := context.WithDeadline(ctx, p.deadline(ctx, start))
		err := p.watch(wctx, l, inv, &sum)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, err)
		}
	}
	sum.Duration = p.Clock.Since(start)
	for _, e := range errs {
		sum.Errors = append(sum.Errors, e.Error())
	}
	p.Log.Info("provisioning tick done", "summary", sum)
	return sum, errors.Join(errs...)
}

func (p *Provisioner) prepare() {
	if p.Metrics == nil {
		p.Metrics = record.NewMetrics("Karpless")
	}
	if p.Events == nil {
		p.Events = record.NewRecorder(p.Kube.Core.CoreV1(), p.Clock, p.Log)
	}
}

// PassWithLease runs one pass for another function (interruption, to launch
// replacements at once): it takes the provisioning lease, asking a running
// tick to hand over and waiting up to wait, and releases it after. It
// returns false when the lease could not be had in time; the provisioner's
// own tick then covers the work.
func (p *Provisioner) PassWithLease(ctx context.Context, holder string, wait time.Duration) (bool, error) {
	if err := p.validate(); err != nil {
		return false, err
	}
	p.prepare()
	l := lease.New(p.Kube.Core.CoordinationV1(), p.Config.Namespace, LeaseName, holder, p.Config.LeaseDuration, p.Clock)
	sleep := func(ctx context.Context, d time.Duration) error {
		t := p.Clock.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
			return nil
		}
	}
	ok, err := l.Acquire(ctx, wait, 200*time.Millisecond, sleep)
	if err != nil || !ok {
		return false, err
	}
	defer func() {
		relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		_ = l.Release(relCtx)
	}()
	_, err = p.Pass(ctx)
	return true, err
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
func (p *Provisioner) watch(ctx context.Context, l *lease.Lease, inv *invocation, sum *Summary) error {
	w, err := p.Kube.Core.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
	if err != nil {
		return fmt.Errorf("watching pending pods: %w", err)
	}
	defer w.Stop()
	renew := p.Clock.NewTicker(renewEvery)
	defer renew.Stop()
	advance := p.Clock.NewTicker(lifecycleEvery)
	defer advance.Stop()
	var batchStart, lastPod time.Time
	batching := false
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
		case <-advance.C():
			if batching {
				continue
			}
			if err := p.advance(ctx, inv, sum); err != nil {
				p.Log.Warn("advancing nodeclaims", "error", err)
			}
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
	claims, err := p.Kube.NodeClaims.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodeclaims: %w", err)
	}
	var moving []*karpv1.NodeClaim
	for i := range claims.Items {
		if !lifecycle.IsTrue(&claims.Items[i], karpv1.ConditionTypeInitialized) {
			moving = append(moving, &claims.Items[i])
		}
	}
	if len(moving) == 0 {
		return nil
	}
	if err := p.loadICE(ctx, inv); err != nil {
		return err
	}
	defer p.saveICE(ctx, inv)
	nodes, err := p.Kube.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var ns []*corev1.Node
	for i := range nodes.Items {
		ns = append(ns, &nodes.Items[i])
	}
	classes, err := p.Kube.EC2NodeClasses.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing ec2nodeclasses: %w", err)
	}
	var ncs []*awsv1.EC2NodeClass
	for i := range classes.Items {
		ncs = append(ncs, &classes.Items[i])
	}
	views, _, err := p.instanceTypes(ncs, inv)
	if err != nil {
		return err
	}
	r, err := p.reconcileClaims(ctx, inv, views, moving, ns)
	sum.add(passResult{lifecycle: r.lifecycle})
	return err
}
