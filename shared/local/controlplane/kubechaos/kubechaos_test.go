package kubechaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"
	"k8s.io/client-go/util/retry"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env, kubetest.Options{})) }

// chaotic is a test's view of the API server through a Chaos: the
// karpless clients (protobuf core, JSON CRDs), a JSON core client, a
// dynamic client, and a recorder of every error body the clients saw.
type chaotic struct {
	chaos   *Chaos
	clients *kube.Clients
	json    kubernetes.Interface
	dynamic dynamic.Interface
	rec     *recorder
}

func newChaotic(t *testing.T, e *kubetest.Env, cfg Config) *chaotic {
	t.Helper()
	c := &chaotic{chaos: New(cfg), rec: &recorder{}}
	rc := rest.CopyConfig(e.Cluster.RESTConfig)
	rc.Wrap(c.chaos.Wrap)
	rc.Wrap(c.rec.wrap) // outside the chaos: sees what the client sees
	var err error
	if c.clients, err = kube.NewClients(rc); err != nil {
		t.Fatal(err)
	}
	// client-go v0.37's generated clients default to protobuf for
	// built-in kinds; JSON has to be asked for.
	jc := rest.CopyConfig(rc)
	jc.ContentType = runtime.ContentTypeJSON
	if c.json, err = kubernetes.NewForConfig(jc); err != nil {
		t.Fatal(err)
	}
	if c.dynamic, err = dynamic.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	return c
}

// recorder keeps the content type and body of every error answer, and the
// content type of every watch stream.
type recorder struct {
	mu      sync.Mutex
	errors  []recorded
	watches []string
}

type recorded struct {
	method, path, contentType string
	code                      int
	body                      []byte
}

func (r *recorder) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if Parse(req).Watch && resp.StatusCode == 200 {
			r.watches = append(r.watches, resp.Header.Get("Content-Type"))
		}
		if resp.StatusCode >= 400 {
			b, rerr := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if rerr != nil {
				return nil, rerr
			}
			resp.Body = io.NopCloser(bytes.NewReader(b))
			r.errors = append(r.errors, recorded{req.Method, req.URL.Path, resp.Header.Get("Content-Type"), resp.StatusCode, b})
		}
		return resp, nil
	})
}

func (r *recorder) last(t *testing.T, code int) recorded {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.errors) - 1; i >= 0; i-- {
		if r.errors[i].code == code {
			return r.errors[i]
		}
	}
	t.Fatalf("no %d answer recorded", code)
	return recorded{}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func nodeClaim(t *testing.T) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: kubetest.Name(t), Labels: map[string]string{wellknown.NodePoolLabel: "default"}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}}}},
	}
}

// TestConflictIsWhatTheServerSends provokes a real conflict (a stale
// resourceVersion) and a faked one on the same object and compares the
// bytes the client receives: protobuf for core objects, JSON for CRDs.
func TestConflictIsWhatTheServerSends(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	real := newChaotic(t, e, Config{Seed: 1})
	fake := newChaotic(t, e, Config{Seed: 1, ConflictRate: 1})

	cm, err := e.Clients.Core.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"a": "1"}
	if _, err := e.Clients.Core.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// cm now carries a stale resourceVersion.
	_, realErr := real.clients.Core.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	_, fakeErr := fake.clients.Core.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	compareConflicts(t, "protobuf configmap", realErr, fakeErr, real.rec.last(t, 409), fake.rec.last(t, 409), contentTypeProtobuf)

	nc, err := e.Clients.NodeClaims.Create(ctx, nodeClaim(t), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Clients.NodeClaims.Delete(context.Background(), nc.Name, metav1.DeleteOptions{}) })
	nc.Labels["x"] = "y"
	if _, err := e.Clients.NodeClaims.Update(ctx, nc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, realErr = real.clients.NodeClaims.UpdateStatus(ctx, nc, metav1.UpdateOptions{})
	_, fakeErr = fake.clients.NodeClaims.UpdateStatus(ctx, nc, metav1.UpdateOptions{})
	compareConflicts(t, "JSON nodeclaim status", realErr, fakeErr, real.rec.last(t, 409), fake.rec.last(t, 409), contentTypeJSON)

	if got := fake.chaos.Stats()[StatConflict]; got != 2 {
		t.Errorf("fake conflicts = %d, want 2", got)
	}
}

func compareConflicts(t *testing.T, what string, realErr, fakeErr error, realRec, fakeRec recorded, contentType string) {
	t.Helper()
	if !apierrors.IsConflict(realErr) || !apierrors.IsConflict(fakeErr) {
		t.Fatalf("%s: real %v, fake %v; want both conflicts", what, realErr, fakeErr)
	}
	if realErr.Error() != fakeErr.Error() {
		t.Errorf("%s: messages differ\nreal %s\nfake %s", what, realErr, fakeErr)
	}
	if realRec.contentType != contentType || fakeRec.contentType != contentType {
		t.Errorf("%s: content types real %q fake %q, want %q", what, realRec.contentType, fakeRec.contentType, contentType)
	}
	if !bytes.Equal(realRec.body, fakeRec.body) {
		t.Errorf("%s: bodies differ\nreal %q\nfake %q", what, realRec.body, fakeRec.body)
	}
}

// TestConflictIsRetriedUntilTheUpdateLands: retry.RetryOnConflict sees the
// faked conflicts as conflicts, rereads and retries, and every update lands.
func TestConflictIsRetriedUntilTheUpdateLands(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	ch := newChaotic(t, e, Config{Seed: 3, ConflictRate: 0.5})
	backoff := retry.DefaultRetry
	backoff.Steps = 30 // 0.5^30: the test does not flake on a run of conflicts

	for _, c := range []struct {
		name, contentType string
		cms               func() kubernetes.Interface
	}{
		{"protobuf", contentTypeProtobuf, func() kubernetes.Interface { return ch.clients.Core }},
		{"json", contentTypeJSON, func() kubernetes.Interface { return ch.json }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cms := c.cms().CoreV1().ConfigMaps(ns)
			if _, err := e.Clients.Core.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.name}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			before := ch.chaos.Stats()[StatConflict]
			var seen []error
			const updates = 10
			for i := range updates {
				err := retry.RetryOnConflict(backoff, func() error {
					cm, err := cms.Get(ctx, c.name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					n, _ := strconv.Atoi(cm.Data["n"])
					cm.Data = map[string]string{"n": strconv.Itoa(n + 1)}
					_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
					if err != nil {
						seen = append(seen, err)
					}
					return err
				})
				if err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
			}
			cm, err := e.Clients.Core.CoreV1().ConfigMaps(ns).Get(ctx, c.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cm.Data["n"] != strconv.Itoa(updates) {
				t.Fatalf("n = %s after %d updates, want %d (an update was lost or applied twice)", cm.Data["n"], updates, updates)
			}
			conflicts := ch.chaos.Stats()[StatConflict] - before
			if conflicts == 0 || len(seen) != conflicts {
				t.Fatalf("%d conflicts injected, %d errors seen by the caller", conflicts, len(seen))
			}
			var se apierrors.APIStatus
			if !errors.As(seen[0], &se) || se.Status().Details == nil || se.Status().Details.Kind != "configmaps" || se.Status().Details.Name != c.name {
				t.Fatalf("conflict error = %#v", seen[0])
			}
			if got := ch.rec.last(t, 409).contentType; got != c.contentType {
				t.Fatalf("conflict sent as %s, want %s", got, c.contentType)
			}
			t.Logf("%d conflicts retried", conflicts)
		})
	}
}

// TestTooManyRequestsIsRetriedByClientGo: the caller never sees the 429s;
// client-go's rest client waits Retry-After and retries.
func TestTooManyRequestsIsRetriedByClientGo(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	ch := newChaotic(t, e, Config{Seed: 5, TooManyRequestsRate: 0.4})
	if _, err := e.Clients.Core.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 4 {
		if _, err := ch.clients.Core.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{}); err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
		if _, err := ch.json.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	st := ch.chaos.Stats()
	if st[StatTooManyRequests] == 0 {
		t.Fatalf("no 429 injected in 8 requests at 0.4 (seed 5): %v", st)
	}
	if st[StatReachedServer] != 8 || st[StatRequests] != 8+st[StatTooManyRequests] {
		t.Fatalf("stats %v: want 8 requests answered by the server after the retries", st)
	}
	// Retry-After: 1 was honoured.
	if el := time.Since(start); el < time.Duration(st[StatTooManyRequests])*time.Second {
		t.Errorf("%d retries took %v, under the 1s Retry-After each", st[StatTooManyRequests], el)
	}
	if rec := ch.rec.last(t, 429); string(rec.body) != tooManyRequestsBody {
		t.Errorf("429 body %q", rec.body)
	}
}

// watchUntilClosed collects the events of w until its channel closes.
func watchUntilClosed(t *testing.T, w watch.Interface, limit time.Duration) []watch.Event {
	t.Helper()
	defer w.Stop()
	var events []watch.Event
	timeout := time.After(limit)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return events
			}
			events = append(events, ev)
		case <-timeout:
			t.Fatalf("watch still open after %v; events %v", limit, events)
		}
	}
}

// TestWatchEndsExpired: protobuf, JSON and dynamic (unstructured) watches
// deliver events, then the 410 Expired ERROR event, then close.
func TestWatchEndsExpired(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	if _, err := e.Clients.Core.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	opts := metav1.ListOptions{ResourceVersion: "0"} // existing objects come as ADDED first
	for _, c := range []struct {
		name, contentType string
		start             func(*chaotic) (watch.Interface, error)
	}{
		{"protobuf", "application/vnd.kubernetes.protobuf;stream=watch", func(ch *chaotic) (watch.Interface, error) {
			return ch.clients.Core.CoreV1().ConfigMaps(ns).Watch(ctx, opts)
		}},
		{"json", "application/json", func(ch *chaotic) (watch.Interface, error) { return ch.json.CoreV1().ConfigMaps(ns).Watch(ctx, opts) }},
		{"dynamic", "application/json", func(ch *chaotic) (watch.Interface, error) {
			return ch.dynamic.Resource(gvr).Namespace(ns).Watch(ctx, opts)
		}},
	} {
		for _, expire := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/expire=%v", c.name, expire), func(t *testing.T) {
				ch := newChaotic(t, e, Config{Seed: 11, WatchLifetimeMax: 2 * time.Second, ExpireWatches: expire})
				w, err := c.start(ch)
				if err != nil {
					t.Fatal(err)
				}
				events := watchUntilClosed(t, w, 10*time.Second)
				if len(events) == 0 || events[0].Type != watch.Added {
					t.Fatalf("events %v: want the ADDED of cm first (seed 11 draws a life long enough)", events)
				}
				if m, err := metaName(events[0].Object); err != nil || m != "cm" {
					t.Fatalf("first event object %v: %v", events[0].Object, err)
				}
				last := events[len(events)-1]
				st := ch.chaos.Stats()
				if expire {
					err := apierrors.FromObject(last.Object)
					if last.Type != watch.Error || !apierrors.IsResourceExpired(err) || apierrors.ReasonForError(err) != metav1.StatusReasonExpired {
						t.Fatalf("last event %s %#v: want ERROR 410 Expired", last.Type, last.Object)
					}
					if st[StatWatchExpired] != 1 || st[StatWatchClosed] != 0 {
						t.Fatalf("stats %v", st)
					}
				} else {
					if last.Type == watch.Error {
						t.Fatalf("silent cut sent an ERROR event %#v", last.Object)
					}
					if st[StatWatchClosed] != 1 || st[StatWatchExpired] != 0 {
						t.Fatalf("stats %v", st)
					}
				}
				ch.rec.mu.Lock()
				defer ch.rec.mu.Unlock()
				if len(ch.rec.watches) != 1 || ch.rec.watches[0] != c.contentType {
					t.Fatalf("watch content types %v, want %s", ch.rec.watches, c.contentType)
				}
			})
		}
	}
}

func metaName(obj runtime.Object) (string, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return o.Name, nil
	case *unstructured.Unstructured:
		return o.GetName(), nil
	}
	return "", fmt.Errorf("unexpected %T", obj)
}

// TestRewatchThroughCuts: a list-then-watch loop that rewatches from the
// last resourceVersion on a close and relists on 410 (what a reflector
// does; tools/cache is not a dependency of this module) sees every object
// while its watches are cut many times: no event is torn, duplicated into a
// decode error or invented.
func TestRewatchThroughCuts(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	for _, expire := range []bool{true, false} {
		t.Run(fmt.Sprintf("expire=%v", expire), func(t *testing.T) {
			cfg := Defaults(17)
			cfg.WatchLifetimeMax = 400 * time.Millisecond
			cfg.ExpireWatches = expire
			cfg.ConflictRate, cfg.ExpiredContinueRate = 0, 0
			ch := newChaotic(t, e, cfg)
			cms := ch.clients.Core.CoreV1().ConfigMaps(ns)
			prefix := fmt.Sprintf("e%v-", expire)

			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := range 25 {
					cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%d", prefix, i)}}
					if _, err := e.Clients.Core.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
						t.Errorf("create %d: %v", i, err)
					}
					time.Sleep(80 * time.Millisecond)
				}
			}()

			seen := map[string]bool{}
			relists, rewatches := 0, 0
			list := func() string {
				relists++
				l, err := cms.List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatalf("list: %v", err)
				}
				for _, cm := range l.Items {
					seen[cm.Name] = true
				}
				return l.ResourceVersion
			}
			rv := list()
			deadline := time.Now().Add(20 * time.Second)
			for {
				complete := true
				for i := range 25 {
					complete = complete && seen[fmt.Sprintf("%s%d", prefix, i)]
				}
				if complete {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("saw %d objects after %d relists and %d rewatches", len(seen), relists, rewatches)
				}
				w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
				if err != nil {
					t.Fatalf("watch: %v", err)
				}
				rewatches++
				for ev := range w.ResultChan() {
					switch ev.Type {
					case watch.Error:
						if err := apierrors.FromObject(ev.Object); !apierrors.IsResourceExpired(err) {
							t.Fatalf("watch error %v: only 410 Expired is injected", err)
						}
						rv = list()
					default:
						cm, ok := ev.Object.(*corev1.ConfigMap)
						if !ok {
							t.Fatalf("event %s of %T", ev.Type, ev.Object)
						}
						if ev.Type != watch.Bookmark {
							seen[cm.Name] = true
						}
						rv = cm.ResourceVersion
					}
				}
				w.Stop()
			}
			<-done
			st := ch.chaos.Stats()
			cuts := st[StatWatchExpired] + st[StatWatchClosed]
			if cuts < 2 || (expire && st[StatWatchClosed] != 0) || (!expire && st[StatWatchExpired] != 0) {
				t.Fatalf("stats %v: want several cuts of the chosen kind", st)
			}
			t.Logf("%d relists, %d watches, stats %v", relists, rewatches, st)
		})
	}
}

// TestExpiredContinue: the second page of a paginated list is 410 Expired
// with a re-issued token that the server accepts, and client-go's pager
// falls back to a full list.
func TestExpiredContinue(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	for i := range 5 {
		if _, err := e.Clients.Core.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Without kube-controller-manager there is no kube-root-ca.crt; count
	// what is there rather than assume.
	all, err := e.Clients.Core.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	total := len(all.Items)
	ch := newChaotic(t, e, Config{Seed: 1, ExpiredContinueRate: 1})
	cms := ch.clients.Core.CoreV1().ConfigMaps(ns)
	first, err := cms.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil || first.Continue == "" {
		t.Fatalf("first page: %v, continue %q", err, first.Continue)
	}
	_, err = cms.List(ctx, metav1.ListOptions{Limit: 2, Continue: first.Continue})
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("second page: %v, want IsResourceExpired", err)
	}
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Continue == "" {
		t.Fatalf("expired status carries no re-issued token: %#v", err)
	}
	// The re-issued token continues at the latest revision on the real server.
	rest, err := e.Clients.Core.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 10, Continue: se.Status().Continue})
	if err != nil {
		t.Fatalf("listing with the re-issued token: %v", err)
	}
	if got := len(first.Items) + len(rest.Items); got != total {
		t.Fatalf("pages hold %d configmaps, want %d", got, total)
	}
	// The pager falls back to one full list.
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) { return cms.List(ctx, opts) })
	p.PageSize = 2
	listed, _, err := p.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Pages stitched together would be a metainternalversion.List; the
	// fallback full list is the typed list itself.
	if items, ok := listed.(*corev1.ConfigMapList); !ok || len(items.Items) != total {
		t.Fatalf("pager returned %T %v; want one full list of %d", listed, listed, total)
	}
	if st := ch.chaos.Stats(); st[StatContinueExpired] != 2 {
		t.Fatalf("stats %v, want 2 expired continues", st)
	}
}

// TestAfterChangesTheWorld: After runs between the server's answer and the
// caller's, so the caller acts on a list that is already stale.
func TestAfterChangesTheWorld(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	var seen []Request
	var statuses []int
	cfg := Config{Seed: 1, After: func(req *http.Request, status int) {
		r := Parse(req)
		seen = append(seen, r)
		statuses = append(statuses, status)
		if r.Verb == "list" && r.Resource == "configmaps" && r.Namespace == ns {
			// Another writer, through a client without chaos.
			_, err := e.Clients.Core.CoreV1().ConfigMaps(ns).Create(context.Background(),
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sneaky"}}, metav1.CreateOptions{})
			if err != nil {
				t.Errorf("creating from After: %v", err)
			}
		}
	}}
	ch := newChaotic(t, e, cfg)
	list, err := ch.clients.Core.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if cm.Name == "sneaky" {
			t.Fatal("the list answered after After ran; it must be answered before")
		}
	}
	if _, err := ch.clients.Core.CoreV1().ConfigMaps(ns).Get(ctx, "sneaky", metav1.GetOptions{}); err != nil {
		t.Fatalf("the object After created is not there: %v", err)
	}
	want := []Request{
		{Verb: "list", Version: "v1", Resource: "configmaps", Namespace: ns},
		{Verb: "get", Version: "v1", Resource: "configmaps", Namespace: ns, Name: "sneaky"},
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) || fmt.Sprint(statuses) != "[200 200]" {
		t.Fatalf("After saw %+v %v, want %+v [200 200]", seen, statuses, want)
	}

	// Faults answered by the transport never reached the server: no After.
	seen = nil
	ch = newChaotic(t, e, Config{Seed: 1, TooManyRequestsRate: 1, After: cfg.After})
	ctx2, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if _, err := ch.clients.Core.CoreV1().ConfigMaps(ns).Get(ctx2, "sneaky", metav1.GetOptions{}); err == nil {
		t.Fatal("get succeeded at 429 rate 1")
	}
	if len(seen) != 0 {
		t.Fatalf("After ran for answers the server never gave: %+v", seen)
	}
}

// TestZeroRatesAgainstTheServer: the zero Config passes everything through,
// watches included.
func TestZeroRatesAgainstTheServer(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	ch := newChaotic(t, e, Config{Seed: 1})
	cms := ch.clients.Core.CoreV1().ConfigMaps(ns)
	w, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := range 5 {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"x": "y"}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return cms.List(ctx, o) })
	p.PageSize = 1
	if _, _, err := p.List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				t.Fatalf("watch event %v, open %v", ev, ok)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("watch events missing")
		}
	}
	st := ch.chaos.Stats()
	for _, k := range []string{StatConflict, StatTooManyRequests, StatContinueExpired, StatWatchExpired, StatWatchClosed} {
		if st[k] != 0 {
			t.Errorf("stats[%s] = %d at rate 0", k, st[k])
		}
	}
	if st[StatRequests] != st[StatReachedServer] || st[StatRequests] < 16 {
		t.Errorf("stats %v: every request must reach the server", st)
	}
}
