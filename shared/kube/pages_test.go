package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeNodes serves n nodes in pages of the requested limit, failing the
// continued requests listed in expire with 410 Expired, as after etcd
// compaction.
type fakeNodes struct {
	n      int
	expire map[int]bool // call number -> answer 410
	calls  int
	limits []int64
}

func (f *fakeNodes) list(_ context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	f.calls++
	f.limits = append(f.limits, o.Limit)
	if f.expire[f.calls] && o.Continue != "" {
		return nil, apierrors.NewResourceExpired("The provided continue parameter is too old")
	}
	start := 0
	if o.Continue != "" {
		start, _ = strconv.Atoi(o.Continue)
	}
	end := min(start+int(o.Limit), f.n)
	l := &corev1.NodeList{}
	for i := start; i < end; i++ {
		l.Items = append(l.Items, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%04d", i)}})
	}
	if end < f.n {
		l.Continue = strconv.Itoa(end)
	}
	return l, nil
}

func TestList(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n         int
		expire    map[int]bool
		wantCalls int
		wantErr   bool
	}{
		{"one page", 10, nil, 1, false},
		{"several pages", 2*PageSize + 1, nil, 3, false},
		{"expired token starts over", 2*PageSize + 1, map[int]bool{2: true}, 5, false},
		{"expiring again and again gives up", 2*PageSize + 1, map[int]bool{2: true, 4: true, 6: true, 8: true}, 8, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeNodes{n: tc.n, expire: tc.expire}
			var names []string
			err := List(context.Background(), metav1.ListOptions{}, f.list, func(l *corev1.NodeList) {
				for _, n := range l.Items {
					names = append(names, n.Name)
				}
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if f.calls != tc.wantCalls {
				t.Errorf("%d calls, want %d", f.calls, tc.wantCalls)
			}
			for _, l := range f.limits {
				if l != PageSize {
					t.Fatalf("a page asked for %d objects, want %d", l, PageSize)
				}
			}
			if tc.wantErr {
				return
			}
			seen := map[string]bool{}
			for _, n := range names {
				if seen[n] {
					t.Fatalf("%s handed out twice", n)
				}
				seen[n] = true
			}
			if len(names) != tc.n {
				t.Fatalf("%d nodes, want %d", len(names), tc.n)
			}
		})
	}
	// Other errors end the read at once.
	boom := errors.New("boom")
	err := List(context.Background(), metav1.ListOptions{}, func(context.Context, metav1.ListOptions) (*corev1.NodeList, error) {
		return nil, apierrors.NewInternalError(boom)
	}, func(*corev1.NodeList) { t.Fatal("each called after an error") })
	if !apierrors.IsInternalError(err) {
		t.Fatalf("err = %v", err)
	}
}
