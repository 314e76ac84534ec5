package emulator

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// What an account holds beside the fleet, read by `karpless migrate
// check`: EKS access entries, customer-managed IAM policies and
// EventBridge rules. The seeded world has none of them; tests add them
// with AddAccessEntry, AddPolicy and PutRule, as a stack or a person would.

// --- EKS access entries ---

// AccessEntry is an EKS access entry of the emulated cluster.
type AccessEntry struct {
	PrincipalARN string
	// Type is STANDARD, EC2_LINUX, EC2_WINDOWS, FARGATE_LINUX, ...
	Type             string
	Username         string
	KubernetesGroups []string
	// Tags, e.g. aws:cloudformation:stack-name of the stack that made it.
	Tags     map[string]string
	created  time.Time
	entryARN string
}

// AddAccessEntry adds (or replaces) an access entry of the default
// cluster. The TokenReview webhook does not read entries: it answers from
// the identities (AddIdentity).
func (e *Emulator) AddAccessEntry(a AccessEntry) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.world.clusters[e.cfg.ClusterName]
	if c == nil {
		return
	}
	if a.Type == "" {
		a.Type = "STANDARD"
	}
	if a.Username == "" {
		a.Username = a.PrincipalARN
		if strings.HasPrefix(a.Type, "EC2_") {
			a.Username = "system:node:{{EC2PrivateDNSName}}"
		}
	}
	a.Tags = cloneTags(a.Tags)
	a.KubernetesGroups = append([]string{}, a.KubernetesGroups...)
	a.created = e.now()
	// arn:aws:eks:<region>:<account>:access-entry/<cluster>/role/<account>/<role>/<uuid>
	a.entryARN = fmt.Sprintf("arn:aws:eks:%s:%s:access-entry/%s/role/%s/%s/%s", e.cfg.Region, e.cfg.AccountID, c.Name, e.cfg.AccountID,
		roleNameOf(a.PrincipalARN), e.hexID("access-entry", 16))
	if c.accessEntries == nil {
		c.accessEntries = map[string]*AccessEntry{}
	}
	c.accessEntries[a.PrincipalARN] = &a
}

// RemoveAccessEntry deletes an access entry of the default cluster.
func (e *Emulator) RemoveAccessEntry(principalARN string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.world.clusters[e.cfg.ClusterName]; c != nil {
		delete(c.accessEntries, principalARN)
	}
}

// serveAccessEntries answers ListAccessEntries (GET
// /clusters/{name}/access-entries) and DescribeAccessEntry (GET
// /clusters/{name}/access-entries/{principalArn}, the ARN path-escaped).
func (e *Emulator) serveAccessEntries(w http.ResponseWriter, hr *http.Request, body []byte, cluster string, rest []string) {
	action := "ListAccessEntries"
	principal := ""
	if len(rest) > 0 {
		action = "DescribeAccessEntry"
		principal, _ = url.PathUnescape(strings.Join(rest, "/"))
	}
	q := hr.URL.Query()
	r := &request{service: "eks", action: action, params: url.Values{"name": {cluster}, "principalArn": {principal}}, body: body, http: hr}
	var h handlerFunc = func(e *Emulator, r *request) (any, *apiError) {
		if hr.Method != http.MethodGet {
			return nil, errorf(404, "NotFoundException", "%s %s is not emulated", hr.Method, hr.URL.Path)
		}
		c, ok := e.world.clusters[cluster]
		if !ok {
			return nil, errorf(404, "ResourceNotFoundException", "No cluster found for name: %s.", cluster)
		}
		if action == "DescribeAccessEntry" {
			a, ok := c.accessEntries[principal]
			if !ok {
				return nil, errorf(404, "ResourceNotFoundException", "The specified principalArn could not be found. You can view your available access entries with 'list-access-entries'.")
			}
			return map[string]any{"accessEntry": map[string]any{
				"clusterName": c.Name, "principalArn": a.PrincipalARN, "kubernetesGroups": a.KubernetesGroups,
				"accessEntryArn": a.entryARN, "createdAt": epochSeconds(a.created), "modifiedAt": epochSeconds(a.created),
				"tags": a.Tags, "username": a.Username, "type": a.Type,
			}}, nil
		}
		arns := sortedKeys(c.accessEntries)
		p := url.Values{}
		if s := q.Get("maxResults"); s != "" {
			if n, err := strconv.Atoi(s); err != nil || n < 1 || n > 100 {
				return nil, errorf(400, "InvalidParameterException", "maxResults must be between 1 and 100")
			}
			p.Set("MaxResults", s)
		}
		p.Set("NextToken", q.Get("nextToken"))
		page, next, err := paginate(arns, p, 100, 1, 100)
		if err != nil {
			return nil, errorf(400, "InvalidParameterException", "The nextToken is invalid.")
		}
		out := map[string]any{"accessEntries": append([]string{}, page...)}
		if next != "" {
			out["nextToken"] = next
		}
		return out, nil
	}
	e.dispatch(w, r, h, restJSONWriter{})
}

// --- IAM customer-managed policies ---

type iamPolicy struct {
	Name, Path, ID, ARN string
	Attachments         int
	Created             time.Time
}

// AddPolicy makes a customer-managed IAM policy attached to attachments
// entities (only counted) and returns its ARN; one that exists is kept.
func (e *Emulator) AddPolicy(name, path string, attachments int) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if path == "" {
		path = "/"
	}
	arn := fmt.Sprintf("arn:aws:iam::%s:policy%s%s", e.cfg.AccountID, path, name)
	if e.world.policies == nil {
		e.world.policies = map[string]*iamPolicy{}
	}
	if _, ok := e.world.policies[arn]; !ok {
		e.world.policies[arn] = &iamPolicy{Name: name, Path: path, ARN: arn, ID: "ANPA" + strings.ToUpper(e.hexID("anpa", 17)), Attachments: attachments, Created: e.now()}
	}
	return arn
}

// RemovePolicy deletes a policy by ARN.
func (e *Emulator) RemovePolicy(arn string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.world.policies, arn)
}

func (e *Emulator) iamGetPolicy(r *request) (any, *apiError) {
	arn := r.params.Get("PolicyArn")
	if arn == "" {
		return nil, errorf(400, "ValidationError", "1 validation error detected: Value null at 'policyArn' failed to satisfy constraint: Member must not be null")
	}
	if !strings.HasPrefix(arn, "arn:aws:iam::") || !strings.Contains(arn, ":policy/") {
		return nil, errorf(400, "InvalidInput", "ARN %s is not valid.", arn)
	}
	p, ok := e.world.policies[arn]
	if !ok {
		return nil, noSuchEntity("Policy %s was not found.", arn)
	}
	type xmlPolicy struct {
		PolicyName                    string `xml:"PolicyName"`
		DefaultVersionID              string `xml:"DefaultVersionId"`
		PolicyID                      string `xml:"PolicyId"`
		Path                          string `xml:"Path"`
		Arn                           string `xml:"Arn"`
		AttachmentCount               int    `xml:"AttachmentCount"`
		PermissionsBoundaryUsageCount int    `xml:"PermissionsBoundaryUsageCount"`
		IsAttachable                  bool   `xml:"IsAttachable"`
		CreateDate                    string `xml:"CreateDate"`
		UpdateDate                    string `xml:"UpdateDate"`
	}
	return struct {
		Policy xmlPolicy `xml:"Policy"`
	}{xmlPolicy{PolicyName: p.Name, DefaultVersionID: "v1", PolicyID: p.ID, Path: p.Path, Arn: p.ARN, AttachmentCount: p.Attachments,
		IsAttachable: true, CreateDate: awsTime(p.Created), UpdateDate: awsTime(p.Created)}}, nil
}

// --- EventBridge rules ---

// Rule is an EventBridge rule on the default event bus.
type Rule struct {
	Name         string
	EventPattern string
	// Targets maps target ids to ARNs.
	Targets map[string]string
}

// PutRule adds or replaces a rule with its targets. The emulator does not
// route events by rules: InjectEvent and SendEvent put them on queues.
func (e *Emulator) PutRule(r Rule) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.world.rules == nil {
		e.world.rules = map[string]*Rule{}
	}
	r.Targets = cloneTags(r.Targets)
	e.world.rules[r.Name] = &r
}

// RemoveRule deletes a rule and its targets.
func (e *Emulator) RemoveRule(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.world.rules, name)
}

var eventsHandlers = map[string]handlerFunc{
	"ListRuleNamesByTarget": (*Emulator).eventsListRuleNamesByTarget,
}

func (e *Emulator) eventsListRuleNamesByTarget(r *request) (any, *apiError) {
	var in struct {
		TargetArn    string
		EventBusName string
		NextToken    string
		Limit        int
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	if in.TargetArn == "" {
		return nil, errorf(400, "ValidationException", "1 validation error detected: Value null at 'targetArn' failed to satisfy constraint: Member must not be null")
	}
	if in.EventBusName != "" && in.EventBusName != "default" && !strings.HasSuffix(in.EventBusName, ":event-bus/default") {
		return nil, errorf(400, "ResourceNotFoundException", "Event bus %s does not exist.", in.EventBusName)
	}
	if in.Limit < 0 || in.Limit > 100 {
		return nil, errorf(400, "ValidationException", "1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value less than or equal to 100", in.Limit)
	}
	var names []string
	for _, name := range sortedKeys(e.world.rules) {
		for _, arn := range e.world.rules[name].Targets {
			if arn == in.TargetArn {
				names = append(names, name)
				break
			}
		}
	}
	sort.Strings(names)
	p := url.Values{"NextToken": {in.NextToken}}
	if in.Limit > 0 {
		p.Set("MaxResults", strconv.Itoa(in.Limit))
	}
	page, next, err := paginate(names, p, 100, 1, 100)
	if err != nil {
		return nil, errorf(400, "ValidationException", "The nextToken is invalid.")
	}
	out := map[string]any{"RuleNames": append([]string{}, page...)}
	if next != "" {
		out["NextToken"] = next
	}
	return out, nil
}
