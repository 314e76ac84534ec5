package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// PageSize is the list page size: large enough for few round trips, small
// enough that one answer never holds a whole large cluster in memory.
const PageSize = 500

// maxListRestarts bounds how often a paged read starts over because its
// continue token expired (etcd compacted the revision it was reading at).
const maxListRestarts = 3

// List reads a whole list in pages of PageSize and hands each page to each,
// in order, once all of them were read. A continue token that expired
// restarts the read, so each never sees an object twice.
func List[L metav1.ListInterface](ctx context.Context, opts metav1.ListOptions, list func(context.Context, metav1.ListOptions) (L, error), each func(L)) error {
	opts.Limit = PageSize
	var pages []L
	for restarts := 0; ; {
		page, err := list(ctx, opts)
		if apierrors.IsResourceExpired(err) && opts.Continue != "" && restarts < maxListRestarts {
			restarts++
			pages, opts.Continue = pages[:0], ""
			continue
		}
		if err != nil {
			return fmt.Errorf("listing page %d: %w", len(pages)+1, err)
		}
		pages = append(pages, page)
		if page.GetContinue() == "" {
			break
		}
		opts.Continue = page.GetContinue()
	}
	for _, p := range pages {
		each(p)
	}
	return nil
}

// AllNodeClaims lists every NodeClaim, in pages.
func AllNodeClaims(ctx context.Context, c *Clients) ([]*karpv1.NodeClaim, error) {
	var out []*karpv1.NodeClaim
	err := List(ctx, metav1.ListOptions{}, c.NodeClaims.List, func(l *karpv1.NodeClaimList) {
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	return out, nil
}

// AllNodes lists every Node, in pages.
func AllNodes(ctx context.Context, c *Clients) ([]*corev1.Node, error) {
	var out []*corev1.Node
	err := List(ctx, metav1.ListOptions{}, c.Core.CoreV1().Nodes().List, func(l *corev1.NodeList) {
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return out, nil
}

// AllNodePools lists every NodePool, in pages.
func AllNodePools(ctx context.Context, c *Clients) ([]*karpv1.NodePool, error) {
	var out []*karpv1.NodePool
	err := List(ctx, metav1.ListOptions{}, c.NodePools.List, func(l *karpv1.NodePoolList) {
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodepools: %w", err)
	}
	return out, nil
}
