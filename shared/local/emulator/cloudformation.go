package emulator

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"time"
)

// cloudFormationNamespace is the XML namespace of CloudFormation's answers.
const cloudFormationNamespace = "http://cloudformation.amazonaws.com/doc/2010-05-15/"

// The stack statuses a test sets (CloudFormation has more; the bootstrap
// reads these).
const (
	StackCreateInProgress         = "CREATE_IN_PROGRESS"
	StackCreateComplete           = "CREATE_COMPLETE"
	StackRollbackInProgress       = "ROLLBACK_IN_PROGRESS"
	StackUpdateInProgress         = "UPDATE_IN_PROGRESS"
	StackUpdateComplete           = "UPDATE_COMPLETE"
	StackUpdateRollbackInProgress = "UPDATE_ROLLBACK_IN_PROGRESS"
	StackDeleteInProgress         = "DELETE_IN_PROGRESS"
	StackDeleteComplete           = "DELETE_COMPLETE"
)

// cfnStack is one CloudFormation stack: only what DescribeStacks shows.
type cfnStack struct {
	id, name, status string
	created          time.Time
}

var cloudFormationHandlers = map[string]handlerFunc{
	"DescribeStacks": (*Emulator).cfnDescribeStacks,
}

// AddStack makes a stack named name, CREATE_IN_PROGRESS, and returns its
// ID (an ARN with a UUID, as CloudFormation's). Stacks are seen at once.
func (e *Emulator) AddStack(name string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.world.stacks == nil {
		e.world.stacks = map[string]*cfnStack{}
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", name, len(e.world.stacks))))
	uuid := fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
	s := &cfnStack{
		id:   fmt.Sprintf("arn:aws:cloudformation:%s:%s:stack/%s/%s", e.cfg.Region, e.cfg.AccountID, name, uuid),
		name: name, status: StackCreateInProgress, created: e.now(),
	}
	e.world.stacks[s.id] = s
	return s.id
}

// SetStackStatus moves a stack (by ID) to status, as CloudFormation does
// while it works through a template.
func (e *Emulator) SetStackStatus(id, status string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.world.stacks[id]; s != nil {
		s.status = status
	}
}

type xmlStack struct {
	StackID      string `xml:"StackId"`
	StackName    string `xml:"StackName"`
	CreationTime string `xml:"CreationTime"`
	StackStatus  string `xml:"StackStatus"`
}

// cfnDescribeStacks answers one stack by ID (also once deleted) or by
// name (live ones only), or every live stack, as CloudFormation does.
func (e *Emulator) cfnDescribeStacks(r *request) (any, *apiError) {
	name := r.params.Get("StackName")
	var out []*cfnStack
	for _, s := range e.world.stacks {
		switch {
		case name == "" && s.status != StackDeleteComplete:
		case name == s.id:
		case name == s.name && s.status != StackDeleteComplete:
		default:
			continue
		}
		out = append(out, s)
	}
	if name != "" && len(out) == 0 {
		return nil, errorf(400, "ValidationError", "Stack with id %s does not exist", name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	body := struct {
		Stacks []xmlStack `xml:"Stacks>member"`
	}{}
	for _, s := range out {
		body.Stacks = append(body.Stacks, xmlStack{StackID: s.id, StackName: s.name, CreationTime: awsTime(s.created), StackStatus: s.status})
	}
	return body, nil
}
