package kube

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
)

// object is a typed API object whose status Karpless writes.
type object[T any] interface {
	*T
	metav1.Object
	DeepCopy() *T
}

// statusWrite is one status write: the object as last read, how to read it
// again, how to write its status, and the status a copy of it should have.
type statusWrite[T any, P object[T]] struct {
	obj      P
	resource schema.GroupResource
	get      func(ctx context.Context, name string) (P, error)
	update   func(ctx context.Context, obj P) (P, error)
	// set makes next's status what this tick found (next is a copy of cur).
	set func(cur, next P)
	// status is the part compared to decide whether to write.
	status func(P) any
}

// setStatus is the one way Karpless writes the status of the objects it
// only reports on (NodeOverlays, CapacityBuffers): to this very object (by
// UID), and only when the status would change, so a tick that finds them
// as it left them writes nothing. A conflict is retried against a fresh
// read; an object gone or replaced by a namesake is no error (the next
// tick judges the new one). It reports whether it wrote.
func setStatus[T any, P object[T]](ctx context.Context, w statusWrite[T, P]) (bool, error) {
	cur, wrote := w.obj, false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			fresh, err := w.get(ctx, w.obj.GetName())
			if err != nil {
				return err
			}
			if fresh.GetUID() != w.obj.GetUID() {
				return apierrors.NewNotFound(w.resource, w.obj.GetName())
			}
			cur = fresh
		}
		next := P(cur.DeepCopy())
		w.set(cur, next)
		if equality.Semantic.DeepEqual(w.status(cur), w.status(next)) {
			return nil
		}
		if _, err := w.update(ctx, next); err != nil {
			cur = nil
			return err
		}
		wrote = true
		return nil
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		name := w.obj.GetName()
		if ns := w.obj.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		return false, fmt.Errorf("updating status of %s %s: %w", w.resource.Resource, name, err)
	}
	return wrote, nil
}
