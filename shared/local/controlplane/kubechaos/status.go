package kubechaos

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The texts below are kube-apiserver's own (k8s.io/apiserver v0.37), so a
// caller that logs or matches them sees what production shows.
const (
	// registry/generic/registry/store.go OptimisticLockErrorMsg.
	optimisticLockMsg = "the object has been modified; please apply your changes to the latest version and try again"
	// storage/etcd3/errors.go, when the continue token can be re-issued.
	inconsistentContinueMsg = "The provided continue parameter is too old " +
		"to display a consistent list result. You can start a new list without " +
		"the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided " +
		"token results in an inconsistent list - objects that were created, " +
		"modified, or deleted between the time the first chunk was returned " +
		"and now may show up in the list."
	// storage/etcd3/errors.go, when it cannot.
	continueExpiredMsg = "The provided continue parameter is too old " +
		"to display a consistent list result. You can start a new list without " +
		"the continue parameter."
	// storage/etcd3/errors.go interpretWatchError, for a watch without a
	// numeric resourceVersion to quote.
	watchExpiredMsg = "The resourceVersion for the provided watch is too old."
	// server/filters/priority-and-fairness.go tooManyRequests (http.Error).
	tooManyRequestsBody = "Too many requests, please try again later.\n"

	contentTypeJSON     = "application/json"
	contentTypeProtobuf = "application/vnd.kubernetes.protobuf"
)

// protobufPrefix starts every kube protobuf object ("k8s\x00"), before the
// runtime.Unknown envelope that names the kind.
const protobufPrefix = "k8s\x00"

// APF answers with the UIDs of the flow schema and priority level that
// rejected the request; client-go quotes the flow schema in its retry log.
// These are fixed stand-ins for the built-in global-default objects.
const (
	flowSchemaUID    = "00000000-0000-0000-0000-00000000c4a0"
	priorityLevelUID = "00000000-0000-0000-0000-00000000c4a1"
)

// tooManyRequestsResponse is what API Priority and Fairness sends when it
// rejects a request: a plain-text http.Error, not a Status (the filter runs
// before content negotiation), with Retry-After.
func tooManyRequestsResponse(req *http.Request) *http.Response {
	h := http.Header{}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
	h.Set("X-Kubernetes-Pf-Flowschema-Uid", flowSchemaUID)
	h.Set("X-Kubernetes-Pf-Prioritylevel-Uid", priorityLevelUID)
	return response(req, http.StatusTooManyRequests, h, []byte(tooManyRequestsBody))
}

// conflictResponse is the registry's answer to an update whose
// resourceVersion is no longer the stored one.
func conflictResponse(req *http.Request, r Request) (*http.Response, error) {
	st := apierrors.NewConflict(schema.GroupResource{Group: r.Group, Resource: r.Resource}, r.Name, errors.New(optimisticLockMsg)).ErrStatus
	return statusResponse(req, st)
}

// continueExpiredResponse is the storage layer's answer to a list whose
// continue token points at a revision etcd has compacted. Like the server,
// it re-issues the token at resourceVersion -1 ("continue at the latest
// revision") in the Status's metadata when the token decodes.
func continueExpiredResponse(req *http.Request, token string) (*http.Response, error) {
	next, ok := reissueContinue(token)
	if !ok {
		return statusResponse(req, apierrors.NewResourceExpired(continueExpiredMsg).ErrStatus)
	}
	st := apierrors.NewResourceExpired(inconsistentContinueMsg).ErrStatus
	st.ListMeta.Continue = next
	return statusResponse(req, st)
}

// continueToken is the API server's token (k8s.io/apiserver storage).
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

func reissueContinue(token string) (string, bool) {
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", false
	}
	var c continueToken
	if err := json.Unmarshal(data, &c); err != nil || c.APIVersion != "meta.k8s.io/v1" || c.StartKey == "" {
		return "", false
	}
	c.ResourceVersion = -1
	out, err := json.Marshal(c)
	if err != nil {
		return "", false
	}
	return base64.RawURLEncoding.EncodeToString(out), true
}

// watchExpiredStatus is the ERROR event's object: the watch cache's text
// when the watch names a resourceVersion, etcd's otherwise.
func watchExpiredStatus(req *http.Request) metav1.Status {
	msg := watchExpiredMsg
	if rv, err := strconv.ParseUint(req.URL.Query().Get("resourceVersion"), 10, 64); err == nil && rv > 0 {
		// watch_cache_history.go: "too old resource version: %d (%d)",
		// requested and oldest-1; the oldest kept is past the requested.
		msg = fmt.Sprintf("too old resource version: %d (%d)", rv, rv+1)
	}
	return apierrors.NewResourceExpired(msg).ErrStatus
}

// statusResponse encodes st as the API server encodes errors: negotiated
// from Accept (protobuf only when the client prefers it; JSON otherwise,
// including for YAML, which this package does not speak).
func statusResponse(req *http.Request, st metav1.Status) (*http.Response, error) {
	ct := contentTypeJSON
	if prefersProtobuf(req.Header.Get("Accept")) {
		ct = contentTypeProtobuf
	}
	body, err := encodeStatus(st, ct)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-cache, private")
	return response(req, int(st.Code), h, body), nil
}

// encodeStatus writes a Status as the API server does: kind Status,
// apiVersion v1 (Status is registered unversioned in the core group).
func encodeStatus(st metav1.Status, contentType string) ([]byte, error) {
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	switch contentType {
	case contentTypeProtobuf:
		raw, err := st.Marshal()
		if err != nil {
			return nil, fmt.Errorf("encoding a %s Status as protobuf: %w", st.Reason, err)
		}
		unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Status"}, Raw: raw}
		env, err := unk.Marshal()
		if err != nil {
			return nil, fmt.Errorf("encoding the protobuf envelope of a %s Status: %w", st.Reason, err)
		}
		return append([]byte(protobufPrefix), env...), nil
	default:
		b, err := json.Marshal(&st)
		if err != nil {
			return nil, fmt.Errorf("encoding a %s Status as JSON: %w", st.Reason, err)
		}
		// The API server's JSON encoder ends every object with a newline.
		return append(b, '\n'), nil
	}
}

// watchErrorFrame is one framed ERROR watch event carrying st, in the
// stream's encoding: a JSON object and newline, or a length-delimited
// protobuf WatchEvent whose object is a protobuf Status.
func watchErrorFrame(st metav1.Status, streamType string) ([]byte, error) {
	switch streamType {
	case contentTypeProtobuf:
		obj, err := encodeStatus(st, contentTypeProtobuf)
		if err != nil {
			return nil, err
		}
		ev := metav1.WatchEvent{Type: "ERROR", Object: runtime.RawExtension{Raw: obj}}
		data, err := ev.Marshal()
		if err != nil {
			return nil, fmt.Errorf("encoding a protobuf ERROR watch event: %w", err)
		}
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
		return append(frame, data...), nil
	case contentTypeJSON:
		obj, err := encodeStatus(st, contentTypeJSON)
		if err != nil {
			return nil, err
		}
		ev := metav1.WatchEvent{Type: "ERROR", Object: runtime.RawExtension{Raw: bytes.TrimSuffix(obj, []byte("\n"))}}
		data, err := json.Marshal(&ev)
		if err != nil {
			return nil, fmt.Errorf("encoding a JSON ERROR watch event: %w", err)
		}
		return append(data, '\n'), nil
	}
	return nil, fmt.Errorf("no ERROR watch event encoding for %q", streamType)
}

// prefersProtobuf reads Accept the way the API server's negotiation does for
// the two encodings this package writes: the highest q wins, the earlier
// entry on a tie; */* and application/* mean the server's first, JSON.
func prefersProtobuf(accept string) bool {
	best, bestQ := "", -1.0
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if s, ok := params["q"]; ok {
			if v, err := strconv.ParseFloat(s, 64); err == nil {
				q = v
			}
		}
		if q <= 0 {
			continue // q=0 is "not acceptable"
		}
		switch mt {
		case contentTypeJSON, contentTypeProtobuf, "*/*", "application/*":
		default:
			continue
		}
		if q > bestQ {
			best, bestQ = mt, q
		}
	}
	return best == contentTypeProtobuf
}

func response(req *http.Request, code int, h http.Header, body []byte) *http.Response {
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
