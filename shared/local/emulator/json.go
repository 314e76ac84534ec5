package emulator

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// serveJSON routes the awsJson protocols (SQS 1.0, SSM, pricing and
// EventBridge 1.1).
func (e *Emulator) serveJSON(w http.ResponseWriter, hr *http.Request, service, action string, body []byte) {
	out := jsonWriter{contentType: "application/x-amz-json-1.1"}
	handlers := ssmHandlers
	switch service {
	case "sqs":
		out = jsonWriter{contentType: "application/x-amz-json-1.0", typePrefix: "com.amazonaws.sqs#"}
		handlers = sqsHandlers
	case "pricing":
		handlers = pricingHandlers
	case "events":
		handlers = eventsHandlers
	}
	params := url.Values{}
	var top map[string]json.RawMessage
	if len(body) > 0 {
		if err := json.Unmarshal(body, &top); err != nil {
			out.fail(w, "", &apiError{Code: "SerializationException", Message: err.Error(), Status: 400})
			return
		}
	}
	for k, v := range top {
		var s string
		if json.Unmarshal(v, &s) == nil {
			params.Set(k, s)
		} else {
			params.Set(k, string(v))
		}
	}
	e.dispatch(w, &request{service: service, action: action, params: params, body: body, http: hr}, handlers[action], out)
}

// decode reads a JSON request body into v.
func (r *request) decode(v any) *apiError {
	if len(r.body) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		return &apiError{Code: "SerializationException", Message: err.Error(), Status: 400}
	}
	return nil
}

// epochSeconds is how the JSON protocols write timestamps.
type epochSeconds time.Time

func (t epochSeconds) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", float64(time.Time(t).UnixMilli())/1000)), nil
}

// --- SSM ---

var ssmHandlers = map[string]handlerFunc{
	"GetParameter":        (*Emulator).getParameter,
	"GetParameters":       (*Emulator).getParameters,
	"GetParametersByPath": (*Emulator).getParametersByPath,
}

type ssmParam struct {
	Name     string
	Value    string
	DataType string
	Version  int64
	Modified time.Time
}

type ssmParamJSON struct {
	ARN              string       `json:"ARN"`
	DataType         string       `json:"DataType"`
	LastModifiedDate epochSeconds `json:"LastModifiedDate"`
	Name             string       `json:"Name"`
	Type             string       `json:"Type"`
	Value            string       `json:"Value"`
	Version          int64        `json:"Version"`
}

// putParam creates or updates a parameter; callers hold e.mu.
func (e *Emulator) putParam(name, value, dataType string) {
	p := e.world.params[name]
	if p == nil {
		p = &ssmParam{Name: name, DataType: dataType}
		e.world.params[name] = p
	} else if p.Value == value {
		return
	}
	p.Value, p.Modified = value, e.now()
	p.Version++
}

// SetParameter creates or updates a String SSM parameter.
func (e *Emulator) SetParameter(name, value string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	dt := "text"
	if strings.HasPrefix(value, "ami-") {
		dt = "aws:ec2:image"
	}
	e.putParam(name, value, dt)
}

// Parameter returns a parameter's value.
func (e *Emulator) Parameter(name string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.world.params[name]
	if !ok {
		return "", false
	}
	return p.Value, true
}

func (e *Emulator) paramJSON(p *ssmParam) ssmParamJSON {
	arn := fmt.Sprintf("arn:aws:ssm:%s::parameter%s", e.cfg.Region, p.Name)
	if !strings.HasPrefix(p.Name, "/aws/") {
		arn = fmt.Sprintf("arn:aws:ssm:%s:%s:parameter/%s", e.cfg.Region, e.cfg.AccountID, strings.TrimPrefix(p.Name, "/"))
	}
	return ssmParamJSON{ARN: arn, DataType: p.DataType, LastModifiedDate: epochSeconds(p.Modified), Name: p.Name, Type: "String", Value: p.Value, Version: p.Version}
}

// lookupParam resolves a name with an optional :version selector.
func (e *Emulator) lookupParam(name string) (*ssmParam, *apiError) {
	base, sel, hasSel := strings.Cut(name, ":")
	if strings.HasPrefix(name, "arn:") {
		base, sel, hasSel = name, "", false
		if i := strings.Index(name, ":parameter"); i >= 0 {
			base = name[i+len(":parameter"):]
		}
	}
	p, ok := e.world.params[base]
	if !ok {
		return nil, &apiError{Code: "ParameterNotFound", Message: "", Status: 400}
	}
	if hasSel && sel != fmt.Sprint(p.Version) {
		return nil, &apiError{Code: "ParameterVersionNotFound", Message: "Systems Manager could not find version " + sel + " of " + base, Status: 400}
	}
	return p, nil
}

func (e *Emulator) getParameter(r *request) (any, *apiError) {
	var in struct{ Name string }
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	if in.Name == "" {
		return nil, &apiError{Code: "ValidationException", Message: "1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null", Status: 400}
	}
	p, err := e.lookupParam(in.Name)
	if err != nil {
		return nil, err
	}
	return map[string]any{"Parameter": e.paramJSON(p)}, nil
}

func (e *Emulator) getParameters(r *request) (any, *apiError) {
	var in struct{ Names []string }
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	out := struct {
		Parameters        []ssmParamJSON `json:"Parameters"`
		InvalidParameters []string       `json:"InvalidParameters"`
	}{Parameters: []ssmParamJSON{}, InvalidParameters: []string{}}
	for _, n := range in.Names {
		if p, err := e.lookupParam(n); err == nil {
			out.Parameters = append(out.Parameters, e.paramJSON(p))
		} else {
			out.InvalidParameters = append(out.InvalidParameters, n)
		}
	}
	return out, nil
}

func (e *Emulator) getParametersByPath(r *request) (any, *apiError) {
	var in struct {
		Path       string
		Recursive  bool
		MaxResults int
		NextToken  string
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	prefix := strings.TrimSuffix(in.Path, "/") + "/"
	var matched []ssmParamJSON
	for _, name := range sortedKeys(e.world.params) {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok || (!in.Recursive && strings.Contains(rest, "/")) {
			continue
		}
		matched = append(matched, e.paramJSON(e.world.params[name]))
	}
	q := url.Values{}
	if in.MaxResults > 0 {
		q.Set("MaxResults", fmt.Sprint(in.MaxResults))
	}
	if in.NextToken != "" {
		q.Set("NextToken", in.NextToken)
	}
	page, next, err := paginate(matched, q, 10, 1, 10)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"Parameters": page}
	if next != "" {
		out["NextToken"] = next
	}
	return out, nil
}

// --- EKS ---

type eksCluster struct {
	Name, ARN, Version, Status, RoleARN, ServiceCIDR string
	Endpoint                                         string
	CA                                               []byte // PEM
	Created                                          time.Time
	VPCID                                            string
	SubnetIDs                                        []string
	ClusterSG                                        string
	Tags                                             map[string]string
	// accessEntries by principal ARN (accounts.go).
	accessEntries map[string]*AccessEntry
	// zonalShift: ARC knows the cluster (RegisterZonalShift).
	zonalShift bool
}

func (e *Emulator) serveEKS(w http.ResponseWriter, hr *http.Request, body []byte) {
	name := strings.Trim(strings.TrimPrefix(hr.URL.Path, "/clusters"), "/")
	// /clusters/{name}/access-entries[/{principalArn}]: split the escaped
	// path, where the ARN's slashes are still %2F.
	if parts := strings.Split(strings.Trim(strings.TrimPrefix(hr.URL.EscapedPath(), "/clusters"), "/"), "/"); len(parts) >= 2 && parts[1] == "access-entries" {
		e.serveAccessEntries(w, hr, body, parts[0], parts[2:])
		return
	}
	action := "DescribeCluster"
	if name == "" {
		action = "ListClusters"
	}
	r := &request{service: "eks", action: action, params: url.Values{"name": {name}}, body: body, http: hr}
	var h handlerFunc = func(e *Emulator, r *request) (any, *apiError) {
		if hr.Method != http.MethodGet {
			return nil, errorf(404, "NotFoundException", "%s %s is not emulated", hr.Method, hr.URL.Path)
		}
		if name == "" {
			return map[string]any{"clusters": sortedKeys(e.world.clusters)}, nil
		}
		c, ok := e.world.clusters[name]
		if !ok {
			return nil, errorf(404, "ResourceNotFoundException", "No cluster found for name: %s.", name)
		}
		return map[string]any{"cluster": e.clusterJSON(c)}, nil
	}
	e.dispatch(w, r, h, restJSONWriter{})
}

func (e *Emulator) clusterJSON(c *eksCluster) map[string]any {
	sgs := []string{}
	if c.ClusterSG != "" {
		sgs = append(sgs, c.ClusterSG)
	}
	return map[string]any{
		"name": c.Name, "arn": c.ARN, "createdAt": epochSeconds(c.Created), "version": c.Version,
		"endpoint": c.Endpoint, "roleArn": c.RoleARN, "status": c.Status, "platformVersion": "eks.1",
		"certificateAuthority": map[string]string{"data": base64.StdEncoding.EncodeToString(c.CA)},
		"kubernetesNetworkConfig": map[string]string{
			"serviceIpv4Cidr": c.ServiceCIDR, "ipFamily": "ipv4",
		},
		"resourcesVpcConfig": map[string]any{
			"subnetIds": c.SubnetIDs, "securityGroupIds": sgs, "clusterSecurityGroupId": c.ClusterSG,
			"vpcId": c.VPCID, "endpointPublicAccess": true, "endpointPrivateAccess": true, "publicAccessCidrs": []string{"0.0.0.0/0"},
		},
		"identity":     map[string]any{"oidc": map[string]string{"issuer": "https://oidc.eks." + e.cfg.Region + ".amazonaws.com/id/" + e.oidcID(c.Name)}},
		"accessConfig": map[string]string{"authenticationMode": "API"},
		"tags":         c.Tags,
	}
}

// SetClusterVersion changes the version DescribeCluster reports (the
// control plane upgrade that moves AMI aliases to a new version).
func (e *Emulator) SetClusterVersion(version string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.world.clusters[e.cfg.ClusterName]; c != nil {
		c.Version = version
	}
}

func (e *Emulator) oidcID(cluster string) string {
	h := e.hash("oidc", cluster)
	return strings.ToUpper(hex.EncodeToString(h[:16]))
}
