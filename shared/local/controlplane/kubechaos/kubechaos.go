// Package kubechaos makes the Kubernetes API as hostile as production: conflicts,
// throttling, cut watches and expired continue tokens, as kube-apiserver sends them.
//
// It is a client-side http.RoundTripper. Install it on a rest.Config, so every client built from it (typed or
// dynamic, JSON or protobuf) goes through it:
//
//	chaos := kubechaos.New(kubechaos.Defaults(seed))
//	cfg := rest.CopyConfig(base)
//	cfg.Wrap(chaos.Wrap)
//	clients, err := kube.NewClients(cfg)
//	...
//	t.Log(chaos.Stats())
//
// Which request gets which fault, and why a real API server does the same:
//
//   - 429 TooManyRequests (TooManyRequestsRate), on any request, watches
//     included: API Priority and Fairness classifies every request and
//     rejects when a priority level's queues are full. The answer is APF's
//     own: a text/plain http.Error "Too many requests, please try again
//     later." with Retry-After and the X-Kubernetes-PF-* headers, not a
//     Status (the filter runs before content negotiation). client-go's rest
//     client retries it by itself (up to 10 times, honouring Retry-After), so
//     callers mostly see latency; after the retries they see
//     apierrors.IsTooManyRequests.
//   - 409 Conflict (ConflictRate), only on PUT to a named object or its
//     subresource (update, updateStatus, scale, finalizer removal by update)
//     whose body carries metadata.resourceVersion: the registry answers 409
//     only when that precondition no longer matches, i.e. another writer won
//     the race. A PUT without resourceVersion is either applied
//     unconditionally or rejected 422 by a real server, never 409, so it is
//     not faked. Never on POST (409 there means AlreadyExists), PATCH or
//     DELETE (409 only for a precondition the caller chose; faking it would
//     invent failures a real server cannot produce). The body is the
//     registry's Status: reason Conflict, details {group, kind: resource,
//     name}, "Operation cannot be fulfilled on ... the object has been
//     modified; please apply your changes to the latest version and try
//     again", JSON or protobuf as the request's Accept negotiates.
//   - Watch ends (WatchLifetimeMax, ExpireWatches): every successful watch
//     stream is cut after a random 0..WatchLifetimeMax of real time, always
//     between two events. With ExpireWatches the cut is preceded by an ERROR
//     event carrying Status 410 Gone, reason Expired ("too old resource
//     version"), as when the watch cache is re-initialised after etcd
//     compaction and the client's resourceVersion is gone; without it the
//     stream just ends, as at the API server's request timeout or a
//     rolling restart. Both JSON and protobuf streams get a correctly
//     framed ERROR event; other encodings (CBOR, compressed) are only cut.
//   - 410 Gone on continue (ExpiredContinueRate), only on a LIST carrying a
//     continue token: etcd compacted the revision the paginated list was
//     reading at. The Status is the storage layer's, reason Expired, and like
//     it carries a re-issued token (resourceVersion -1) in metadata.continue.
//     client-go's pager falls back to a full list.
//
// Faults answered here never reach the server (the request body is closed,
// not sent). After runs for requests that did reach it.
//
// Decisions are reproducible: each request draws from a PCG seeded with
// Seed, the request's kind (verb, group, resource, subresource; names and
// namespaces are left out since tests randomise them) and how many requests
// of that kind came before. Requests of different kinds therefore do not
// perturb each other's draws, whatever the goroutine interleaving.
package kubechaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/rand/v2"
	"mime"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Stats keys: one per fault kind, and two request counts.
const (
	StatConflict        = "conflict"
	StatTooManyRequests = "too-many-requests"
	StatWatchExpired    = "watch-expired"    // watch cut after a 410 ERROR event
	StatWatchClosed     = "watch-closed"     // watch cut silently
	StatContinueExpired = "continue-expired" // 410 on a continue token
	StatRequests        = "requests"         // every request seen, faulted or not
	StatReachedServer   = "reached-server"   // requests passed on and answered
)

// RetryAfter is what a 429 asks the client to wait, as APF does.
const RetryAfter = time.Second

// Config chooses the faults. The zero value injects nothing.
type Config struct {
	// Seed makes the decisions reproducible (math/rand/v2 PCG).
	Seed uint64
	// ConflictRate is the probability that a PUT carrying a
	// resourceVersion is answered 409 Conflict without reaching the server.
	ConflictRate float64
	// TooManyRequestsRate is the probability that any request is answered
	// 429 with Retry-After: 1, as API Priority and Fairness rejects.
	TooManyRequestsRate float64
	// WatchLifetimeMax bounds the random real-time life of a watch stream;
	// 0 leaves watches alone.
	WatchLifetimeMax time.Duration
	// ExpireWatches sends an ERROR event with Status 410 Expired before
	// a watch is cut; without it the stream just ends.
	ExpireWatches bool
	// ExpiredContinueRate is the probability that a LIST with a continue
	// token is answered 410 Expired.
	ExpiredContinueRate float64
	// After runs after the server answered and before the client sees the
	// answer, for requests that reached the server and got an HTTP answer
	// (for a watch: when its headers arrived). It runs synchronously on the
	// caller's goroutine, so it can change the world between a read and the
	// action taken on it. It must not use a client built on this transport.
	After func(req *http.Request, status int)
}

// Defaults are the rates the engines are tested under: every fault frequent
// enough to happen in a short test, rare enough that progress is made.
func Defaults(seed uint64) Config {
	return Config{
		Seed:                seed,
		ConflictRate:        0.05,
		TooManyRequestsRate: 0.02,
		WatchLifetimeMax:    20 * time.Second,
		ExpireWatches:       true,
		ExpiredContinueRate: 0.01,
	}
}

// Chaos holds the decisions and counts shared by every transport it wraps;
// one Chaos per test, installed on as many clients as the test builds.
type Chaos struct {
	cfg Config

	mu    sync.Mutex
	seq   map[string]uint64 // requests of each kind so far, for the draws
	stats map[string]int
}

// New returns the fault injector for cfg.
func New(cfg Config) *Chaos {
	return &Chaos{cfg: cfg, seq: map[string]uint64{}, stats: map[string]int{}}
}

// Wrap is for rest.Config.Wrap: cfg.Wrap(chaos.Wrap). Every transport it
// returns shares this Chaos's draws and counts.
func (c *Chaos) Wrap(next http.RoundTripper) http.RoundTripper {
	return &Transport{chaos: c, next: next}
}

// Stats counts the faults injected so far, by kind (StatConflict,
// StatTooManyRequests, StatWatchExpired, StatWatchClosed,
// StatContinueExpired) and the requests seen (StatRequests,
// StatReachedServer). Every key is present, zero or not.
func (c *Chaos) Stats() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{
		StatConflict: 0, StatTooManyRequests: 0, StatWatchExpired: 0, StatWatchClosed: 0,
		StatContinueExpired: 0, StatRequests: 0, StatReachedServer: 0,
	}
	maps.Copy(out, c.stats)
	return out
}

func (c *Chaos) count(kind string) {
	c.mu.Lock()
	c.stats[kind]++
	c.mu.Unlock()
}

// Wrap is New(cfg).Wrap, for when nobody needs the counts; the Transports
// it returns still share one Chaos, reachable with (*Transport).Stats.
func Wrap(cfg Config) func(http.RoundTripper) http.RoundTripper {
	return New(cfg).Wrap
}

// Transport is the RoundTripper that Chaos.Wrap returns.
type Transport struct {
	chaos *Chaos
	next  http.RoundTripper
}

// Stats is the Stats of the Chaos this transport belongs to.
func (t *Transport) Stats() map[string]int { return t.chaos.Stats() }

// WrappedRoundTripper lets client-go reach the transport underneath (for
// closing idle connections), as its own wrappers do.
func (t *Transport) WrappedRoundTripper() http.RoundTripper { return t.next }

// decision is one request's draws. All are drawn for every request, in a
// fixed order, so whether one fault applies never shifts another's draw.
type decision struct {
	tooManyRequests bool
	conflict        bool
	continueExpired bool
	watchLife       time.Duration
}

func (c *Chaos) decide(req *http.Request, r Request) decision {
	kind := r.Verb + " " + r.Group + "/" + r.Resource + "/" + r.Subresource
	if r.Resource == "" {
		kind = r.Verb + " " + req.URL.Path // discovery and other non-resource paths
	}
	c.mu.Lock()
	n := c.seq[kind]
	c.seq[kind] = n + 1
	c.stats[StatRequests]++
	c.mu.Unlock()

	h := fnv.New64a()
	_, _ = h.Write([]byte(kind))
	rng := rand.New(rand.NewPCG(c.cfg.Seed, splitmix(h.Sum64()^splitmix(n))))
	d := decision{
		tooManyRequests: rng.Float64() < c.cfg.TooManyRequestsRate,
		conflict:        rng.Float64() < c.cfg.ConflictRate,
		continueExpired: rng.Float64() < c.cfg.ExpiredContinueRate,
	}
	if c.cfg.WatchLifetimeMax > 0 {
		d.watchLife = time.Duration(rng.Int64N(int64(c.cfg.WatchLifetimeMax) + 1))
	}
	return d
}

// splitmix is SplitMix64's finaliser: neighbouring inputs (request n and
// n+1) give unrelated PCG streams.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// RoundTrip injects the faults decided for req, or passes it on.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.chaos
	r := Parse(req)
	d := c.decide(req, r)

	if d.tooManyRequests {
		closeBody(req)
		c.count(StatTooManyRequests)
		return tooManyRequestsResponse(req), nil
	}

	out := req // what is sent on; req itself is never modified
	if d.conflict && req.Method == http.MethodPut && r.Resource != "" && r.Name != "" && req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		closeBody(req)
		if err != nil {
			return nil, fmt.Errorf("kubechaos: reading the body of PUT %s: %w", req.URL.Path, err)
		}
		if bodyResourceVersion(body, req.Header.Get("Content-Type")) != "" {
			resp, err := conflictResponse(req, r)
			if err != nil {
				return nil, fmt.Errorf("kubechaos: answering PUT %s with a conflict: %w", req.URL.Path, err)
			}
			c.count(StatConflict)
			return resp, nil
		}
		out = req.Clone(req.Context())
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		out.ContentLength = int64(len(body))
	}

	if d.continueExpired && r.Verb == "list" {
		if token := req.URL.Query().Get("continue"); token != "" {
			closeBody(req)
			resp, err := continueExpiredResponse(req, token)
			if err != nil {
				return nil, fmt.Errorf("kubechaos: answering LIST %s with an expired continue: %w", req.URL.Path, err)
			}
			c.count(StatContinueExpired)
			return resp, nil
		}
	}

	var cancel context.CancelFunc
	if r.Watch && c.cfg.WatchLifetimeMax > 0 {
		// The watch is cut by cancelling its own context: the only way to
		// interrupt a body read blocked on an idle stream, for HTTP/1.1 and
		// HTTP/2 alike.
		var ctx context.Context
		ctx, cancel = context.WithCancel(req.Context())
		out = out.WithContext(ctx)
	}
	resp, err := t.next.RoundTrip(out)
	if err != nil {
		if cancel != nil {
			cancel()
		}
		return resp, err
	}
	c.count(StatReachedServer)
	if c.cfg.After != nil {
		c.cfg.After(req, resp.StatusCode)
	}
	if cancel != nil {
		if resp.StatusCode == http.StatusOK {
			resp.Body = c.cutWatch(req, resp, d.watchLife, cancel)
		} else {
			resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		}
	}
	return resp, nil
}

// closeBody honours the RoundTripper contract: the request body is closed
// even when the request is not sent.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// bodyResourceVersion is metadata.resourceVersion of a JSON or protobuf
// object, or "" (also for encodings it does not read).
func bodyResourceVersion(body []byte, contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = contentTypeJSON // client-go always sets it; be lenient
	}
	switch mt {
	case contentTypeProtobuf:
		if !bytes.HasPrefix(body, []byte(protobufPrefix)) {
			return ""
		}
		var unk runtime.Unknown
		if err := unk.Unmarshal(body[len(protobufPrefix):]); err != nil {
			return ""
		}
		// Every top-level kind has ObjectMeta as field 1, as
		// PartialObjectMetadata does; the other fields are skipped.
		var m metav1.PartialObjectMetadata
		if err := m.Unmarshal(unk.Raw); err != nil {
			return ""
		}
		return m.ResourceVersion
	case contentTypeJSON:
		var m struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			return ""
		}
		return m.Metadata.ResourceVersion
	}
	return ""
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
