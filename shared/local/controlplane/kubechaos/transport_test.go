package kubechaos

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// server is the next RoundTripper: it answers 200 and remembers what
// reached it, with the body it got.
type server struct {
	mu     sync.Mutex
	got    []string
	bodies [][]byte
}

func (s *server) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		_ = req.Body.Close()
	}
	s.mu.Lock()
	s.got = append(s.got, req.Method+" "+req.URL.String())
	s.bodies = append(s.bodies, body)
	s.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{}`)), Request: req}, nil
}

// closeTracker records whether the transport closed the request body, as
// the RoundTripper contract demands even for requests it does not send.
type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

func jsonBody(rv string) []byte {
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cm", "namespace": "ns", "resourceVersion": rv}})
	return b
}

func do(t *testing.T, rt http.RoundTripper, method, url string, body []byte) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp
}

// decodeStatus reads a JSON error body the way client-go does.
func decodeStatus(t *testing.T, resp *http.Response) *metav1.Status {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var st metav1.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("status body %q: %v", b, err)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" {
		t.Errorf("status type = %s/%s, want v1/Status", st.APIVersion, st.Kind)
	}
	return &st
}

func TestZeroRatesInjectNothing(t *testing.T) {
	srv := &server{}
	c := New(Config{Seed: 1})
	rt := c.Wrap(srv)
	reqs := []struct{ method, url string }{
		{"PUT", "/api/v1/namespaces/ns/configmaps/cm"},
		{"PUT", "/api/v1/namespaces/ns/pods/p/status"},
		{"GET", "/api/v1/namespaces/ns/configmaps?limit=1&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NSwic3RhcnQiOiJjbVx1MDAwMCJ9"},
		{"GET", "/api/v1/namespaces/ns/configmaps/cm"},
		{"POST", "/api/v1/namespaces/ns/configmaps"},
	}
	for range 200 {
		for _, r := range reqs {
			if resp := do(t, rt, r.method, r.url, jsonBody("5")); resp.StatusCode != 200 {
				t.Fatalf("%s %s = %d with every rate 0", r.method, r.url, resp.StatusCode)
			}
		}
	}
	st := c.Stats()
	if len(srv.got) != 1000 || st[StatReachedServer] != 1000 || st[StatRequests] != 1000 {
		t.Fatalf("reached server %d, stats %v; want all 1000", len(srv.got), st)
	}
	for _, k := range []string{StatConflict, StatTooManyRequests, StatContinueExpired, StatWatchExpired, StatWatchClosed} {
		if st[k] != 0 {
			t.Errorf("stats[%s] = %d with rate 0", k, st[k])
		}
	}
}

// outcomes runs the same mix of requests through a fresh Chaos and returns
// each request's status code, by request kind.
func outcomes(t *testing.T, seed uint64, order []int) map[int][]int {
	c := New(Config{Seed: seed, ConflictRate: 0.3, TooManyRequestsRate: 0.2, ExpiredContinueRate: 0.3})
	rt := c.Wrap(&server{})
	kinds := []struct{ method, url string }{
		{"PUT", "/api/v1/namespaces/ns-%d/configmaps/cm"},
		{"GET", "/api/v1/namespaces/ns-%d/pods?limit=1&continue=abc"},
		{"DELETE", "/apis/karpenter.sh/v1/nodeclaims/c-%d"},
	}
	out := map[int][]int{}
	for i, k := range order {
		// Names and namespaces change on every request (tests randomise
		// them); the decisions must not depend on them.
		resp := do(t, rt, kinds[k].method, fmt.Sprintf(kinds[k].url, i), jsonBody("7"))
		out[k] = append(out[k], resp.StatusCode)
	}
	return out
}

func TestSameSeedSameDecisions(t *testing.T) {
	var sequential, interleaved []int
	for k := range 3 {
		for range 100 {
			sequential = append(sequential, k)
		}
	}
	for range 100 {
		interleaved = append(interleaved, 2, 0, 1)
	}
	a := outcomes(t, 42, sequential)
	b := outcomes(t, 42, sequential)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("seed 42 gave different decisions on two runs:\n%v\n%v", a, b)
	}
	// Another interleaving of the same kinds: each kind's own sequence of
	// decisions is unchanged.
	if c := outcomes(t, 42, interleaved); fmt.Sprint(a) != fmt.Sprint(c) {
		t.Fatalf("interleaving changed the decisions of a kind:\n%v\n%v", a, c)
	}
	if d := outcomes(t, 43, sequential); fmt.Sprint(a) == fmt.Sprint(d) {
		t.Fatal("seeds 42 and 43 gave the same 300 decisions")
	}
	// The rates hold roughly: 20% 429 everywhere, then 30% of the rest
	// conflicts on the PUTs and 30% expired continues on the LISTs; never
	// a 409 or 410 on the DELETEs.
	count := func(codes []int, code int) int {
		n := 0
		for _, c := range codes {
			if c == code {
				n++
			}
		}
		return n
	}
	if n := count(a[0], 409); n < 10 || n > 40 {
		t.Errorf("%d conflicts in 100 PUTs at rate 0.3 after 0.2 throttling", n)
	}
	if n := count(a[1], 410); n < 10 || n > 40 {
		t.Errorf("%d expired continues in 100 LISTs at rate 0.3 after 0.2 throttling", n)
	}
	if n := count(a[2], 429); n < 8 || n > 35 {
		t.Errorf("%d throttled DELETEs of 100 at rate 0.2", n)
	}
	if n := count(a[2], 409) + count(a[2], 410); n != 0 {
		t.Errorf("%d conflicts or expiries on DELETE", n)
	}
}

func TestConflictOnlyOnPUTWithResourceVersion(t *testing.T) {
	srv := &server{}
	c := New(Config{Seed: 1, ConflictRate: 1})
	rt := c.Wrap(srv)

	resp := do(t, rt, "PUT", "/apis/karpenter.sh/v1/nodeclaims/c/status", jsonBody("9"))
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("PUT with resourceVersion at rate 1 = %d %s, want 409 application/json", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	st := decodeStatus(t, resp)
	err := &apierrors.StatusError{ErrStatus: *st}
	if !apierrors.IsConflict(err) || !reflect.DeepEqual(st.Details, &metav1.StatusDetails{Group: "karpenter.sh", Kind: "nodeclaims", Name: "c"}) {
		t.Fatalf("conflict status = %+v", st)
	}
	if want := `Operation cannot be fulfilled on nodeclaims.karpenter.sh "c": the object has been modified; please apply your changes to the latest version and try again`; st.Message != want {
		t.Errorf("message = %q\nwant      %q", st.Message, want)
	}
	if len(srv.got) != 0 {
		t.Fatalf("the conflicting PUT reached the server: %v", srv.got)
	}

	// A PUT without resourceVersion is never a 409 on a real server; it is
	// passed on with its body intact.
	noRV := jsonBody("")
	if resp := do(t, rt, "PUT", "/api/v1/namespaces/ns/configmaps/cm", noRV); resp.StatusCode != 200 {
		t.Fatalf("PUT without resourceVersion = %d", resp.StatusCode)
	}
	if len(srv.bodies) != 1 || !bytes.Equal(srv.bodies[0], noRV) {
		t.Fatalf("body passed on = %q, want %q", srv.bodies, noRV)
	}
	for _, m := range []string{"POST", "PATCH", "DELETE"} {
		if resp := do(t, rt, m, "/api/v1/namespaces/ns/configmaps/cm", jsonBody("9")); resp.StatusCode != 200 {
			t.Errorf("%s = %d, want it passed on", m, resp.StatusCode)
		}
	}
	if got := c.Stats()[StatConflict]; got != 1 {
		t.Errorf("stats conflict = %d, want 1", got)
	}

	// The unsent body is closed.
	body := &closeTracker{Reader: bytes.NewReader(jsonBody("3"))}
	req := httptest.NewRequest("PUT", "/api/v1/namespaces/ns/configmaps/cm", nil)
	req.Body = body
	if resp, err := rt.RoundTrip(req); err != nil || resp.StatusCode != 409 || !body.closed {
		t.Fatalf("resp %v, err %v, body closed %v", resp, err, body.closed)
	}
}

func TestConflictReadsProtobufBodies(t *testing.T) {
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns", ResourceVersion: "1234"}, Data: map[string]string{"k": "v"}}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(cm, &buf); err != nil {
		t.Fatal(err)
	}
	if got := bodyResourceVersion(buf.Bytes(), "application/vnd.kubernetes.protobuf"); got != "1234" {
		t.Fatalf("resourceVersion of a protobuf ConfigMap = %q, want 1234", got)
	}
	cm.ResourceVersion = ""
	buf.Reset()
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(cm, &buf); err != nil {
		t.Fatal(err)
	}
	if got := bodyResourceVersion(buf.Bytes(), "application/vnd.kubernetes.protobuf"); got != "" {
		t.Fatalf("resourceVersion of a protobuf ConfigMap without one = %q", got)
	}
	if got := bodyResourceVersion([]byte("\xa1\x00"), "application/cbor"); got != "" {
		t.Fatalf("CBOR is not read, got %q", got)
	}
}

func TestTooManyRequestsIsAPFs(t *testing.T) {
	srv := &server{}
	c := New(Config{Seed: 1, TooManyRequestsRate: 1})
	resp := do(t, c.Wrap(srv), "GET", "/api/v1/nodes?watch=true", nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" ||
		resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
		resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID") == "" ||
		string(b) != "Too many requests, please try again later.\n" {
		t.Fatalf("429 = %d %v %q", resp.StatusCode, resp.Header, b)
	}
	if len(srv.got) != 0 || c.Stats()[StatTooManyRequests] != 1 {
		t.Fatalf("server got %v, stats %v", srv.got, c.Stats())
	}
}

func TestExpiredContinueReissuesTheToken(t *testing.T) {
	c := New(Config{Seed: 1, ExpiredContinueRate: 1})
	rt := c.Wrap(&server{})
	// The API server's token: {"v":"meta.k8s.io/v1","rv":5,"start":"cm\u0000"}.
	token := "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NSwic3RhcnQiOiJjbVx1MDAwMCJ9"
	resp := do(t, rt, "GET", "/api/v1/namespaces/ns/configmaps?limit=1&continue="+token, nil)
	if resp.StatusCode != http.StatusGone {
		t.Fatalf("list with continue at rate 1 = %d", resp.StatusCode)
	}
	st := decodeStatus(t, resp)
	if !apierrors.IsResourceExpired(&apierrors.StatusError{ErrStatus: *st}) || !strings.HasPrefix(st.Message, "The provided continue parameter is too old") {
		t.Fatalf("status = %+v", st)
	}
	next, ok := reissueContinue(token)
	if !ok || st.Continue != next {
		t.Fatalf("re-issued token = %q, want %q", st.Continue, next)
	}
	var tok continueToken
	raw, _ := base64.RawURLEncoding.DecodeString(next)
	if err := json.Unmarshal(raw, &tok); err != nil || tok.ResourceVersion != -1 || tok.StartKey != "cm\x00" {
		t.Fatalf("re-issued token %s = %+v, %v", raw, tok, err)
	}
	// A token the server cannot have issued gets the plain message.
	resp = do(t, rt, "GET", "/api/v1/namespaces/ns/configmaps?limit=1&continue=garbage", nil)
	if st := decodeStatus(t, resp); st.Continue != "" || st.Reason != metav1.StatusReasonExpired {
		t.Fatalf("status for a bad token = %+v", st)
	}
	// The first page (no token) is never expired.
	if resp := do(t, rt, "GET", "/api/v1/namespaces/ns/configmaps?limit=1", nil); resp.StatusCode != 200 {
		t.Fatalf("first page = %d", resp.StatusCode)
	}
}

func TestStatusNegotiation(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                    false,
		"application/json":                    false,
		"application/vnd.kubernetes.protobuf": true,
		"application/vnd.kubernetes.protobuf,application/json":             true,
		"application/json,application/vnd.kubernetes.protobuf":             false,
		"application/json;q=0.5,application/vnd.kubernetes.protobuf;q=0.9": true,
		"application/vnd.kubernetes.protobuf;q=0,application/json":         false,
		"*/*": false,
	} {
		if got := prefersProtobuf(accept); got != want {
			t.Errorf("prefersProtobuf(%q) = %v", accept, got)
		}
	}
	// A protobuf Status decodes with client-go's own protobuf decoder.
	b, err := encodeStatus(apierrors.NewResourceExpired("gone").ErrStatus, contentTypeProtobuf)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := obj.(*metav1.Status); !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
		t.Fatalf("decoded %T %+v", obj, obj)
	}
}

// pipeServer answers a watch with a stream the test writes frames into.
type pipeServer struct {
	contentType string
	w           *io.PipeWriter
	ready       chan struct{}
}

func (p *pipeServer) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	p.w = pw
	go func() { <-req.Context().Done(); _ = pr.CloseWithError(req.Context().Err()) }()
	close(p.ready)
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {p.contentType}}, Body: pr, Request: req}, nil
}

func TestWatchCutFallsBetweenFrames(t *testing.T) {
	// A frame written in two halves across the cut must arrive whole or
	// not at all, followed by the ERROR event.
	srv := &pipeServer{contentType: "application/json", ready: make(chan struct{})}
	c := New(Config{Seed: 1, WatchLifetimeMax: 300 * time.Millisecond, ExpireWatches: true})
	req := httptest.NewRequest("GET", "/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=17", nil)
	// The same seed draws the same life in a fresh Chaos: make sure it
	// leaves time for the first frame to go through.
	if life := New(c.cfg).decide(req, Parse(req)).watchLife; life < 50*time.Millisecond {
		t.Fatalf("seed 1 draws a %v watch life; pick a seed that leaves time for a frame", life)
	}
	resp, err := c.Wrap(srv).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	<-srv.ready
	go func() {
		_, _ = srv.w.Write([]byte(`{"type":"ADDED","object":{"kind":"ConfigMap"}}` + "\n" + `{"type":"MODIF`))
		// the rest of the second frame never comes before the cut
	}()
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(resp.Body); done <- b }()
	var got []byte
	select {
	case got = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch was not cut within 5s at WatchLifetimeMax 300ms")
	}
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != 2 || lines[0] != `{"type":"ADDED","object":{"kind":"ConfigMap"}}` {
		t.Fatalf("stream = %q", got)
	}
	var ev struct {
		Type   string        `json:"type"`
		Object metav1.Status `json:"object"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "ERROR" || ev.Object.Code != 410 || ev.Object.Reason != metav1.StatusReasonExpired ||
		ev.Object.Message != "too old resource version: 17 (18)" || ev.Object.Kind != "Status" {
		t.Fatalf("last event = %+v", ev)
	}
	if st := c.Stats(); st[StatWatchExpired] != 1 {
		t.Fatalf("stats = %v", st)
	}
	_ = resp.Body.Close()
}

func TestWatchCloseStopsTheStream(t *testing.T) {
	// Closing the body (watch.Stop) before the cut ends the upstream
	// request and counts no fault.
	srv := &pipeServer{contentType: "application/vnd.kubernetes.protobuf;stream=watch", ready: make(chan struct{})}
	c := New(Config{Seed: 1, WatchLifetimeMax: time.Hour, ExpireWatches: true})
	req := httptest.NewRequest("GET", "/api/v1/pods?watch=1", nil)
	resp, err := c.Wrap(srv).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	<-srv.ready
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	// The upstream body reads the cancelled context's error once closed.
	if _, err := srv.w.Write([]byte{0, 0, 0, 1, 0}); err == nil {
		t.Fatalf("upstream still open after Close: %v", err)
	}
	if st := c.Stats(); st[StatWatchExpired]+st[StatWatchClosed] != 0 {
		t.Fatalf("stats after a client close = %v", st)
	}
}
