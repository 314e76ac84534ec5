package shadow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
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
// (karpless-provisioning, karpless-pricing, ...).
const NamePrefix = "karpless-"

// Own names the objects shadow mode may write in Karpless's namespace:
// its own Leases and state ConfigMaps, by exact name. Anything else
// there, whatever its name starts with (the pause switch, which only
// people set, or another tool's karpless-something), is refused.
type Own struct {
	Leases     []string
	ConfigMaps []string
}

func (o Own) has(resource, name string) bool {
	switch resource {
	case "leases":
		return slices.Contains(o.Leases, name)
	case "configmaps":
		return name != pause.ConfigMapName && slices.Contains(o.ConfigMaps, name)
	}
	return false
}

// Kube wraps a Kubernetes transport (rest.Config.Wrap) so that in shadow
// mode only these writes leave the process: Events (any namespace; the
// decision records are Events too), and in Karpless's namespace the
// Leases and ConfigMaps own names, one object at a time. Reads pass,
// except those that act (exec, attach, port-forward, and the node,
// service and pod proxies). Every other write (a node, a pod or its
// eviction, a NodeClaim, NodePool, EC2NodeClass, NodeOverlay or
// CapacityBuffer and their status, anyone else's Lease or ConfigMap, a
// DELETE of a whole collection) is refused with ErrRefused. The ticks skip
// those writes themselves in shadow mode; this is the net under them, and
// the controllers' RBAC the net under this.
func Kube(namespace string, own Own) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return kubeTransport{next: next, namespace: namespace, own: own}
	}
}

type kubeTransport struct {
	next      http.RoundTripper
	namespace string
	own       Own
}

// decoder reads a request body (protobuf or JSON) to learn the name of an
// object being created.
var decoder = serializer.NewCodecFactory(kube.Scheme()).UniversalDeserializer()

func (t kubeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	p := parsePath(r.URL.Path)
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if why := acts(p); why != "" {
			return nil, t.refused(r, why)
		}
		return t.next.RoundTrip(r)
	}
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
	if !t.own.has(p.resource, name) {
		return nil, fmt.Errorf("%w: %s %s named %q (shadow mode creates only its own leases and configmaps)", ErrRefused, r.Method, r.URL.Path, name)
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
		switch {
		case method == http.MethodDelete:
			return "shadow mode does not delete events"
		case p.name == "" && method != http.MethodPost:
			return "a whole collection"
		}
		return ""
	case p.resource == "leases" && p.group == "coordination.k8s.io", p.resource == "configmaps" && p.group == "":
		switch {
		case p.subresource != "":
			return "a subresource"
		case p.namespace != t.namespace:
			return "outside Karpless's namespace " + t.namespace
		case p.name == "" && method != http.MethodPost:
			return "a whole collection"
		case p.name != "" && !t.own.has(p.resource, p.name):
			return "not one of Karpless's own"
		}
		return ""
	}
	return "shadow mode writes only its own leases, its state configmaps and events"
}

// acts says why a read of p is refused ("" when it only reads): a GET
// that opens a shell in a container, attaches to it, forwards a port, or
// reaches a node's kubelet, a service or a pod through the API server's
// proxy is an action, whatever its verb. Only an object, its collection
// and its status are read.
func acts(p apiPath) string {
	switch {
	case p.resource == "proxy":
		return "the API server's proxy acts, whatever the verb"
	case p.subresource == "" || p.subresource == "status":
		return ""
	}
	return "subresource " + p.subresource + " acts, whatever the verb"
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
