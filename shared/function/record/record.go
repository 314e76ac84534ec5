// Package record publishes what a tick decided: Kubernetes Events on the
// objects involved, CloudWatch EMF metrics under Karpenter's names, JSON logs.
package record

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"
)

// Component is the Events' source.
const Component = "karpless"

// NewLogger returns the JSON logger every function uses (stable keys).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

// Object identifies what an Event is about.
type Object struct {
	Kind, APIVersion, Namespace, Name string
	UID                               types.UID
}

// ObjectOf describes a Kubernetes object for an Event.
func ObjectOf(gvk schema.GroupVersionKind, m metav1.Object) Object {
	return Object{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(), Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID()}
}

// Recorder writes Events synchronously: a Lambda may be frozen the moment it
// returns, so nothing is left in a background queue. Repeats of the same
// event in one invocation are folded into one with a count. Events about
// cluster-scoped objects (Nodes, NodeClaims) go to the "default" namespace:
// the API server accepts them nowhere else, and it is where Karpenter's are.
type Recorder struct {
	client corev1client.EventsGetter
	clock  clock.PassiveClock
	log    *slog.Logger

	mu      sync.Mutex
	pending map[string]*corev1.Event
	order   []string
}

// NewRecorder writes Events through client.
func NewRecorder(client corev1client.EventsGetter, clk clock.PassiveClock, log *slog.Logger) *Recorder {
	return &Recorder{client: client, clock: clk, log: log, pending: map[string]*corev1.Event{}}
}

// Normal records an informational event.
func (r *Recorder) Normal(o Object, reason, format string, args ...any) {
	r.add(o, corev1.EventTypeNormal, reason, fmt.Sprintf(format, args...), nil)
}

// Annotated records an informational event that carries annotations (a
// shadow decision's record); a repeat keeps the first one's.
func (r *Recorder) Annotated(o Object, reason, msg string, annotations map[string]string) {
	r.add(o, corev1.EventTypeNormal, reason, msg, annotations)
}

// Warning records a warning event.
func (r *Recorder) Warning(o Object, reason, format string, args ...any) {
	r.add(o, corev1.EventTypeWarning, reason, fmt.Sprintf(format, args...), nil)
}

func (r *Recorder) add(o Object, typ, reason, msg string, annotations map[string]string) {
	if r == nil {
		return
	}
	key := strings.Join([]string{string(o.UID), o.Kind, o.Namespace, o.Name, typ, reason, msg, fmt.Sprint(annotations)}, "\x00")
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.pending[key]; ok {
		e.Count++
		return
	}
	ns := o.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := metav1.NewTime(r.clock.Now())
	r.pending[key] = &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: strings.ToLower(o.Name) + ".", Namespace: ns, Annotations: annotations},
		InvolvedObject: corev1.ObjectReference{
			Kind: o.Kind, APIVersion: o.APIVersion, Namespace: o.Namespace, Name: o.Name, UID: o.UID,
		},
		Reason: reason, Message: truncate(msg, 1024), Type: typ, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: Component}, ReportingController: Component, ReportingInstance: Component,
	}
	r.order = append(r.order, key)
}

// Flush writes the events gathered so far. A failed write is logged, not
// returned: Events are best-effort and must never fail a tick.
func (r *Recorder) Flush(ctx context.Context) {
	if r == nil {
		return
	}
	r.mu.Lock()
	events, order := r.pending, r.order
	r.pending, r.order = map[string]*corev1.Event{}, nil
	r.mu.Unlock()
	for _, k := range order {
		e := events[k]
		if _, err := r.client.Events(e.Namespace).Create(ctx, e, metav1.CreateOptions{}); err != nil && r.log != nil {
			r.log.Warn("writing event", "reason", e.Reason, "object", e.InvolvedObject.Name, "error", err)
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// Metrics gathers an invocation's figures and writes them, when flushed,
// as one JSON log line per name and dimension set: an EMF document for the
// figures its Level extracts, a plain log line (queryable with Logs
// Insights, not a metric) for the others.
type Metrics struct {
	namespace string
	level     Level
	mu        sync.Mutex
	points    map[string]*point
}

type point struct {
	name   string
	unit   string
	dims   map[string]string
	values []float64
	sum    bool
}

// NewMetrics gathers metrics under a CloudWatch namespace (e.g. "Karpless")
// and extracts every one (Full): for tools and tests. The functions use
// NewMetricsAt with their METRICS_LEVEL.
func NewMetrics(namespace string) *Metrics {
	return NewMetricsAt(namespace, Full)
}

// NewMetricsAt gathers metrics under a CloudWatch namespace and extracts
// those level says (Level.Extracts).
func NewMetricsAt(namespace string, level Level) *Metrics {
	return &Metrics{namespace: namespace, level: level, points: map[string]*point{}}
}

// Count adds to a counter (summed within the invocation).
func (m *Metrics) Count(name string, v float64, dims map[string]string) {
	m.put(name, "Count", v, dims, true)
}

// Observe records a distribution value, e.g. a duration in seconds.
func (m *Metrics) Observe(name, unit string, v float64, dims map[string]string) {
	m.put(name, unit, v, dims, false)
}

// Gauge records the latest value.
func (m *Metrics) Gauge(name string, v float64, dims map[string]string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key(name, dims)
	m.points[k] = &point{name: name, unit: "None", dims: dims, values: []float64{v}}
}

func (m *Metrics) put(name, unit string, v float64, dims map[string]string, sum bool) {
	if m == nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key(name, dims)
	p, ok := m.points[k]
	if !ok {
		p = &point{name: name, unit: unit, dims: dims, sum: sum}
		m.points[k] = p
	}
	if sum && len(p.values) == 1 {
		p.values[0] += v
		return
	}
	p.values = append(p.values, v)
}

func key(name string, dims map[string]string) string {
	ks := make([]string, 0, len(dims))
	for k, v := range dims {
		ks = append(ks, k+"="+v)
	}
	sort.Strings(ks)
	return name + "|" + strings.Join(ks, ",")
}

// Flush writes one JSON line per metric and dimension set to w (more for a
// distribution of over MaxValuesPerLine values). Each line
// holds the dimensions as fields, the value (or values) under the metric's
// name, and "metric" with that name, so Logs Insights can filter on it;
// only a metric the level extracts has the "_aws" block that makes
// CloudWatch publish it.
func (m *Metrics) Flush(w io.Writer, timestampMillis int64) error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	points := m.points
	m.points = map[string]*point{}
	m.mu.Unlock()
	keys := make([]string, 0, len(points))
	for k := range points {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := points[k]
		dimNames := make([]string, 0, len(p.dims))
		doc := map[string]any{}
		for d, v := range p.dims {
			dimNames = append(dimNames, d)
			doc[d] = v
		}
		sort.Strings(dimNames)
		doc["metric"] = p.name
		if m.level.Extracts(p.name) {
			doc["_aws"] = map[string]any{
				"Timestamp": timestampMillis,
				"CloudWatchMetrics": []any{map[string]any{
					"Namespace":  m.namespace,
					"Dimensions": [][]string{dimNames},
					"Metrics":    []any{map[string]string{"Name": p.name, "Unit": p.unit}},
				}},
			}
		}
		for values := range slices.Chunk(p.values, MaxValuesPerLine) {
			if len(values) == 1 {
				doc[p.name] = values[0]
			} else {
				doc[p.name] = values
			}
			b, err := json.Marshal(doc)
			if err != nil {
				return err
			}
			if _, err := w.Write(append(b, '\n')); err != nil {
				return err
			}
		}
	}
	return nil
}

// MaxValuesPerLine is the most values one EMF document may hold for a
// metric (CloudWatch's limit, which the aws-embedded-metrics libraries
// keep by splitting too): a distribution with more, such as the startup
// durations of a large rollout, is written as several lines.
const MaxValuesPerLine = 100
