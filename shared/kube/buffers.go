package kube

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/gentype"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	"github.com/karpless/karpless/shared/core/cluster"
)

// CapacityBuffers is the typed client of autoscaling.x-k8s.io/v1beta1
// CapacityBuffers in one namespace ("" lists every namespace).
type CapacityBuffers = *gentype.ClientWithList[*cbv1.CapacityBuffer, *cbv1.CapacityBufferList]

// CapacityBuffers is the client of the buffers of one namespace.
func (c *Clients) CapacityBuffers(namespace string) CapacityBuffers {
	return gentype.NewClientWithList("capacitybuffers", c.bufferREST, c.bufferParams, namespace,
		func() *cbv1.CapacityBuffer { return &cbv1.CapacityBuffer{} },
		func() *cbv1.CapacityBufferList { return &cbv1.CapacityBufferList{} })
}

// ReadCapacityBuffers lists every CapacityBuffer and reads the one object
// each refers to, as Karpenter does: the PodTemplate, or the Deployment,
// StatefulSet or ReplicaSet (its pod template and spec.replicas). None when
// the CRD is not installed. A referent that is missing, or that the
// functions may not read, is the buffer's problem (its status says so);
// any other failure fails the read, since a tick that lost a buffer would
// let consolidation take its room.
func (c *Clients) ReadCapacityBuffers(ctx context.Context) ([]*cluster.CapacityBuffer, int, error) {
	if c.bufferREST == nil {
		return nil, 0, nil
	}
	l, err := c.CapacityBuffers("").List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		// The CRD is not installed (a cluster the bootstrap has not
		// updated yet): there are no buffers.
		return nil, 1, nil
	}
	if err != nil {
		return nil, 1, fmt.Errorf("listing capacitybuffers: %w", err)
	}
	requests := 1
	out := make([]*cluster.CapacityBuffer, 0, len(l.Items))
	for i := range l.Items {
		b := &l.Items[i]
		b.ManagedFields = nil
		cb := &cluster.CapacityBuffer{Buffer: b}
		n, err := c.readReferent(ctx, cb)
		requests += n
		switch {
		case err == nil:
		case apierrors.IsNotFound(err):
			cb.NotFound, cb.Error = true, err.Error()
		case apierrors.IsForbidden(err) || errors.Is(err, errUnsupported):
			cb.Error = err.Error()
		default:
			return nil, requests, fmt.Errorf("reading what capacitybuffer %s/%s refers to: %w", b.Namespace, b.Name, err)
		}
		out = append(out, cb)
	}
	return out, requests, nil
}

var errUnsupported = errors.New("unsupported")

// readReferent fills cb's template from its reference, with one GET.
func (c *Clients) readReferent(ctx context.Context, cb *cluster.CapacityBuffer) (int, error) {
	ns, spec := cb.Buffer.Namespace, cb.Buffer.Spec
	if spec.PodTemplateRef != nil {
		pt, err := c.Core.CoreV1().PodTemplates(ns).Get(ctx, spec.PodTemplateRef.Name, metav1.GetOptions{})
		if err != nil {
			return 1, err
		}
		cb.Template, cb.TemplateGeneration = trimTemplate(pt.Template), pt.Generation
		return 1, nil
	}
	ref := spec.ScalableRef
	if ref == nil {
		return 0, nil
	}
	if ref.APIGroup != "" && ref.APIGroup != appsv1.GroupName {
		return 0, fmt.Errorf("%w scalableRef API group %q", errUnsupported, ref.APIGroup)
	}
	var (
		tmpl     corev1.PodTemplateSpec
		replicas *int32
		err      error
	)
	apps := c.Core.AppsV1()
	switch ref.Kind {
	case cbv1.KindDeployment:
		var d *appsv1.Deployment
		if d, err = apps.Deployments(ns).Get(ctx, ref.Name, metav1.GetOptions{}); err == nil {
			tmpl, replicas = d.Spec.Template, d.Spec.Replicas
		}
	case cbv1.KindStatefulSet:
		var s *appsv1.StatefulSet
		if s, err = apps.StatefulSets(ns).Get(ctx, ref.Name, metav1.GetOptions{}); err == nil {
			tmpl, replicas = s.Spec.Template, s.Spec.Replicas
		}
	case cbv1.KindReplicaSet:
		var r *appsv1.ReplicaSet
		if r, err = apps.ReplicaSets(ns).Get(ctx, ref.Name, metav1.GetOptions{}); err == nil {
			tmpl, replicas = r.Spec.Template, r.Spec.Replicas
		}
	default:
		return 0, fmt.Errorf("%w kind %q", errUnsupported, ref.Kind)
	}
	if err != nil {
		return 1, err
	}
	cb.Template, cb.ScalableReplicas = trimTemplate(tmpl), 1
	if replicas != nil {
		cb.ScalableReplicas = *replicas
	}
	return 1, nil
}

// trimTemplate keeps what scheduling reads of a pod template, as the
// snapshot keeps of pods.
func trimTemplate(t corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	p := cluster.TrimPod(&corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec})
	return &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels, Annotations: p.Annotations}, Spec: p.Spec}
}

// SetCapacityBufferStatus writes want as the status of this very buffer
// (by UID), each condition keeping its lastTransitionTime while its status
// does not change, and skips the write when nothing would change: a tick
// that finds the buffers as it left them writes nothing. A conflict is
// retried against a fresh read; a buffer gone or replaced by a namesake is
// no error (the next tick judges the new one). It reports whether it wrote.
func (c *Clients) SetCapacityBufferStatus(ctx context.Context, b *cbv1.CapacityBuffer, want cbv1.CapacityBufferStatus) (bool, error) {
	client := c.CapacityBuffers(b.Namespace)
	return setStatus(ctx, statusWrite[cbv1.CapacityBuffer, *cbv1.CapacityBuffer]{
		obj:      b,
		resource: cbv1.SchemeGroupVersion.WithResource("capacitybuffers").GroupResource(),
		get: func(ctx context.Context, name string) (*cbv1.CapacityBuffer, error) {
			return client.Get(ctx, name, metav1.GetOptions{})
		},
		update: func(ctx context.Context, b *cbv1.CapacityBuffer) (*cbv1.CapacityBuffer, error) {
			return client.UpdateStatus(ctx, b, metav1.UpdateOptions{})
		},
		set: func(_, next *cbv1.CapacityBuffer) {
			conds := next.Status.Conditions
			next.Status = *want.DeepCopy()
			next.Status.Conditions = conds
			for _, w := range want.Conditions {
				meta.SetStatusCondition(&next.Status.Conditions, w)
			}
		},
		status: func(b *cbv1.CapacityBuffer) any { return b.Status },
	})
}
