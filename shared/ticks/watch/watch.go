// Package watch is the watcher function of the continuous responsiveness
// mode: across each minute it keeps watches open on what the provisioner
// must act on soon and invokes it asynchronously when such work appears.
//
// A pod that becomes pending while no provisioner tick is watching would
// otherwise wait for the next scheduled tick (up to a minute); a node that
// joins after the tick's watch window ended would wait for registration the
// same way. The watcher costs a small function running all the time; the
// provisioner and its lease are unchanged: the watcher only starts it.
//
// It watches, with a client-go informer each: pods not bound to a node
// (Karpenter's provisionable ones are the work), this cluster's nodes not
// yet initialized (a node that registers or becomes Ready is work for the
// claim it belongs to: the NodeClaims launched but not registered or
// initialized), and the provisioning lease (a holder is a provisioner at
// work). The decision when to invoke is trigger's, pure.
package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/lease"
)

// Invoker starts the provisioner asynchronously with a payload (Lambda's
// Invoke with InvocationType Event).
type Invoker interface {
	InvokeAsync(ctx context.Context, payload []byte) error
}

// Watcher holds the clients and settings of the watcher function.
type Watcher struct {
	Core    kubernetes.Interface
	Invoker Invoker
	// Namespace and Lease name the provisioning lease.
	Namespace, Lease string
	// Window is how long one invocation watches; the next scheduled one
	// takes over.
	Window time.Duration
	// BatchIdle and BatchMax are the provisioner's batching settings.
	BatchIdle, BatchMax time.Duration
	// Margin is kept free before the invocation's deadline.
	Margin time.Duration
	Clock  clock.WithTicker
	Log    *slog.Logger
}

// Summary is what one invocation did.
type Summary struct {
	Watched time.Duration `json:"watched"`
	// Work counts the pods and nodes that became work.
	Work int `json:"work"`
	// Invoked counts the provisioner invocations sent; Failed those the
	// Invoke call refused (sent again later).
	Invoked int      `json:"invoked"`
	Failed  int      `json:"failed,omitempty"`
	Errors  []string `json:"errors,omitempty"`
}

// Payload is what the watcher sends the provisioner: an EventBridge-shaped
// event, so the provisioner's handler reads it like its schedule's.
type Payload struct {
	Source     string    `json:"source"`
	DetailType string    `json:"detail-type"`
	Time       time.Time `json:"time"`
	Detail     struct {
		Work int `json:"work"`
	} `json:"detail"`
}

// PayloadSource is the source of the watcher's events.
const PayloadSource = "karpless.watcher"

// signal is one observation of an informer.
type signal struct {
	work   bool
	leased *coordinationv1.Lease
	gone   bool // the lease was deleted
}

// Run watches for the window (or until ctx's deadline less the margin)
// and invokes the provisioner when work appears.
func (w *Watcher) Run(ctx context.Context) (Summary, error) {
	if w.Core == nil || w.Invoker == nil || w.Clock == nil || w.Log == nil || w.Lease == "" {
		return Summary{}, errors.New("watcher: Core, Invoker, Lease, Clock and Log are required")
	}
	start := w.Clock.Now()
	end := start.Add(w.Window)
	if d, ok := ctx.Deadline(); ok && d.Add(-w.Margin).Before(end) {
		end = d.Add(-w.Margin)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	signals := make(chan signal, 1024)
	send := func(s signal) {
		select {
		case signals <- s:
		case <-ctx.Done():
		}
	}
	synced, err := w.informers(ctx, start, send)
	if err != nil {
		return Summary{}, err
	}
	trig := &trigger{batchIdle: w.BatchIdle, batchMax: w.BatchMax, awaitAcquire: timing.WatcherAwaitAcquire}
	var lease *coordinationv1.Lease
	var sum Summary
	check := w.Clock.NewTicker(timing.WatcherCheckEvery)
	defer check.Stop()
	stop := w.Clock.NewTimer(end.Sub(start))
	defer stop.Stop()
	for {
		select {
		case <-ctx.Done():
			sum.Watched = w.Clock.Since(start)
			return sum, nil
		case <-stop.C():
			sum.Watched = w.Clock.Since(start)
			w.Log.Info("watch window done", "summary", sum)
			return sum, nil
		case s := <-signals:
			switch {
			case s.work:
				sum.Work++
				trig.work(w.Clock.Now())
			case s.gone:
				lease = nil
			case s.leased != nil:
				lease = s.leased
			}
		case <-check.C():
			if !synced() {
				continue
			}
			now := w.Clock.Now()
			trig.lease(holder(lease, now))
			if !trig.due(now) {
				continue
			}
			var p Payload
			p.Source, p.DetailType, p.Time = PayloadSource, "Provisioning work", now
			body, _ := json.Marshal(p)
			if err := w.Invoker.InvokeAsync(ctx, body); err != nil {
				if ctx.Err() != nil {
					continue
				}
				sum.Failed++
				trig.failed(now)
				w.Log.Warn("invoking the provisioner", "error", err)
				continue
			}
			sum.Invoked++
			w.Log.Info("provisioner invoked", "since", now.Sub(start).Round(time.Millisecond))
		}
	}
}

// holder is the lease's holder at now, "" when free or expired.
func holder(l *coordinationv1.Lease, now time.Time) string {
	if l == nil || l.Spec.HolderIdentity == nil || lease.Expired(l, now, timing.DefaultLeaseDuration) {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// informers starts the three informers, each listing and watching only
// what it needs, and returns whether all have synced. Objects of the
// initial list are work only if their change is recent (they appeared
// between the previous invocation's window and this one's); older ones
// were the previous watcher's or the scheduled tick's to see.
func (w *Watcher) informers(ctx context.Context, start time.Time, send func(signal)) (func() bool, error) {
	recent := func(t time.Time) bool { return !t.IsZero() && start.Sub(t) < timing.WatcherRecent }
	pods := informers.NewSharedInformerFactoryWithOptions(w.Core, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
	}))
	// This cluster's Karpenter-owned nodes that are not initialized yet.
	nodes := informers.NewSharedInformerFactoryWithOptions(w.Core, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = wellknown.NodePoolLabel + "," + wellknown.InitializedLabel + "!=true"
	}))
	leases := informers.NewSharedInformerFactoryWithOptions(w.Core, 0, informers.WithNamespace(w.Namespace), informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", w.Lease).String()
	}))
	podInf := pods.Core().V1().Pods().Informer()
	nodeInf := nodes.Core().V1().Nodes().Informer()
	leaseInf := leases.Coordination().V1().Leases().Informer()
	var errs []error
	podReg, err := podInf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			p, ok := obj.(*corev1.Pod)
			if !ok || !podutil.IsProvisionable(p) {
				return
			}
			if !initial || recent(unschedulableSince(p)) {
				send(signal{work: true})
			}
		},
		UpdateFunc: func(old, obj any) {
			p, ok := obj.(*corev1.Pod)
			o, _ := old.(*corev1.Pod)
			if ok && podutil.IsProvisionable(p) && (o == nil || !podutil.IsProvisionable(o)) {
				send(signal{work: true})
			}
		},
	})
	errs = append(errs, err)
	nodeReg, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			n, ok := obj.(*corev1.Node)
			if ok && (!initial || recent(n.CreationTimestamp.Time) || recent(readySince(n))) {
				send(signal{work: true})
			}
		},
		UpdateFunc: func(old, obj any) {
			n, ok := obj.(*corev1.Node)
			o, _ := old.(*corev1.Node)
			if ok && o != nil && (!readySince(n).Equal(readySince(o)) || len(n.Spec.Taints) != len(o.Spec.Taints)) {
				send(signal{work: true})
			}
		},
	})
	errs = append(errs, err)
	leaseReg, err := leaseInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { leaseSignal(obj, send) },
		UpdateFunc: func(_, obj any) { leaseSignal(obj, send) },
		DeleteFunc: func(any) { send(signal{gone: true}) },
	})
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("watcher: adding handlers: %w", err)
	}
	for _, f := range []informers.SharedInformerFactory{pods, nodes, leases} {
		f.Start(ctx.Done())
	}
	go func() {
		<-ctx.Done()
		for _, f := range []informers.SharedInformerFactory{pods, nodes, leases} {
			f.Shutdown()
		}
	}()
	// Synced once each handler has had its initial list.
	return func() bool { return podReg.HasSynced() && nodeReg.HasSynced() && leaseReg.HasSynced() }, nil
}

func leaseSignal(obj any, send func(signal)) {
	if l, ok := obj.(*coordinationv1.Lease); ok {
		send(signal{leased: l})
	}
}

// unschedulableSince is when the scheduler marked the pod unschedulable.
func unschedulableSince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// readySince is when the node's Ready condition last turned True (zero
// while it is not).
func readySince(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
