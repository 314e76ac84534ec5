package watch

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	watchapi "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// TestNodePoolWork: the watcher's NodePool events (static.Changed), and
// which of its first list are recent enough to be work.
func TestNodePoolWork(t *testing.T) {
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	recent := func(at time.Time) bool { return !at.IsZero() && start.Sub(at) < 10*time.Second }
	pool := func(replicas *int64, created time.Time, readyAt time.Time) *karpv1.NodePool {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: metav1.NewTime(created)}}
		np.Spec.Replicas = replicas
		np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
		if !readyAt.IsZero() {
			np.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(readyAt)}}
		}
		return np
	}
	two, three := new(int64(2)), new(int64(3))
	old := start.Add(-time.Hour)
	for _, c := range []struct {
		name     string
		old, cur *karpv1.NodePool
		initial  bool
		want     bool
	}{
		{"created while watching", nil, pool(two, start, time.Time{}), false, true},
		{"listed, created just before", nil, pool(two, start.Add(-3*time.Second), time.Time{}), true, true},
		{"listed, Ready just before", nil, pool(two, old, start.Add(-3*time.Second)), true, true},
		{"listed, nothing recent", nil, pool(two, old, old), true, false},
		{"listed, dynamic and new", nil, pool(nil, start, time.Time{}), true, false},
		{"scaled up", pool(two, old, old), pool(three, old, old), false, true},
		{"scaled down", pool(three, old, old), pool(two, old, old), false, true},
		{"status written, nothing changed", pool(two, old, old), pool(two, old, old), false, false},
		{"became Ready", pool(two, old, time.Time{}), pool(two, old, start), false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := nodePoolWork(c.old, c.cur, c.initial, recent); got != c.want {
				t.Errorf("work %v, want %v", got, c.want)
			}
		})
	}
}

// TestOptionalInformer: a kind whose CRD is not installed, or that the
// watcher's grants do not cover yet, is left unwatched; a passing failure
// is the informer's to retry.
func TestOptionalInformer(t *testing.T) {
	w := &Watcher{Log: slog.New(slog.DiscardHandler)}
	gr := schema.GroupResource{Group: "autoscaling.x-k8s.io", Resource: "capacitybuffers"}
	for _, c := range []struct {
		name    string
		ok      bool
		err     error
		watched bool
	}{
		{"no client", false, nil, false},
		{"listed", true, nil, true},
		{"CRD not installed", true, apierrors.NewNotFound(gr, ""), false},
		{"not granted", true, apierrors.NewForbidden(gr, "", errors.New("no")), false},
		{"throttled", true, apierrors.NewTooManyRequests("slow down", 1), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			lw := &cache.ListWatch{
				ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
					return &cbv1.CapacityBufferList{}, c.err
				},
				WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watchapi.Interface, error) {
					return watchapi.NewEmptyWatch(), nil
				},
			}
			if got := w.optionalInformer(context.Background(), "capacitybuffers", c.ok, lw, &cbv1.CapacityBuffer{}) != nil; got != c.watched {
				t.Errorf("watched %v, want %v", got, c.watched)
			}
		})
	}
}
