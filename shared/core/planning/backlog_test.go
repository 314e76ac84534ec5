package planning_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/core/planning"
)

func TestBounded(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	pod := func(ns, name string, age int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-time.Duration(age) * time.Second))}}
	}
	a, b, c, d := pod("x", "a", 10), pod("x", "b", 30), pod("x", "c", 20), pod("y", "d", 30)
	same1, same2 := pod("n", "p2", 5), pod("n", "p1", 5)
	for _, tc := range []struct {
		name     string
		pods     []*corev1.Pod
		max      int
		want     []*corev1.Pod
		wantLeft int
	}{
		{"no bound", []*corev1.Pod{a, b, c}, 0, []*corev1.Pod{a, b, c}, 0},
		{"under the bound", []*corev1.Pod{a, b, c}, 3, []*corev1.Pod{a, b, c}, 0},
		{"oldest kept, in their order", []*corev1.Pod{a, b, c}, 2, []*corev1.Pod{b, c}, 1},
		{"ties broken by namespace", []*corev1.Pod{d, a, b}, 1, []*corev1.Pod{b}, 2},
		{"ties broken by name", []*corev1.Pod{same1, same2}, 1, []*corev1.Pod{same2}, 1},
		{"empty", nil, 5, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, left := planning.Bounded(tc.pods, tc.max)
			if left != tc.wantLeft || len(got) != len(tc.want) {
				t.Fatalf("got %d pods and %d left, want %d and %d", len(got), left, len(tc.want), tc.wantLeft)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("pod %d: got %s, want %s", i, got[i].Name, tc.want[i].Name)
				}
			}
		})
	}
}

// TestBoundedResumes: passes that each take the bound work through a
// backlog, the oldest first, each pod once, and the pods that arrive
// meanwhile wait behind the older ones.
func TestBoundedResumes(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var backlog []*corev1.Pod
	for i := range 25 {
		backlog = append(backlog, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: string(rune('a' + i)), CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(i) * time.Second))}})
	}
	seen := map[*corev1.Pod]bool{}
	pending := backlog[:20]
	for pass := 0; len(pending) > 0; pass++ {
		if pass > 3 {
			t.Fatalf("the backlog was not worked through in 4 passes: %d left", len(pending))
		}
		kept, left := planning.Bounded(pending, 8)
		if len(kept) != min(8, len(pending)) || left != len(pending)-len(kept) {
			t.Fatalf("pass %d: kept %d, left %d of %d", pass, len(kept), left, len(pending))
		}
		var rest []*corev1.Pod
		for _, p := range pending {
			if !contains(kept, p) {
				rest = append(rest, p)
			}
		}
		for _, p := range kept {
			if seen[p] {
				t.Fatalf("pass %d provisions %s again", pass, p.Name)
			}
			seen[p] = true
			for _, q := range rest {
				if q.CreationTimestamp.Before(&p.CreationTimestamp) {
					t.Fatalf("pass %d provisions %s before the older %s", pass, p.Name, q.Name)
				}
			}
		}
		if pass == 0 {
			rest = append(rest, backlog[20:]...) // new pods arrive
		}
		pending = rest
	}
	if len(seen) != len(backlog) {
		t.Fatalf("%d of %d pods provisioned", len(seen), len(backlog))
	}
}

func contains(pods []*corev1.Pod, p *corev1.Pod) bool {
	for _, q := range pods {
		if q == p {
			return true
		}
	}
	return false
}
