package emulator

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// XML namespaces of the query services.
const (
	ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"
	iamNamespace = "https://iam.amazonaws.com/doc/2010-05-08/"
	stsNamespace = "https://sts.amazonaws.com/doc/2011-06-15/"
)

// request is one call as a handler sees it.
type request struct {
	service, action string
	params          url.Values // query form, or top-level JSON members as strings
	body            []byte     // raw body for JSON services
	http            *http.Request
	call            *Call
	// retry is set by a handler that wants to wait (SQS long polling):
	// the pipeline releases the lock, waits until the channel closes or
	// the deadline passes, and calls the handler again with final set.
	retry struct {
		wake     <-chan struct{}
		deadline time.Time
	}
	final bool
}

type handlerFunc func(e *Emulator, r *request) (any, *apiError)

// writer serialises answers in one protocol.
type writer interface {
	ok(w http.ResponseWriter, action, requestID string, body any)
	fail(w http.ResponseWriter, requestID string, err *apiError)
}

// dispatch runs the fault rules and the handler of a call and answers it.
func (e *Emulator) dispatch(w http.ResponseWriter, r *request, h handlerFunc, out writer) {
	e.mu.Lock()
	faults := e.matchRequest(r.service, r.action)
	if faults.err == nil && !faults.drop {
		hostile := e.callHostility(r.service, r.action)
		faults.err, faults.drop = hostile.err, hostile.drop
	}
	reqID := e.requestID()
	e.mu.Unlock()
	if faults.latency > 0 {
		select {
		case <-time.After(faults.latency):
		case <-r.http.Context().Done():
			return
		case <-e.closed:
		}
	}
	call := Call{Service: r.service, Action: r.action, Params: r.params}
	r.call = &call
	var (
		body any
		err  *apiError
	)
	if faults.err != nil {
		err = faults.err
	} else if h == nil {
		err = unknownAction(r.service, r.action)
	} else {
		for {
			e.mu.Lock()
			r.retry.wake = nil
			body, err = h(e, r)
			wake, deadline := r.retry.wake, r.retry.deadline
			if wake == nil || r.final {
				break
			}
			e.mu.Unlock()
			select {
			case <-wake:
			case <-time.After(time.Until(deadline)):
				r.final = true
			case <-r.http.Context().Done():
				return
			case <-e.closed:
				r.final = true
			}
		}
		e.mu.Unlock()
	}
	e.mu.Lock()
	if err != nil {
		call.Code, call.Status = err.Code, err.Status
	} else {
		call.Status = http.StatusOK
	}
	call.Dropped = faults.drop
	e.record(call)
	e.mu.Unlock()
	if faults.drop {
		dropConnection(w)
		return
	}
	// Answering within microseconds races the Go transport, which may still
	// be draining the request body that the SDK closes as soon as the
	// answer arrives (see HTTPClient); real endpoints are never that fast.
	if d := e.cfg.AnswerDelay; d > 0 {
		time.Sleep(d)
	}
	if err != nil {
		if err.Status == 0 {
			err.Status = defaultStatus(err.Code)
		}
		out.fail(w, reqID, err)
		return
	}
	out.ok(w, r.action, reqID, body)
}

func unknownAction(service, action string) *apiError {
	switch service {
	case "sqs", "ssm", "pricing", "events":
		return &apiError{Code: "UnknownOperationException", Message: "The action " + action + " is not valid for this web service.", Status: 400}
	case "ec2":
		return &apiError{Code: "InvalidAction", Message: "The action " + action + " is not valid for this web service (not emulated).", Status: 400}
	}
	return &apiError{Code: "InvalidAction", Message: "Could not find operation " + action + " (not emulated).", Status: 400}
}

// serveQuery routes the form-encoded query protocols by Version.
func (e *Emulator) serveQuery(w http.ResponseWriter, hr *http.Request, body []byte) {
	vals := url.Values{}
	if len(body) > 0 {
		v, err := url.ParseQuery(string(body))
		if err != nil {
			ec2Writer{}.fail(w, "", errorf(400, "MalformedQueryString", "%v", err))
			return
		}
		vals = v
	}
	for k, v := range hr.URL.Query() {
		if _, ok := vals[k]; !ok {
			vals[k] = v
		}
	}
	action, version := vals.Get("Action"), vals.Get("Version")
	params := url.Values{}
	for k, v := range vals {
		if k != "Action" && k != "Version" {
			params[k] = v
		}
	}
	r := &request{action: action, params: params, http: hr}
	switch version {
	case "2016-11-15":
		r.service = "ec2"
		e.dispatch(w, r, ec2Handlers[action], ec2Writer{})
	case "2010-05-08":
		r.service = "iam"
		e.dispatch(w, r, iamHandlers[action], queryWriter{ns: iamNamespace})
	case "2011-06-15":
		r.service = "sts"
		e.dispatch(w, r, stsHandlers[action], queryWriter{ns: stsNamespace})
	case "2010-05-15":
		r.service = "cloudformation"
		e.dispatch(w, r, cloudFormationHandlers[action], queryWriter{ns: cloudFormationNamespace})
	default:
		ec2Writer{}.fail(w, "", errorf(400, "InvalidAction", "unknown API version %q for action %q (emulated: EC2 2016-11-15, IAM 2010-05-08, STS 2011-06-15, CloudFormation 2010-05-15)", version, action))
	}
}

// ec2Meta is embedded first in every EC2 answer body.
type ec2Meta struct {
	RequestID string `xml:"requestId"`
}

func (m *ec2Meta) setRequestID(id string) { m.RequestID = id }

type requestIDSetter interface{ setRequestID(string) }

// ec2Writer writes the ec2query protocol.
type ec2Writer struct{}

func (ec2Writer) ok(w http.ResponseWriter, action, requestID string, body any) {
	if body == nil {
		body = &ec2Meta{}
	}
	if s, ok := body.(requestIDSetter); ok {
		s.setRequestID(requestID)
	}
	start := xml.StartElement{Name: xml.Name{Local: action + "Response"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: ec2Namespace}}}
	writeXML(w, http.StatusOK, body, start)
}

type ec2ErrorResponse struct {
	XMLName xml.Name `xml:"Response"`
	Errors  []struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Errors>Error"`
	RequestID string `xml:"RequestID"`
}

func (ec2Writer) fail(w http.ResponseWriter, requestID string, err *apiError) {
	var resp ec2ErrorResponse
	resp.RequestID = requestID
	resp.Errors = append(resp.Errors, struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}{err.Code, err.Message})
	writeXML(w, err.Status, resp, xml.StartElement{})
}

// queryWriter writes the awsquery protocol (IAM, STS).
type queryWriter struct{ ns string }

func (q queryWriter) ok(w http.ResponseWriter, action, requestID string, body any) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	root := xml.StartElement{Name: xml.Name{Local: action + "Response"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: q.ns}}}
	must(enc.EncodeToken(root))
	result := xml.StartElement{Name: xml.Name{Local: action + "Result"}}
	if body != nil {
		must(enc.EncodeElement(body, result))
	}
	must(enc.EncodeElement(struct {
		RequestID string `xml:"RequestId"`
	}{requestID}, xml.StartElement{Name: xml.Name{Local: "ResponseMetadata"}}))
	must(enc.EncodeToken(root.End()))
	must(enc.Flush())
	w.Header().Set("Content-Type", "text/xml")
	writeBody(w, http.StatusOK, buf.Bytes())
}

func (q queryWriter) fail(w http.ResponseWriter, requestID string, err *apiError) {
	kind := "Sender"
	if err.Status >= 500 {
		kind = "Receiver"
	}
	resp := struct {
		XMLName xml.Name `xml:"ErrorResponse"`
		Xmlns   string   `xml:"xmlns,attr"`
		Error   struct {
			Type    string `xml:"Type"`
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		} `xml:"Error"`
		RequestID string `xml:"RequestId"`
	}{Xmlns: q.ns, RequestID: requestID}
	resp.Error.Type, resp.Error.Code, resp.Error.Message = kind, err.Code, err.Message
	writeXML(w, err.Status, resp, xml.StartElement{})
}

func writeXML(w http.ResponseWriter, status int, v any, start xml.StartElement) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	if start.Name.Local != "" {
		must(enc.EncodeElement(v, start))
	} else {
		must(enc.Encode(v))
	}
	must(enc.Flush())
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	writeBody(w, status, buf.Bytes())
}

// jsonWriter writes awsJson1_0 (SQS) and awsJson1_1 (SSM).
type jsonWriter struct {
	contentType string
	// typePrefix qualifies __type (SQS uses com.amazonaws.sqs#Code).
	typePrefix string
}

func (j jsonWriter) ok(w http.ResponseWriter, _, requestID string, body any) {
	if body == nil {
		body = struct{}{}
	}
	b, err := json.Marshal(body)
	must(err)
	w.Header().Set("Content-Type", j.contentType)
	w.Header().Set("X-Amzn-RequestId", requestID)
	writeBody(w, http.StatusOK, b)
}

func (j jsonWriter) fail(w http.ResponseWriter, requestID string, err *apiError) {
	typ := err.Type
	if typ == "" {
		typ = err.Code
	}
	b, _ := json.Marshal(map[string]string{"__type": j.typePrefix + typ, "message": err.Message})
	w.Header().Set("Content-Type", j.contentType)
	w.Header().Set("X-Amzn-RequestId", requestID)
	if err.QueryCode != "" {
		w.Header().Set("X-Amzn-Query-Error", err.QueryCode)
	}
	writeBody(w, err.Status, b)
}

// restJSONWriter writes restJson1 (EKS).
type restJSONWriter struct{}

func (restJSONWriter) ok(w http.ResponseWriter, _, requestID string, body any) {
	b, err := json.Marshal(body)
	must(err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-RequestId", requestID)
	writeBody(w, http.StatusOK, b)
}

func (restJSONWriter) fail(w http.ResponseWriter, requestID string, err *apiError) {
	b, _ := json.Marshal(map[string]string{"message": err.Message})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-RequestId", requestID)
	w.Header().Set("X-Amzn-Errortype", err.Code)
	writeBody(w, err.Status, b)
}

// writeBody answers with a Content-Length: the SDK's deserializers stop
// reading at the end of the document, and only a sized body lets the
// transport see its end and reuse the connection (a chunked one leaves the
// terminating chunk unread, and the connection is torn down under the next
// request: "use of closed network connection").
func writeBody(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// HTTPClient is an HTTP client for SDK clients of the emulator. It sends
// request bodies without their WriteTo method: smithy-go's request body
// answers WriteTo with io.EOF once the SDK has closed it, which the SDK does
// when the answer arrives, and net/http, still draining that body after
// writing it, then tears the connection down under the answer it is
// reading ("use of closed network connection", aws/aws-sdk-go-v2#2737).
// Against a loopback server the race is frequent; the standard retryer
// retries it, a single-attempt client fails.
func HTTPClient() *http.Client {
	return &http.Client{Transport: plainBodyTransport{base: http.DefaultTransport.(*http.Transport).Clone()}}
}

type plainBodyTransport struct{ base http.RoundTripper }

func (t plainBodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return t.base.RoundTrip(r)
	}
	c := *r
	c.Body = plainBody{r.Body}
	return t.base.RoundTrip(&c)
}

// plainBody hides every method of a body but Read and Close.
type plainBody struct{ rc io.ReadCloser }

func (b plainBody) Read(p []byte) (int, error) { return b.rc.Read(p) }
func (b plainBody) Close() error               { return b.rc.Close() }

func must(err error) {
	if err != nil {
		panic(err) // encoding our own fixed structs cannot fail
	}
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }

// --- ec2query parameter helpers ---

// list returns prefix.1, prefix.2, ... until one is missing.
func list(p url.Values, prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		k := prefix + "." + strconv.Itoa(i)
		v, ok := p[k]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

// members returns the prefixes prefix.1, prefix.2, ... of a list of
// structures, until no key starts with the next one.
func members(p url.Values, prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		sub := prefix + "." + strconv.Itoa(i)
		found := false
		for k := range p {
			if k == sub || strings.HasPrefix(k, sub+".") {
				found = true
				break
			}
		}
		if !found {
			return out
		}
		out = append(out, sub)
	}
}

// tagList reads prefix.N.Key / prefix.N.Value.
func tagList(p url.Values, prefix string) map[string]string {
	out := map[string]string{}
	for _, m := range members(p, prefix) {
		if k := p.Get(m + ".Key"); k != "" {
			out[k] = p.Get(m + ".Value")
		}
	}
	return out
}

// tagSpecs reads prefix.N.ResourceType and prefix.N.Tag.M.
func tagSpecs(p url.Values, prefix string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, m := range members(p, prefix) {
		rt := p.Get(m + ".ResourceType")
		if out[rt] == nil {
			out[rt] = map[string]string{}
		}
		for k, v := range tagList(p, m+".Tag") {
			out[rt][k] = v
		}
	}
	return out
}

func boolParam(p url.Values, k string) bool { return strings.EqualFold(p.Get(k), "true") }

// filter is one EC2 Filter.N.
type filter struct {
	Name   string
	Values []string
}

func parseFilters(p url.Values) []filter {
	var out []filter
	for _, m := range members(p, "Filter") {
		out = append(out, filter{Name: p.Get(m + ".Name"), Values: list(p, m+".Value")})
	}
	return out
}

// fields answers a filter name with the resource's values; known is false
// for names the resource does not support.
type fields func(name string) (values []string, known bool)

// matchFilters reports whether a resource with tags passes every filter.
func matchFilters(filters []filter, get fields, tags map[string]string) (bool, *apiError) {
	for _, f := range filters {
		var have []string
		switch {
		case strings.HasPrefix(f.Name, "tag:"):
			v, ok := tags[strings.TrimPrefix(f.Name, "tag:")]
			if !ok {
				return false, nil
			}
			have = []string{v}
		case f.Name == "tag-key":
			for k := range tags {
				have = append(have, k)
			}
		case f.Name == "tag-value":
			for _, v := range tags {
				have = append(have, v)
			}
		default:
			v, known := get(f.Name)
			if !known {
				return false, errorf(400, "InvalidParameterValue", "The filter '%s' is invalid", f.Name)
			}
			have = v
		}
		if !anyMatch(f.Values, have) {
			return false, nil
		}
	}
	return true, nil
}

func anyMatch(patterns, values []string) bool {
	for _, p := range patterns {
		for _, v := range values {
			if glob(p, v) {
				return true
			}
		}
	}
	return false
}

// glob matches EC2 filter wildcards: * any run, ? one character.
func glob(pattern, s string) bool {
	if !strings.ContainsAny(pattern, "*?") {
		return pattern == s
	}
	p, v := []rune(pattern), []rune(s)
	var match func(i, j int) bool
	memo := map[[2]int]bool{}
	match = func(i, j int) bool {
		key := [2]int{i, j}
		if r, ok := memo[key]; ok {
			return r
		}
		var r bool
		switch {
		case i == len(p):
			r = j == len(v)
		case p[i] == '*':
			r = match(i+1, j) || (j < len(v) && match(i, j+1))
		case j < len(v) && (p[i] == '?' || p[i] == v[j]):
			r = match(i+1, j+1)
		}
		memo[key] = r
		return r
	}
	return match(0, 0)
}

// paginate cuts items to one page. def is the page size without
// MaxResults; min and max bound MaxResults (0 = unchecked).
func paginate[T any](items []T, p url.Values, def, lo, hi int) ([]T, string, *apiError) {
	size := def
	if s := p.Get("MaxResults"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || (lo > 0 && n < lo) || (hi > 0 && n > hi) {
			return nil, "", errorf(400, "InvalidParameterValue", "Value ( %s ) for parameter maxResults is invalid. Expecting a value between %d and %d.", s, lo, hi)
		}
		size = n
	}
	start := 0
	if tok := p.Get("NextToken"); tok != "" {
		n, ok := decodeToken(tok)
		if !ok || n > len(items) {
			return nil, "", errorf(400, "InvalidNextToken", "The token '%s' is invalid.", tok)
		}
		start = n
	}
	if size <= 0 || start+size >= len(items) {
		return items[start:], "", nil
	}
	return items[start : start+size], encodeToken(start + size), nil
}

func encodeToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(offset)))
}

func decodeToken(tok string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, false
	}
	s, ok := strings.CutPrefix(string(b), "offset:")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}

// xmlTag is an EC2 tagSet item.
type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func xmlTags(tags map[string]string) []xmlTag {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]xmlTag, 0, len(keys))
	for _, k := range keys {
		out = append(out, xmlTag{k, tags[k]})
	}
	return out
}

func cloneTags(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// awsTime formats times the way EC2 does (RFC 3339, milliseconds, Z).
func awsTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// dryRun answers DryRun=true requests that would have succeeded.
func dryRun(p url.Values) *apiError {
	if boolParam(p, "DryRun") {
		return errorf(412, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
	}
	return nil
}
