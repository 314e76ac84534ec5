package snapshot

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"

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

// TestSnapshotAtScale takes a snapshot of 500 nodes and 5,000 pods (4,500
// bound, 500 pending) and reports the bytes read and the time taken, for
// protobuf (what the functions use) and JSON.
func TestSnapshotAtScale(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	prefix := kubetest.Name(t)
	const nodes, pods = 500, 5000
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
		t.Fatal(err)
	}
	t.Cleanup(func() {
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
		if i >= 500 {
			p.Spec.NodeName = fmt.Sprintf("%s-node-%d", prefix, i%nodes)
		}
		_, err := e.Clients.Core.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	snap, err := Take(ctx, e.Clients, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	var ours, bound int
	for _, p := range snap.Pods {
		if p.Namespace == ns {
			ours++
			if p.Spec.NodeName != "" {
				bound++
			}
			if p.Annotations != nil || p.Spec.Containers[0].Env != nil || p.Spec.Containers[0].Image != "" {
				t.Fatalf("pod %s was not trimmed: %+v", p.Name, p)
			}
			if p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 250 {
				t.Fatalf("pod %s lost its requests", p.Name)
			}
		}
	}
	if ours != pods || bound != pods-500 {
		t.Fatalf("snapshot has %d pods (%d bound), want %d (%d)", ours, bound, pods, pods-500)
	}
	if len(snap.Nodes) < nodes {
		t.Fatalf("snapshot has %d nodes, want >= %d", len(snap.Nodes), nodes)
	}
	t.Logf("protobuf snapshot of %d pods / %d nodes: %d bytes (%.1f MiB) in %d requests, %s",
		len(snap.Pods), len(snap.Nodes), snap.Stats.BytesRead, float64(snap.Stats.BytesRead)/(1<<20), snap.Stats.Requests, snap.Stats.Duration.Round(time.Millisecond))

	jsonCfg := *e.Cluster.RESTConfig
	jsonClients, err := kube.NewClients(&jsonCfg)
	if err != nil {
		t.Fatal(err)
	}
	before := jsonClients.Read.Total()
	start := time.Now()
	var list corev1.PodList
	if err := jsonClients.Core.CoreV1().RESTClient().Get().Resource("pods").SetHeader("Accept", "application/json").Do(ctx).Into(&list); err != nil {
		t.Fatal(err)
	}
	t.Logf("the same pods as one JSON list: %d bytes (%.1f MiB) in %s", jsonClients.Read.Total()-before, float64(jsonClients.Read.Total()-before)/(1<<20), time.Since(start).Round(time.Millisecond))
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
