package snapshot

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"

	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env, kubetest.Options{})) }

func parallel(n, workers int, f func(i int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// TestSnapshotAtScale takes a snapshot of 100 nodes and 1,100 pods (1,000
// bound, 100 pending: three pages of pods) and checks every pod is read,
// trimmed and keeps its requests. BenchmarkSnapshotAtScale reports the
// bytes and time at 500 nodes and 5,000 pods, protobuf against JSON.
func TestSnapshotAtScale(t *testing.T) {
	e := kubetest.Need(t, env)
	snap := fillAndTake(t, e, 100, 2*PageSize+100, 100)
	t.Logf("protobuf snapshot of %d pods / %d nodes: %d bytes in %d requests", len(snap.Pods), len(snap.Nodes), snap.Stats.BytesRead, snap.Stats.Requests)
}

// BenchmarkSnapshotAtScale reports a snapshot of 500 nodes and 5,000 pods
// (4,500 bound, 500 pending): its bytes, requests and time for protobuf
// (what the functions use), and the same pods' bytes as one JSON list.
func BenchmarkSnapshotAtScale(b *testing.B) {
	e := kubetest.Need(b, env)
	ctx := context.Background()
	snap := fillAndTake(b, e, 500, 5000, 500)
	for b.Loop() {
		s, err := Take(ctx, e.Clients, clock.RealClock{})
		if err != nil {
			b.Fatal(err)
		}
		snap = s
	}
	b.ReportMetric(float64(snap.Stats.BytesRead)/(1<<20), "MiB-protobuf")
	b.ReportMetric(float64(snap.Stats.Requests), "requests")
	jsonClients, err := kube.NewClients(rest.CopyConfig(e.Cluster.RESTConfig))
	if err != nil {
		b.Fatal(err)
	}
	before := jsonClients.Read.Total()
	var list corev1.PodList
	if err := jsonClients.Core.CoreV1().RESTClient().Get().Resource("pods").SetHeader("Accept", "application/json").Do(ctx).Into(&list); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(jsonClients.Read.Total()-before)/(1<<20), "MiB-json")
}

// fillAndTake creates nodes and pods (the last pods-pending bound, round
// robin) in a namespace of its own and takes a snapshot, checking that
// each pod of it is there, trimmed, with its requests.
func fillAndTake(tb testing.TB, e *kubetest.Env, nodes, pods, pending int) *cluster.Snapshot {
	tb.Helper()
	ctx := context.Background()
	ns := e.Namespace(tb)
	prefix := kubetest.Name(tb)
	if err := parallel(nodes, 16, func(i int) error {
		_, err := e.Clients.Core.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-node-%d", prefix, i), Labels: map[string]string{
				"kubernetes.io/hostname": fmt.Sprintf("%s-node-%d", prefix, i), "topology.kubernetes.io/zone": "us-west-2a",
				"node.kubernetes.io/instance-type": "m5.xlarge", "karpenter.sh/nodepool": "default",
			}},
			Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///us-west-2a/i-%017x", i)},
		}, metav1.CreateOptions{})
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = parallel(nodes, 16, func(i int) error {
			return e.Clients.Core.CoreV1().Nodes().Delete(context.Background(), fmt.Sprintf("%s-node-%d", prefix, i), metav1.DeleteOptions{})
		})
	})
	if err := parallel(pods, 16, func(i int) error {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: ns, Labels: map[string]string{"app": fmt.Sprintf("web-%d", i%50)},
				Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"a very":"long annotation that the snapshot drops"}`}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "public.ecr.aws/docker/library/nginx:1.27",
				Command: []string{"/bin/sh", "-c", "exec nginx -g 'daemon off;'"},
				Env:     []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "REGION", Value: "us-west-2"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
				}},
			}}},
		}
		if i >= pending {
			p.Spec.NodeName = fmt.Sprintf("%s-node-%d", prefix, i%nodes)
		}
		_, err := e.Clients.Core.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	}); err != nil {
		tb.Fatal(err)
	}

	snap, err := Take(ctx, e.Clients, clock.RealClock{})
	if err != nil {
		tb.Fatal(err)
	}
	var ours, bound int
	for _, p := range snap.Pods {
		if p.Namespace == ns {
			ours++
			if p.Spec.NodeName != "" {
				bound++
			}
			if p.Annotations != nil || p.Spec.Containers[0].Env != nil || p.Spec.Containers[0].Image != "" {
				tb.Fatalf("pod %s was not trimmed: %+v", p.Name, p)
			}
			if p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 250 {
				tb.Fatalf("pod %s lost its requests", p.Name)
			}
		}
	}
	if ours != pods || bound != pods-pending {
		tb.Fatalf("snapshot has %d pods (%d bound), want %d (%d)", ours, bound, pods, pods-pending)
	}
	if len(snap.Nodes) < nodes {
		tb.Fatalf("snapshot has %d nodes, want >= %d", len(snap.Nodes), nodes)
	}
	return snap
}

// pageCounter counts the NodeClaim list requests that asked for a page.
type pageCounter struct {
	next  http.RoundTripper
	mu    sync.Mutex
	paged int
	whole int
}

func (p *pageCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/nodeclaims") {
		p.mu.Lock()
		if r.URL.Query().Get("limit") != "" {
			p.paged++
		} else {
			p.whole++
		}
		p.mu.Unlock()
	}
	return p.next.RoundTrip(r)
}

// TestNodeClaimsArePaged: a cluster with more NodeClaims than a page is
// read in pages, never in one unbounded list.
func TestNodeClaimsArePaged(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	prefix := kubetest.Name(t)
	n := PageSize + 1
	err := parallel(n, 8, func(i int) error {
		_, err := e.Clients.NodeClaims.Create(ctx, &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%04d", prefix, i)},
			Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}}}},
		}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Clients.NodeClaims.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	counter := &pageCounter{}
	cfg := rest.CopyConfig(e.Cluster.RESTConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	kc, err := kube.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := Take(ctx, kc, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	mine := 0
	for _, nc := range snap.NodeClaims {
		if strings.HasPrefix(nc.Name, prefix) {
			mine++
		}
	}
	if mine != n {
		t.Fatalf("snapshot holds %d of the %d NodeClaims", mine, n)
	}
	claims, err := kube.AllNodeClaims(ctx, kc)
	if err != nil || len(claims) < n {
		t.Fatalf("AllNodeClaims: %d claims, %v", len(claims), err)
	}
	if counter.whole > 0 || counter.paged < 4 {
		t.Fatalf("%d unbounded NodeClaim lists and %d pages; want pages only (two reads of two pages each)", counter.whole, counter.paged)
	}
}
