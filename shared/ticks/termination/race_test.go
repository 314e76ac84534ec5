package termination_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/client-go/rest"

	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/snapshot"
	"github.com/karpless/karpless/shared/ticks/termination"
)

// raceEdge counts the evictions the API server accepts, and orders two
// drainers: each closes listed once it has read the node's pods and evicted
// once it has sent its first eviction; its evictions wait for waitFor.
type raceEdge struct {
	next                http.RoundTripper
	listed, evicted     chan struct{}
	waitFor             chan struct{}
	listOnce, evictOnce sync.Once
	mu                  *sync.Mutex
	evictions           map[string]int
}

func (r *raceEdge) RoundTrip(req *http.Request) (*http.Response, error) {
	eviction := req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/eviction")
	if eviction {
		select { // bounded, so a drainer that never gets there cannot hang the test
		case <-r.waitFor:
		case <-time.After(10 * time.Second):
		}
		defer r.evictOnce.Do(func() { close(r.evicted) })
	}
	resp, err := r.next.RoundTrip(req)
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods") && strings.Contains(req.URL.RawQuery, "spec.nodeName") {
		r.listOnce.Do(func() { close(r.listed) })
	}
	if eviction && err == nil && resp.StatusCode < 300 {
		parts := strings.Split(req.URL.Path, "/")
		r.mu.Lock()
		r.evictions[parts[len(parts)-2]]++
		r.mu.Unlock()
	}
	return resp, err
}

// TestTwoDrainersEvictOnce: the interruption function and the disruption
// tick may drain the same node at once, both reading its pods running. The
// second eviction of a pod the first already set terminating must not be
// accepted: no pod is evicted twice.
func TestTwoDrainersEvictOnce(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	var mu sync.Mutex
	evictions := map[string]int{}
	drainer := func(edge *raceEdge) (*termination.Terminator, *cluster.Snapshot) {
		cfg := rest.CopyConfig(w.e.Cluster.RESTConfig)
		edge.mu, edge.evictions = &mu, evictions
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { edge.next = rt; return edge })
		kc, err := kube.NewClients(cfg)
		if err != nil {
			t.Fatal(err)
		}
		awsCfg, err := w.emu.AWSConfig("disruption", 3)
		if err != nil {
			t.Fatal(err)
		}
		log := slog.New(slog.DiscardHandler)
		snap, err := snapshot.Take(ctx, kc, w.clk)
		if err != nil {
			t.Fatal(err)
		}
		return &termination.Terminator{Kube: kc, Instances: instance.NewProvider(ec2.NewFromConfig(awsCfg), clusterName), Clock: w.clk, Log: log,
			Events: record.NewRecorder(kc.Core.CoreV1(), w.clk, log), Metrics: record.NewMetrics("Test")}, snap
	}
	// Both read the node's pods running; the second evicts first, then the
	// first, from its now stale read.
	a := &raceEdge{listed: make(chan struct{}), evicted: make(chan struct{})}
	b := &raceEdge{listed: make(chan struct{}), evicted: make(chan struct{}), waitFor: a.listed}
	a.waitFor = b.evicted
	first, firstSnap := drainer(a)
	second, secondSnap := drainer(b)
	var wg sync.WaitGroup
	for _, d := range []struct {
		t    *termination.Terminator
		snap *cluster.Snapshot
	}{{first, firstSnap}, {second, secondSnap}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := d.t.Reconcile(ctx, d.snap); err != nil {
				t.Logf("drain: %v", err)
			}
		}()
	}
	wg.Wait()
	total := 0
	for pod, n := range evictions {
		total += n
		if n > 1 {
			t.Errorf("pod %s evicted %d times by two drainers", pod, n)
		}
	}
	if total == 0 {
		t.Fatal("neither drainer evicted anything: the test did not race")
	}
}
