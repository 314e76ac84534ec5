package shadow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/pause"
)

// ErrRefused is what a write shadow mode does not allow gets, from the
// Kubernetes transport or the AWS middleware, before anything leaves the
// process.
var ErrRefused = errors.New("shadow mode: refused")

// NamePrefix starts the name of every Lease and ConfigMap Karpless owns
// (karpless-provisioning, karpless-pricing, ...): the only ones shadow mode
// writes.
const NamePrefix = "karpless-"

// Kube wraps a Kubernetes transport (rest.Config.Wrap) so that in shadow
// mode only these writes leave the process: Events (any namespace; the
// decision records are Events too), and in Karpless's namespace its own
// Leases and state ConfigMaps (names starting karpless-, but not the pause
// switch, which only people set). Reads pass. Every other write (a node,
// a pod or its eviction, a NodeClaim, NodePool, EC2NodeClass, NodeOverlay
// or CapacityBuffer and their status, anyone else's Lease or ConfigMap) is
// refused with ErrRefused. The ticks skip those writes themselves in
// shadow mode; this is the net under them.
func Kube(namespace string) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return kubeTransport{next: next, namespace: namespace}
	}
}

type kubeTransport struct {
	next      http.RoundTripper
	namespace string
}

// decoder reads a request body (protobuf or JSON) to learn the name of an
// object being created.
var decoder = serializer.NewCodecFactory(kube.Scheme()).UniversalDeserializer()

func (t kubeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.next.RoundTrip(r)
	}
	p := parsePath(r.URL.Path)
	if why := t.refuse(r.Method, p); why != "" {
		return nil, t.refused(r, why)
	}
	if r.Method != http.MethodPost || p.name != "" || p.resource == "events" {
		return t.next.RoundTrip(r)
	}
	// A create names its object in the body: read it, and send a copy.
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	name := ""
	if obj, _, err := decoder.Decode(body, nil, nil); err == nil {
		if m, err := meta.Accessor(obj); err == nil {
			name = m.GetName()
			if name == "" {
				name = m.GetGenerateName()
			}
		}
	}
	if !ownName(p.resource, name) {
		return nil, fmt.Errorf("%w: %s %s named %q (shadow mode creates only its own karpless- leases and configmaps)", ErrRefused, r.Method, r.URL.Path, name)
	}
	c := r.Clone(r.Context())
	c.Body = io.NopCloser(bytes.NewReader(body))
	c.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return t.next.RoundTrip(c)
}

// refuse says why a write to p is refused ("" when it may go on; a create
// without a name in the path is checked on its body).
func (t kubeTransport) refuse(method string, p apiPath) string {
	switch {
	case p.resource == "events" && (p.group == "" || p.group == "events.k8s.io") && p.subresource == "":
		if method == http.MethodDelete {
			return "shadow mode does not delete events"
		}
		return ""
	case p.resource == "leases" && p.group == "coordination.k8s.io", p.resource == "configmaps" && p.group == "":
		switch {
		case p.subresource != "":
			return "a subresource"
		case p.namespace != t.namespace:
			return "outside Karpless's namespace " + t.namespace
		case p.name != "" && !ownName(p.resource, p.name):
			return "not one of Karpless's own"
		}
		return ""
	}
	return "shadow mode writes only its own leases, its state configmaps and events"
}

// ownName: the Lease or ConfigMap is Karpless's own and writable in shadow
// mode.
func ownName(resource, name string) bool {
	if resource == "configmaps" && name == pause.ConfigMapName {
		return false
	}
	return strings.HasPrefix(name, NamePrefix)
}

func (t kubeTransport) refused(r *http.Request, why string) error {
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return fmt.Errorf("%w: %s %s (%s)", ErrRefused, r.Method, r.URL.Path, why)
}

// apiPath is a Kubernetes API path taken apart.
type apiPath struct {
	group, namespace, resource, name, subresource string
}

// parsePath reads /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]] and
// /apis/GROUP/VERSION/[namespaces/NS/]RESOURCE[/NAME[/SUB]]. A namespace
// itself (/api/v1/namespaces/NS) is resource namespaces, name NS.
func parsePath(path string) apiPath {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var p apiPath
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		p.group = parts[1]
		parts = parts[3:]
	default:
		return apiPath{resource: "?"}
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		p.namespace = parts[1]
		parts = parts[2:]
	}
	if len(parts) > 0 {
		p.resource = parts[0]
	}
	if len(parts) > 1 {
		p.name = parts[1]
	}
	if len(parts) > 2 {
		p.subresource = strings.Join(parts[2:], "/")
	}
	return p
}
