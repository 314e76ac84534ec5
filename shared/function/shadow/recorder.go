package shadow

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/function/record"
)

// Recorder records one invocation's decisions: a JSON log line and an
// Event for each decision the first time the invocation makes it (a
// pending pod's launch is decided again at every pass until Karpenter
// acts), and, on Flush, an entry in the function's ConfigMap. Build one
// per invocation.
type Recorder struct {
	// Function names the function (provisioner, disruption).
	Function string
	// Namespace and ConfigMaps hold the store (Store); nil ConfigMaps
	// keeps none.
	Namespace  string
	ConfigMaps corev1client.ConfigMapsGetter
	Clock      clock.PassiveClock
	Log        *slog.Logger

	mu      sync.Mutex
	seen    map[string]bool
	pending []Decision
	all     []Decision
}

// Record records d (made now) unless this invocation recorded it already;
// its Event goes to events.
func (r *Recorder) Record(d Decision, events *record.Recorder) {
	d.Function = r.Function
	d.At = r.Clock.Now().UTC().Truncate(time.Second)
	key := d.Key()
	r.mu.Lock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	if r.seen[key] {
		r.mu.Unlock()
		return
	}
	r.seen[key] = true
	r.pending = append(r.pending, d)
	r.all = append(r.all, d)
	r.mu.Unlock()
	r.Log.Info("shadow decision: not carried out", LogKey, d)
	kind, name := d.Subject()
	obj := record.Object{Kind: kind, APIVersion: "v1", Name: name}
	if kind != "Node" {
		obj.APIVersion = karpv1.SchemeGroupVersion.String()
	}
	events.Annotated(obj, EventReason, d.Text(), map[string]string{DecisionAnnotation: d.Marshal()})
}

// Decisions are the decisions recorded so far, in order.
func (r *Recorder) Decisions() []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Decision(nil), r.all...)
}

// Flush adds the decisions recorded since the last Flush to the store. A
// failure is logged: the log lines and Events are records too.
func (r *Recorder) Flush(ctx context.Context) {
	r.mu.Lock()
	pending := r.pending
	r.pending = nil
	r.mu.Unlock()
	if len(pending) == 0 || r.ConfigMaps == nil {
		return
	}
	s := Store{ConfigMaps: r.ConfigMaps, Namespace: r.Namespace, Function: r.Function, Now: r.Clock.Now}
	if err := s.Add(ctx, pending); err != nil {
		r.Log.Warn("saving shadow decisions", "error", err)
	}
}

// Store keeps a function's recent decisions in the ConfigMap
// karpless-shadow-<function>: one entry per decision key, with when it was
// first and last made and by how many invocations. Events live an hour
// (the API server's --event-ttl), so a report of a day reads this.
type Store struct {
	ConfigMaps corev1client.ConfigMapsGetter
	Namespace  string
	Function   string
	Now        func() time.Time
}

// Entry is one decision in the store.
type Entry struct {
	Decision Decision  `json:"decision"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	// Seen counts the invocations that made it.
	Seen int `json:"seen"`
}

// Store limits: entries not made again for StoreRetention go, and the
// oldest go first beyond maxStoreBytes (a ConfigMap holds at most 1 MiB).
const (
	StoreRetention = 8 * 24 * time.Hour
	maxStoreBytes  = 512 << 10
	storeKey       = "decisions"
	// StoreLabel marks the stores, for the report to list them.
	StoreLabel = "karpless.dev/shadow-decisions"
)

// StoreName is the ConfigMap of a function's decisions.
func StoreName(function string) string { return NamePrefix + "shadow-" + function }

// Add merges ds into the store.
func (s Store) Add(ctx context.Context, ds []Decision) error {
	cms := s.ConfigMaps.ConfigMaps(s.Namespace)
	name := StoreName(s.Function)
	for attempt := 0; ; attempt++ {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return fmt.Errorf("reading configmap %s/%s: %w", s.Namespace, name, err)
		}
		var entries []Entry
		if !create {
			entries = DecodeEntries(cm.Data[storeKey])
		}
		data, err := json.Marshal(merge(entries, ds, s.Now()))
		if err != nil {
			return err
		}
		if create {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: map[string]string{StoreLabel: "true"}}}
		}
		cm.Data = map[string]string{storeKey: string(data)}
		if create {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		} else {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		if (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && attempt < 2 {
			continue
		}
		if err != nil {
			return fmt.Errorf("writing configmap %s/%s: %w", s.Namespace, name, err)
		}
		return nil
	}
}

// merge adds ds to entries (by key), drops what is past StoreRetention at
// now and, beyond maxStoreBytes, the entries last made longest ago.
func merge(entries []Entry, ds []Decision, now time.Time) []Entry {
	byKey := map[string]int{}
	for i, e := range entries {
		byKey[e.Decision.Key()] = i
	}
	for _, d := range ds {
		if i, ok := byKey[d.Key()]; ok {
			e := &entries[i]
			e.Decision, e.Seen = d, e.Seen+1
			if d.At.After(e.Last) {
				e.Last = d.At
			}
			if d.At.Before(e.First) {
				e.First = d.At
			}
			continue
		}
		byKey[d.Key()] = len(entries)
		entries = append(entries, Entry{Decision: d, First: d.At, Last: d.At, Seen: 1})
	}
	out := entries[:0]
	for _, e := range entries {
		if now.Sub(e.Last) <= StoreRetention {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Last.After(out[j].Last) })
	size := 2
	for i, e := range out {
		b, _ := json.Marshal(e)
		size += len(b) + 1
		if size > maxStoreBytes {
			out = out[:i]
			break
		}
	}
	return out
}

// DecodeEntries reads a store's entries; what does not parse is skipped.
func DecodeEntries(s string) []Entry {
	var raw []json.RawMessage
	if json.Unmarshal([]byte(s), &raw) != nil {
		return nil
	}
	var out []Entry
	for _, m := range raw {
		var e Entry
		if json.Unmarshal(m, &e) == nil && e.Decision.Valid() {
			out = append(out, e)
		}
	}
	return out
}

// ReadStores reads every function's store in namespace.
func ReadStores(ctx context.Context, cms corev1client.ConfigMapsGetter, namespace string) ([]Entry, error) {
	l, err := cms.ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: StoreLabel + "=true"})
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, cm := range l.Items {
		out = append(out, DecodeEntries(cm.Data[storeKey])...)
	}
	return out, nil
}
