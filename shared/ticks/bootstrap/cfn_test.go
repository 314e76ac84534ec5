package bootstrap

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
)

// What CloudFormation sends to the bootstrap of a test stack.
const (
	testStackID     = "arn:aws:cloudformation:us-west-2:123456789012:stack/Karpless-c1/0f5c0e30-8a1b-11ef-9d0c-0a1b2c3d4e5f"
	testRegion      = "us-west-2"
	testResponseURL = "https://cloudformation-custom-resource-response-uswest2.s3.us-west-2.amazonaws.com/" +
		"arn%3Aaws%3Acloudformation%3Aus-west-2%3A123456789012%3Astack/Karpless-c1/0f5c0e30/Bootstrap/req-1?X-Amz-Signature=abc"
)

// fakeStacks is CloudFormation's view of the test stack: the status a
// test sets, or err.
type fakeStacks struct {
	mu     sync.Mutex
	status cfntypes.StackStatus
	err    error
	calls  int
}

func (f *fakeStacks) set(s cfntypes.StackStatus) {
	f.mu.Lock()
	f.status = s
	f.mu.Unlock()
}

func (f *fakeStacks) DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, _ ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return &cloudformation.DescribeStacksOutput{Stacks: []cfntypes.Stack{{StackId: aws.String(aws.ToString(in.StackName)), StackName: aws.String("Karpless-c1"), StackStatus: f.status}}}, nil
}

// answer is what the bootstrap PUT to a response URL.
type answer struct {
	Status, PhysicalResourceId, Reason, StackId, RequestId, LogicalResourceId string
	Data                                                                      map[string]any
	URL                                                                       string
}

// answers stands in for S3: it takes every PUT, wherever it goes.
type answers struct {
	mu  sync.Mutex
	got []answer
}

func (a *answers) Do(req *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	var x answer
	if err := json.Unmarshal(b, &x); err != nil || req.Method != http.MethodPut || req.Header.Get("Content-Type") != "" {
		x.Status = "MALFORMED " + req.Method + " " + req.Header.Get("Content-Type") + " " + string(b)
	}
	x.URL = req.URL.String()
	a.mu.Lock()
	a.got = append(a.got, x)
	a.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}, Request: req}, nil
}

// take returns the answers so far and forgets them.
func (a *answers) take() []answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	got := a.got
	a.got = nil
	return got
}

// cfnEvent is CloudFormation's request for the bootstrap of a stack
// configured with o: the settings hash of o, the test stack, its response
// URL.
func cfnEvent(typ cfn.RequestType, physical string, o Options, kv ...string) cfn.Event {
	p := map[string]any{
		"ServiceToken":       "arn:aws:lambda:us-west-2:123456789012:function:bootstrap",
		SettingsHashProperty: o.SettingsHash(),
		"CRDHash":            "dev",
		"BootstrapSHA256":    "abc",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i]] = kv[i+1]
	}
	return cfn.Event{
		RequestType: typ, RequestID: "req-1", StackID: testStackID, ResponseURL: testResponseURL,
		ResourceType: "AWS::CloudFormation::CustomResource", LogicalResourceID: "Bootstrap",
		PhysicalResourceID: physical, ResourceProperties: p,
	}
}

// inProgress is the status CloudFormation shows while it sends a request
// of type typ.
func inProgress(typ cfn.RequestType) cfntypes.StackStatus {
	switch typ {
	case cfn.RequestCreate:
		return cfntypes.StackStatusCreateInProgress
	case cfn.RequestUpdate:
		return cfntypes.StackStatusUpdateInProgress
	}
	return cfntypes.StackStatusDeleteInProgress
}

// responseHost is where an answer went.
func responseHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Host
}
