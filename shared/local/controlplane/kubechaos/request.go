package kubechaos

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/fields"
)

// Request is what an HTTP request to the API server means, in the terms of
// the API server's own request info (k8s.io/apiserver's RequestInfoFactory),
// for hooks and invariant recorders that must tell an updateStatus from an
// update or a list from a watch.
type Request struct {
	// Verb is get, list, watch, create, update, patch, delete or
	// deletecollection for resource requests; for other requests (discovery,
	// /version, /healthz) it is the lower-case HTTP method.
	Verb string
	// Group is "" for the core group (/api/v1).
	Group    string
	Version  string
	Resource string
	// Subresource is status, scale, binding, eviction, finalize, ... or "".
	Subresource string
	Namespace   string
	// Name is also set for list and watch requests that select one object
	// with fieldSelector=metadata.name=..., as the API server does.
	Name string
	// Watch is true for watch requests (?watch=true or the legacy /watch/ path).
	Watch bool
}

// Parse classifies req the way kube-apiserver's RequestInfoFactory does
// (k8s.io/apiserver is not a dependency of this module, so this is a small
// copy of its rules: /api/v1/... and /apis/group/version/..., the legacy
// /watch/ prefix, namespaces/status and namespaces/finalize, list versus
// watch versus get, delete versus deletecollection).
func Parse(req *http.Request) Request {
	r := Request{Verb: strings.ToLower(req.Method)}
	parts := splitPath(req.URL.Path)
	if len(parts) < 3 {
		return r
	}
	switch parts[0] {
	case "api":
		parts = parts[1:]
	case "apis":
		if len(parts) < 4 {
			return r
		}
		r.Group = parts[1]
		parts = parts[2:]
	default:
		return r
	}
	r.Version = parts[0]
	parts = parts[1:]

	if parts[0] == "watch" || parts[0] == "proxy" {
		if len(parts) < 2 {
			return r
		}
		r.Verb = parts[0]
		parts = parts[1:]
	} else {
		switch req.Method {
		case http.MethodPost:
			r.Verb = "create"
		case http.MethodGet, http.MethodHead:
			r.Verb = "get"
		case http.MethodPut:
			r.Verb = "update"
		case http.MethodPatch:
			r.Verb = "patch"
		case http.MethodDelete:
			r.Verb = "delete"
		default:
			r.Verb = ""
		}
	}

	if parts[0] == "namespaces" && len(parts) > 1 {
		r.Namespace = parts[1]
		// namespaces/{ns}/status and namespaces/{ns}/finalize are
		// subresources of the namespace, not a resource inside it.
		if len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
			parts = parts[2:]
		}
	}
	if len(parts) >= 3 && r.Verb != "proxy" {
		r.Subresource = parts[2]
	}
	if len(parts) >= 2 {
		r.Name = parts[1]
	}
	r.Resource = parts[0]

	if r.Name == "" && r.Verb == "get" {
		q := req.URL.Query()
		r.Verb = "list"
		if w := q["watch"]; len(w) > 0 {
			if v := strings.ToLower(w[0]); v != "false" && v != "0" {
				r.Verb = "watch"
			}
		}
		if fs := q.Get("fieldSelector"); fs != "" {
			if sel, err := fields.ParseSelector(fs); err == nil {
				if name, ok := sel.RequiresExactMatch("metadata.name"); ok && len(path.IsValidPathSegmentName(name)) == 0 {
					r.Name = name
				}
			}
		}
	}
	if r.Name == "" && r.Verb == "delete" {
		r.Verb = "deletecollection"
	}
	r.Watch = r.Verb == "watch"
	return r
}

// splitPath is the API server's: no empty leading or trailing element.
func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
