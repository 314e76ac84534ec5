package kubechaos

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		method, url string
		want        Request
	}{
		{"GET", "/api/v1/namespaces/ns/pods/p", Request{Verb: "get", Version: "v1", Resource: "pods", Namespace: "ns", Name: "p"}},
		{"GET", "/api/v1/namespaces/ns/pods", Request{Verb: "list", Version: "v1", Resource: "pods", Namespace: "ns"}},
		{"GET", "/api/v1/pods?limit=500&continue=abc", Request{Verb: "list", Version: "v1", Resource: "pods"}},
		{"GET", "/api/v1/pods?watch=true&resourceVersion=5", Request{Verb: "watch", Version: "v1", Resource: "pods", Watch: true}},
		{"GET", "/api/v1/pods?watch=1", Request{Verb: "watch", Version: "v1", Resource: "pods", Watch: true}},
		{"GET", "/api/v1/pods?watch=false", Request{Verb: "list", Version: "v1", Resource: "pods"}},
		{"GET", "/api/v1/pods?watch=0", Request{Verb: "list", Version: "v1", Resource: "pods"}},
		{"GET", "/api/v1/watch/namespaces/ns/pods/p", Request{Verb: "watch", Version: "v1", Resource: "pods", Namespace: "ns", Name: "p", Watch: true}},
		{"GET", "/api/v1/watch/nodes", Request{Verb: "watch", Version: "v1", Resource: "nodes", Watch: true}},
		// One object selected by name is a named list/watch, as RBAC sees it.
		{"GET", "/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Dcm&watch=true", Request{Verb: "watch", Version: "v1", Resource: "configmaps", Namespace: "ns", Name: "cm", Watch: true}},
		{"GET", "/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Dcm%2Cfoo%3Dbar", Request{Verb: "list", Version: "v1", Resource: "configmaps", Namespace: "ns", Name: "cm"}},
		{"POST", "/api/v1/namespaces/ns/pods", Request{Verb: "create", Version: "v1", Resource: "pods", Namespace: "ns"}},
		{"POST", "/api/v1/namespaces/ns/pods/p/binding", Request{Verb: "create", Version: "v1", Resource: "pods", Subresource: "binding", Namespace: "ns", Name: "p"}},
		{"POST", "/api/v1/namespaces/ns/pods/p/eviction", Request{Verb: "create", Version: "v1", Resource: "pods", Subresource: "eviction", Namespace: "ns", Name: "p"}},
		{"PUT", "/api/v1/namespaces/ns/pods/p", Request{Verb: "update", Version: "v1", Resource: "pods", Namespace: "ns", Name: "p"}},
		{"PUT", "/api/v1/namespaces/ns/pods/p/status", Request{Verb: "update", Version: "v1", Resource: "pods", Subresource: "status", Namespace: "ns", Name: "p"}},
		{"PATCH", "/api/v1/nodes/n", Request{Verb: "patch", Version: "v1", Resource: "nodes", Name: "n"}},
		{"DELETE", "/api/v1/nodes/n", Request{Verb: "delete", Version: "v1", Resource: "nodes", Name: "n"}},
		{"DELETE", "/api/v1/namespaces/ns/pods", Request{Verb: "deletecollection", Version: "v1", Resource: "pods", Namespace: "ns"}},
		// A namespace is its own namespace; status and finalize are its
		// subresources, not resources inside it.
		{"GET", "/api/v1/namespaces/ns", Request{Verb: "get", Version: "v1", Resource: "namespaces", Namespace: "ns", Name: "ns"}},
		{"PUT", "/api/v1/namespaces/ns/finalize", Request{Verb: "update", Version: "v1", Resource: "namespaces", Subresource: "finalize", Namespace: "ns", Name: "ns"}},
		{"PUT", "/api/v1/namespaces/ns/status", Request{Verb: "update", Version: "v1", Resource: "namespaces", Subresource: "status", Namespace: "ns", Name: "ns"}},
		{"GET", "/api/v1/namespaces", Request{Verb: "list", Version: "v1", Resource: "namespaces"}},
		{"GET", "/apis/karpenter.sh/v1/nodeclaims", Request{Verb: "list", Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}},
		{"PUT", "/apis/karpenter.sh/v1/nodeclaims/c/status", Request{Verb: "update", Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims", Subresource: "status", Name: "c"}},
		{"PUT", "/apis/apps/v1/namespaces/ns/deployments/d/scale", Request{Verb: "update", Group: "apps", Version: "v1", Resource: "deployments", Subresource: "scale", Namespace: "ns", Name: "d"}},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", Request{Verb: "update", Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Namespace: "ns", Name: "l"}},
		{"GET", "/apis/karpenter.k8s.aws/v1/watch/ec2nodeclasses", Request{Verb: "watch", Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses", Watch: true}},
		// Proxy has no subresource: the rest is the proxied path.
		{"GET", "/api/v1/proxy/namespaces/ns/pods/p/x/y", Request{Verb: "proxy", Version: "v1", Resource: "pods", Namespace: "ns", Name: "p"}},
		// Not resource requests: only the verb.
		{"GET", "/version", Request{Verb: "get"}},
		{"GET", "/api", Request{Verb: "get"}},
		{"GET", "/api/v1", Request{Verb: "get"}},
		{"GET", "/apis/karpenter.sh/v1", Request{Verb: "get"}},
		{"GET", "/healthz/etcd", Request{Verb: "get"}},
		{"POST", "/apis/authorization.k8s.io", Request{Verb: "post"}},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.url, func(t *testing.T) {
			got := Parse(httptest.NewRequest(c.method, c.url, http.NoBody))
			if got != c.want {
				t.Errorf("Parse(%s %s)\n got %+v\nwant %+v", c.method, c.url, got, c.want)
			}
		})
	}
}
