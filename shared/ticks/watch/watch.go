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
// initialized), NodePools (a static one created, its replicas changed or
// become Ready: Karpenter's static controllers' predicate, static.Changed),
// CapacityBuffers when their CRD is installed (one created or whose spec
// changed: buffer.Changed), and the provisioning lease (a holder is a
// provisioner at work). The decision when to invoke is trigger's, pure.
//
// It starts only the provisioner, which creates what a static NodePool
// lacks and the room a buffer asks for. A static NodePool's replicas
// lowered are the disruption tick's to act on (it drains what it
// deletes): they wait for its next pass.
package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	watchapi "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/buffer"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/static"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/lease"
)

// Invoker starts the provisioner asynchronously with a payload (Lambda's
// Invoke with InvocationType Event).
type Invoker interface {
	InvokeAsync(ctx context.Context, payload []byte) error
}

// Source lists and watches one kind: a typed client of kube.Clients
// (NodePools, CapacityBuffers("")).
type Source[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watchapi.Interface, error)
}

// Watcher holds the clients and settings of the watcher function.
type Watcher struct {
	Core kubernetes.Interface
	// NodePools and CapacityBuffers are watched for static NodePools and
	// buffers; nil leaves that kind unwatched (its changes wait for the
	// scheduled tick).
	NodePools       Source[*karpv1.NodePoolList]
	CapacityBuffers Source[*cbv1.CapacityBufferList]
	Invoker         Invoker
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
	// Work counts the pods, nodes, NodePools and CapacityBuffers that
	// became work.
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

// informers starts the informers, each listing and watching only what it
// needs, and returns whether the pods', nodes' and lease's have synced
// (the NodePools' and buffers' add work whenever they sync, and need not
// hold the others back). Objects of the initial list are work only if
// their change is recent (they appeared between the previous invocation's
// window and this one's); older ones were the previous watcher's or the
// scheduled tick's to see.
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
	// The NodePools' and buffers' informers start beside them: their
	// probes must not delay the pods' watch.
	go w.watchPoolsAndBuffers(ctx, recent, send)
	// Synced once each handler has had its initial list.
	return func() bool { return podReg.HasSynced() && nodeReg.HasSynced() && leaseReg.HasSynced() }, nil
}

// watchPoolsAndBuffers runs the NodePools' and CapacityBuffers' informers
// (those the watcher may list) until ctx ends.
func (w *Watcher) watchPoolsAndBuffers(ctx context.Context, recent func(time.Time) bool, send func(signal)) {
	var running sync.WaitGroup
	defer running.Wait()
	if inf := w.optionalInformer(ctx, "nodepools", w.NodePools != nil, listWatch(w.NodePools), &karpv1.NodePool{}); inf != nil {
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if np, ok := obj.(*karpv1.NodePool); ok && nodePoolWork(nil, np, initial, recent) {
					send(signal{work: true})
				}
			},
			UpdateFunc: func(old, obj any) {
				o, _ := old.(*karpv1.NodePool)
				np, ok := obj.(*karpv1.NodePool)
				if ok && o != nil && nodePoolWork(o, np, false, recent) {
					send(signal{work: true})
				}
			},
		})
		if err != nil {
			w.Log.Warn("not watched: adding the handler", "kind", "nodepools", "error", err)
		} else {
			running.Go(func() { inf.RunWithContext(ctx) })
		}
	}
	if inf := w.optionalInformer(ctx, "capacitybuffers", w.CapacityBuffers != nil, listWatch(w.CapacityBuffers), &cbv1.CapacityBuffer{}); inf != nil {
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if b, ok := obj.(*cbv1.CapacityBuffer); ok && buffer.Changed(nil, b) {
					send(signal{work: true})
				}
			},
			UpdateFunc: func(old, obj any) {
				o, _ := old.(*cbv1.CapacityBuffer)
				b, ok := obj.(*cbv1.CapacityBuffer)
				if ok && o != nil && buffer.Changed(o, b) {
					send(signal{work: true})
				}
			},
		})
		if err != nil {
			w.Log.Warn("not watched: adding the handler", "kind", "capacitybuffers", "error", err)
		} else {
			running.Go(func() { inf.RunWithContext(ctx) })
		}
	}
}

// nodePoolWork reports whether a NodePool event is work (static.Changed).
// One of the initial list is only if it was created, or became Ready,
// recently: a replica change carries no time, so one made while no
// watcher watched waits for the scheduled tick.
func nodePoolWork(old, cur *karpv1.NodePool, initial bool, recent func(time.Time) bool) bool {
	if !static.Changed(old, cur) {
		return false
	}
	if !initial {
		return true
	}
	if recent(cur.CreationTimestamp.Time) {
		return true
	}
	c := meta.FindStatusCondition(cur.Status.Conditions, karpv1.ConditionTypeReady)
	return c != nil && c.Status == metav1.ConditionTrue && recent(c.LastTransitionTime.Time)
}

// listWatch lists and watches src with the informer's options.
func listWatch[L runtime.Object](src Source[L]) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return src.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watchapi.Interface, error) {
			return src.Watch(ctx, o)
		},
	}
}

// optionalInformer is an informer on a kind the watcher can do without,
// or nil when it has no client for it or may not list it: the kind's CRD
// is not installed (CapacityBuffers' may not be) or the watcher's grants
// predate it (the bootstrap that applies them had not run yet). Such a
// kind's changes wait for the scheduled tick this invocation, instead of
// an informer retrying a list that cannot succeed. Any other failure (a
// throttle) is the informer's to retry.
func (w *Watcher) optionalInformer(ctx context.Context, kind string, ok bool, lw *cache.ListWatch, example runtime.Object) cache.SharedIndexInformer {
	if !ok {
		return nil
	}
	_, err := lw.ListWithContext(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsNotFound(err):
		w.Log.Debug("not watched: not installed", "kind", kind)
		return nil
	case apierrors.IsForbidden(err):
		w.Log.Warn("not watched: the watcher may not list it (its grants are older than it; the bootstrap applies them)", "kind", kind, "error", err)
		return nil
	}
	return cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{})
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
