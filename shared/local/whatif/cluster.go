package whatif

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/clock"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/snapshot"
)

// UnreachableError is an API server that did not answer.
type UnreachableError struct {
	Server string
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the cluster's API server %s: %v", e.Server, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// CRDsMissingError is a cluster without Karpenter's v1 API.
type CRDsMissingError struct{ Missing []string }

func (e *CRDsMissingError) Error() string {
	return fmt.Sprintf("the cluster does not serve %s: the Karpenter v1 CRDs are not installed (Karpless's bootstrap installs them on cdk deploy; a Karpenter chart older than v1 serves other versions)",
		strings.Join(e.Missing, ", "))
}

// Preflight checks that the API server answers and serves the Karpenter v1
// resources, so that later failures are not mistaken for these.
func Preflight(ctx context.Context, c *kube.Clients) error {
	disc := discovery.ToDiscoveryInterfaceWithContext(c.Core.Discovery())
	if _, err := disc.ServerVersionWithContext(ctx); err != nil {
		return &UnreachableError{Server: c.Config.Host, Err: err}
	}
	var missing []string
	for _, want := range []struct{ gv, resource string }{
		{karpv1.SchemeGroupVersion.String(), "nodepools"},
		{karpv1.SchemeGroupVersion.String(), "nodeclaims"},
		{awsv1.SchemeGroupVersion.String(), "ec2nodeclasses"},
	} {
		list, err := disc.ServerResourcesForGroupVersionWithContext(ctx, want.gv)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("discovering %s: %w", want.gv, err)
		}
		found := false
		if list != nil {
			for _, r := range list.APIResources {
				found = found || r.Name == want.resource
			}
		}
		if !found {
			missing = append(missing, want.resource+"."+want.gv)
		}
	}
	if len(missing) > 0 {
		return &CRDsMissingError{Missing: missing}
	}
	return ctx.Err()
}

// Read takes a File from a live cluster: the snapshot the functions take
// (shared/kube/snapshot), the pricing book and the unavailable-offerings marks
// from their ConfigMaps in namespace. It only reads. The ConfigMaps are
// optional: when one cannot be read the File's Market says why.
func Read(ctx context.Context, c *kube.Clients, namespace, source string) (*File, error) {
	clk := clock.RealClock{}
	if err := Preflight(ctx, c); err != nil {
		return nil, err
	}
	snap, err := snapshot.Take(ctx, c, clk)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("%w (the identity of this kubeconfig must be allowed to list pods, nodes, the Karpenter objects, DaemonSets, PDBs and volumes cluster-wide; read-only access such as the view ClusterRole plus the Karpenter kinds is enough)", err)
		}
		return nil, err
	}
	var m Market
	cms := c.Core.CoreV1().ConfigMaps(namespace)
	cm, err := cms.Get(ctx, pricing.ConfigMapName, metav1.GetOptions{})
	switch {
	case err != nil:
		m.Notes = append(m.Notes, configMapNote(namespace, pricing.ConfigMapName, err))
	case len(cm.BinaryData["book"]) == 0:
		m.Notes = append(m.Notes, fmt.Sprintf("ConfigMap %s/%s is empty: no provisioner tick has saved prices yet", namespace, pricing.ConfigMapName))
	default:
		if m.Book, err = decodeBook(cm.BinaryData["book"]); err != nil {
			m.Notes = append(m.Notes, fmt.Sprintf("ConfigMap %s/%s cannot be decoded: %v", namespace, pricing.ConfigMapName, err))
		}
	}
	cm, err = cms.Get(ctx, unavailable.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			m.Notes = append(m.Notes, configMapNote(namespace, unavailable.ConfigMapName, err))
		}
	} else {
		m.Unavailable = decodeMarks(cm.Data)
	}
	return NewFile(snap, m, clk.Now(), source, namespace), nil
}

func configMapNote(ns, name string, err error) string {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("ConfigMap %s/%s not found (is Karpless deployed, with this namespace?)", ns, name)
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("ConfigMap %s/%s cannot be read with this kubeconfig (forbidden)", ns, name)
	}
	return fmt.Sprintf("ConfigMap %s/%s cannot be read: %v", ns, name, err)
}

// decodeBook reads the karpless-pricing ConfigMap's "book" entry:
// gzip-compressed JSON of a pricing.Book.
func decodeBook(data []byte) (*pricing.Book, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return nil, err
	}
	b := &pricing.Book{}
	if err := json.Unmarshal(raw, b); err != nil {
		return nil, err
	}
	if b.UpdatedAt.IsZero() {
		return nil, errors.New("no updatedAt")
	}
	return b, nil
}

// decodeMarks reads the karpless-unavailable-offerings ConfigMap: key
// "<capacity-type>_<instance-type>_<zone>", value the RFC 3339 expiry.
// Entries it cannot read are skipped, as the functions skip them.
func decodeMarks(data map[string]string) []Mark {
	var out []Mark
	for k, v := range data {
		parts := strings.Split(k, "_")
		until, err := time.Parse(time.RFC3339, v)
		if err != nil || len(parts) != 3 {
			continue
		}
		out = append(out, Mark{CapacityType: parts[0], InstanceType: parts[1], Zone: parts[2], Until: until})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.CapacityType+a.InstanceType+a.Zone < b.CapacityType+b.InstanceType+b.Zone
	})
	return out
}
