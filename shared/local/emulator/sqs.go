package emulator

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/karpless/karpless/events"
)

var sqsHandlers = map[string]handlerFunc{
	"CreateQueue":                  (*Emulator).sqsCreateQueue,
	"GetQueueUrl":                  (*Emulator).sqsGetQueueURL,
	"ListQueues":                   (*Emulator).sqsListQueues,
	"GetQueueAttributes":           (*Emulator).sqsGetQueueAttributes,
	"SetQueueAttributes":           (*Emulator).sqsSetQueueAttributes,
	"SendMessage":                  (*Emulator).sqsSendMessage,
	"ReceiveMessage":               (*Emulator).sqsReceiveMessage,
	"DeleteMessage":                (*Emulator).sqsDeleteMessage,
	"DeleteMessageBatch":           (*Emulator).sqsDeleteMessageBatch,
	"ChangeMessageVisibility":      (*Emulator).sqsChangeMessageVisibility,
	"ChangeMessageVisibilityBatch": (*Emulator).sqsChangeMessageVisibilityBatch,
	"PurgeQueue":                   (*Emulator).sqsPurgeQueue,
}

type queue struct {
	name, url, arn string
	attrs          map[string]string
	created        time.Time
	messages       []*message
	// redrive: dead-letter queue name and receive limit (0 = none).
	dlq        string
	maxReceive int
}

type message struct {
	id, body, md5 string
	sent          time.Time
	visibleAt     time.Time
	receiveCount  int
	firstReceive  time.Time
	receipt       string // current receipt handle, "" before the first receive
}

// Message is a queued message as tests see it.
type Message struct {
	ID           string
	Body         string
	Sent         time.Time
	ReceiveCount int
	// InFlight means received and not yet visible again, until VisibleAt.
	InFlight  bool
	VisibleAt time.Time
}

func sqsError(code, queryCode, msg string) *apiError {
	return &apiError{Code: code, Type: code, Message: msg, Status: 400, QueryCode: queryCode + ";Sender"}
}

func noQueue() *apiError {
	return sqsError("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.")
}

func invalidParam(format string, args ...any) *apiError {
	return sqsError("InvalidParameterValue", "InvalidParameterValue", fmt.Sprintf(format, args...))
}

func (q *queue) intAttr(k string, def int) int {
	if n, err := strconv.Atoi(q.attrs[k]); err == nil {
		return n
	}
	return def
}

// createQueue makes a queue; callers hold e.mu.
func (e *Emulator) createQueue(name string, attrs map[string]string) *queue {
	q := &queue{
		name: name, url: e.url + "/" + e.cfg.AccountID + "/" + name,
		arn:   fmt.Sprintf("arn:aws:sqs:%s:%s:%s", e.cfg.Region, e.cfg.AccountID, name),
		attrs: map[string]string{}, created: e.now(),
	}
	for k, v := range map[string]string{"VisibilityTimeout": "30", "MessageRetentionPeriod": "345600", "DelaySeconds": "0", "MaximumMessageSize": "262144", "ReceiveMessageWaitTimeSeconds": "0", "SqsManagedSseEnabled": "true"} {
		q.attrs[k] = v
	}
	e.setQueueAttrs(q, attrs)
	e.world.queues[name] = q
	return q
}

func (e *Emulator) setQueueAttrs(q *queue, attrs map[string]string) {
	for k, v := range attrs {
		q.attrs[k] = v
	}
	if rp := q.attrs["RedrivePolicy"]; rp != "" {
		var pol struct {
			DeadLetterTargetArn string `json:"deadLetterTargetArn"`
			MaxReceiveCount     any    `json:"maxReceiveCount"`
		}
		if json.Unmarshal([]byte(rp), &pol) == nil {
			q.dlq = pol.DeadLetterTargetArn[strings.LastIndexByte(pol.DeadLetterTargetArn, ':')+1:]
			q.maxReceive, _ = strconv.Atoi(fmt.Sprint(pol.MaxReceiveCount))
		}
	}
}

// queueByURL finds a queue by URL (any host) or name; callers hold e.mu.
func (e *Emulator) queueByURL(u string) *queue {
	name := u
	if i := strings.LastIndexByte(u, '/'); i >= 0 {
		name = u[i+1:]
	}
	return e.world.queues[name]
}

// QueueURL is the URL of a queue by name ("" if none).
func (e *Emulator) QueueURL(name string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if q := e.world.queues[name]; q != nil {
		return q.url
	}
	return ""
}

// InterruptionQueueURL is the URL of the queue named after the cluster,
// which the EventBridge rules of a real deployment feed.
func (e *Emulator) InterruptionQueueURL() string { return e.QueueURL(e.cfg.ClusterName) }

// InterruptionQueueARN is the interruption queue's ARN, which Lambda's
// event source mapping names in every record it delivers.
func (e *Emulator) InterruptionQueueARN() string {
	return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", e.cfg.Region, e.cfg.AccountID, e.cfg.ClusterName)
}

// RemoveQueue deletes a queue and its messages, as DeleteQueue does
// (tests of a world without the cluster's queue).
func (e *Emulator) RemoveQueue(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.world.queues, name)
}

// CreateQueue makes a queue (attributes as SQS names them, e.g.
// RedrivePolicy) and returns its URL; an existing queue is returned as is.
func (e *Emulator) CreateQueue(name string, attrs map[string]string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if q := e.world.queues[name]; q != nil {
		return q.url
	}
	return e.createQueue(name, attrs).url
}

// Messages lists the messages of a queue (name or URL), in order.
func (e *Emulator) Messages(queueName string) []Message {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queueByURL(queueName)
	if q == nil {
		return nil
	}
	now := e.now()
	var out []Message
	for _, m := range q.messages {
		out = append(out, Message{ID: m.id, Body: m.body, Sent: m.sent, ReceiveCount: m.receiveCount, InFlight: m.receiveCount > 0 && now.Before(m.visibleAt), VisibleAt: m.visibleAt})
	}
	return out
}

// SendEvent puts a message body (an EventBridge event, typically) on a
// queue given by name or URL and returns its message id.
func (e *Emulator) SendEvent(queueName string, body []byte) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queueByURL(queueName)
	if q == nil {
		return "", fmt.Errorf("emulator: no queue %q", queueName)
	}
	return e.enqueue(q, string(body), 0).id, nil
}

// enqueue adds a message; callers hold e.mu.
func (e *Emulator) enqueue(q *queue, body string, delay time.Duration) *message {
	now := e.now()
	sum := md5.Sum([]byte(body))
	m := &message{id: e.uuid(), body: body, md5: hex.EncodeToString(sum[:]), sent: now, visibleAt: now.Add(delay)}
	q.messages = append(q.messages, m)
	close(e.wake)
	e.wake = make(chan struct{})
	return m
}

// EndVisibility makes every message in flight on the queue (given by name
// or URL) visible now, as its visibility running out would: a test's way
// to have a dead consumer's batch come back without moving the clock.
func (e *Emulator) EndVisibility(queueName string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queueByURL(queueName)
	if q == nil {
		return
	}
	now := e.now()
	for _, m := range q.messages {
		if now.Before(m.visibleAt) {
			m.visibleAt = now
		}
	}
}

// expireMessages drops messages past their queue's retention; callers hold e.mu.
func (e *Emulator) expireMessages(now time.Time) {
	for _, q := range e.world.queues {
		keep := q.messages[:0]
		retention := time.Duration(q.intAttr("MessageRetentionPeriod", 345600)) * time.Second
		for _, m := range q.messages {
			if now.Sub(m.sent) < retention {
				keep = append(keep, m)
			}
		}
		q.messages = keep
	}
}

func (e *Emulator) sqsQueue(r *request) (*queue, *apiError) {
	u := r.params.Get("QueueUrl")
	if u == "" {
		return nil, sqsError("MissingParameter", "MissingParameter", "The request must contain the parameter QueueUrl.")
	}
	q := e.queueByURL(u)
	if q == nil {
		return nil, noQueue()
	}
	return q, nil
}

func (e *Emulator) sqsCreateQueue(r *request) (any, *apiError) {
	var in struct {
		QueueName  string
		Attributes map[string]string
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	if in.QueueName == "" {
		return nil, sqsError("MissingParameter", "MissingParameter", "The request must contain the parameter QueueName.")
	}
	if q := e.world.queues[in.QueueName]; q != nil {
		for k, v := range in.Attributes {
			if q.attrs[k] != v {
				return nil, sqsError("QueueNameExists", "QueueAlreadyExists", "A queue already exists with the same name and a different value for attribute "+k)
			}
		}
		return map[string]string{"QueueUrl": q.url}, nil
	}
	return map[string]string{"QueueUrl": e.createQueue(in.QueueName, in.Attributes).url}, nil
}

func (e *Emulator) sqsGetQueueURL(r *request) (any, *apiError) {
	q := e.world.queues[r.params.Get("QueueName")]
	if q == nil {
		return nil, noQueue()
	}
	return map[string]string{"QueueUrl": q.url}, nil
}

func (e *Emulator) sqsListQueues(r *request) (any, *apiError) {
	prefix := r.params.Get("QueueNamePrefix")
	urls := []string{}
	for _, name := range sortedKeys(e.world.queues) {
		if strings.HasPrefix(name, prefix) {
			urls = append(urls, e.world.queues[name].url)
		}
	}
	return map[string]any{"QueueUrls": urls}, nil
}

func (e *Emulator) sqsGetQueueAttributes(r *request) (any, *apiError) {
	q, err := e.sqsQueue(r)
	if err != nil {
		return nil, err
	}
	var in struct{ AttributeNames []string }
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	now := e.now()
	all := map[string]string{}
	for k, v := range q.attrs {
		all[k] = v
	}
	var visible, inflight, delayed int
	for _, m := range q.messages {
		switch {
		case m.receiveCount == 0 && now.Before(m.visibleAt):
			delayed++
		case now.Before(m.visibleAt):
			inflight++
		default:
			visible++
		}
	}
	all["ApproximateNumberOfMessages"] = strconv.Itoa(visible)
	all["ApproximateNumberOfMessagesNotVisible"] = strconv.Itoa(inflight)
	all["ApproximateNumberOfMessagesDelayed"] = strconv.Itoa(delayed)
	all["QueueArn"] = q.arn
	all["CreatedTimestamp"] = strconv.FormatInt(q.created.Unix(), 10)
	all["LastModifiedTimestamp"] = strconv.FormatInt(q.created.Unix(), 10)
	out := map[string]string{}
	for _, n := range in.AttributeNames {
		if n == "All" {
			out = all
			break
		}
		if v, ok := all[n]; ok {
			out[n] = v
		} else {
			return nil, sqsError("InvalidAttributeName", "InvalidAttributeName", "Unknown Attribute "+n+".")
		}
	}
	return map[string]any{"Attributes": out}, nil
}

func (e *Emulator) sqsSetQueueAttributes(r *request) (any, *apiError) {
	q, err := e.sqsQueue(r)
	if err != nil {
		return nil, err
	}
	var in struct{ Attributes map[string]string }
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	e.setQueueAttrs(q, in.Attributes)
	return nil, nil
}

func (e *Emulator) sqsSendMessage(r *request) (any, *apiError) {
	q, err := e.sqsQueue(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		MessageBody  string
		DelaySeconds *int
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	if in.MessageBody == "" {
		return nil, sqsError("MissingParameter", "MissingParameter", "The request must contain the parameter MessageBody.")
	}
	if len(in.MessageBody) > q.intAttr("MaximumMessageSize", 262144) {
		return nil, invalidParam("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", q.intAttr("MaximumMessageSize", 262144))
	}
	delay := q.intAttr("DelaySeconds", 0)
	if in.DelaySeconds != nil {
		if *in.DelaySeconds < 0 || *in.DelaySeconds > 900 {
			return nil, invalidParam("Value %d for parameter DelaySeconds is invalid. Reason: must be between 0 and 900.", *in.DelaySeconds)
		}
		delay = *in.DelaySeconds
	}
	m := e.enqueue(q, in.MessageBody, time.Duration(delay)*time.Second)
	return map[string]string{"MessageId": m.id, "MD5OfMessageBody": m.md5}, nil
}

type sqsMessageJSON struct {
	MessageID     string            `json:"MessageId"`
	ReceiptHandle string            `json:"ReceiptHandle"`
	MD5OfBody     string            `json:"MD5OfBody"`
	Body          string            `json:"Body"`
	Attributes    map[string]string `json:"Attributes,omitempty"`
}

func (e *Emulator) sqsReceiveMessage(r *request) (any, *apiError) {
	q, err := e.sqsQueue(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		MaxNumberOfMessages         *int
		VisibilityTimeout           *int
		WaitTimeSeconds             *int
		AttributeNames              []string
		MessageSystemAttributeNames []string
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	maxN := 1
	if in.MaxNumberOfMessages != nil {
		maxN = *in.MaxNumberOfMessages
		if maxN < 1 || maxN > 10 {
			return nil, invalidParam("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", maxN)
		}
	}
	visibility := q.intAttr("VisibilityTimeout", 30)
	if in.VisibilityTimeout != nil {
		visibility = *in.VisibilityTimeout
		if visibility < 0 || visibility > 43200 {
			return nil, invalidParam("Value %d for parameter VisibilityTimeout is invalid.", visibility)
		}
	}
	wait := q.intAttr("ReceiveMessageWaitTimeSeconds", 0)
	if in.WaitTimeSeconds != nil {
		wait = *in.WaitTimeSeconds
		if wait < 0 || wait > 20 {
			return nil, invalidParam("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", wait)
		}
	}
	now := e.now()
	out := []sqsMessageJSON{}
	keep := q.messages[:0]
	var moved []*message
	for _, m := range q.messages {
		if len(out) >= maxN || now.Before(m.visibleAt) {
			keep = append(keep, m)
			continue
		}
		if q.maxReceive > 0 && m.receiveCount >= q.maxReceive {
			moved = append(moved, m)
			continue
		}
		m.receiveCount++
		if m.firstReceive.IsZero() {
			m.firstReceive = now
		}
		m.visibleAt = now.Add(time.Duration(visibility) * time.Second)
		m.receipt = base64.RawURLEncoding.EncodeToString([]byte(q.name + "|" + m.id + "|" + strconv.Itoa(m.receiveCount) + "|" + e.hexID("receipt", 16)))
		keep = append(keep, m)
		out = append(out, sqsMessageJSON{
			MessageID: m.id, ReceiptHandle: m.receipt, MD5OfBody: m.md5, Body: m.body,
			Attributes: messageAttributes(m, append(in.AttributeNames, in.MessageSystemAttributeNames...)),
		})
	}
	q.messages = keep
	if dlq := e.world.queues[q.dlq]; dlq != nil {
		for _, m := range moved {
			m.receiveCount, m.receipt, m.visibleAt = 0, "", now
			dlq.messages = append(dlq.messages, m)
			e.log.Info("message moved to dead-letter queue", "queue", q.name, "dlq", dlq.name, "message", m.id)
		}
	}
	if len(out) == 0 && wait > 0 && !r.final {
		r.retry.wake = e.wake
		if r.retry.deadline.IsZero() {
			r.retry.deadline = time.Now().Add(min(time.Duration(wait)*time.Second, e.cfg.LongPollCap))
		}
		return nil, nil
	}
	return map[string]any{"Messages": out}, nil
}

func messageAttributes(m *message, names []string) map[string]string {
	all := map[string]string{
		"SentTimestamp":                    strconv.FormatInt(m.sent.UnixMilli(), 10),
		"ApproximateReceiveCount":          strconv.Itoa(m.receiveCount),
		"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstReceive.UnixMilli(), 10),
		"SenderId":                         "AIDAEVENTBRIDGE",
	}
	out := map[string]string{}
	for _, n := range names {
		if n == "All" {
			return all
		}
		if v, ok := all[n]; ok {
			out[n] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// findReceipt resolves a receipt handle: (nil, nil) means the message is
// already gone, which SQS treats as success.
func (e *Emulator) findReceipt(q *queue, handle string) (*message, *apiError) {
	invalid := sqsError("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", "The input receipt handle \""+handle+"\" is not a valid receipt handle.")
	raw, err := base64.RawURLEncoding.DecodeString(handle)
	if err != nil {
		return nil, invalid
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 4 || parts[0] != q.name {
		return nil, invalid
	}
	for _, m := range q.messages {
		if m.id == parts[1] {
			if m.receipt != handle {
				// Received again since: this handle no longer owns the message.
				return nil, invalid
			}
			return m, nil
		}
	}
	return nil, nil
}

func (e *Emulator) removeMessage(q *queue, m *message) {
	for k, x := range q.messages {
		if x == m {
			q.messages = append(q.messages[:k], q.messages[k+1:]...)
			return
		}
	}
}

func (e *Emulator) sqsDeleteMessage(r *request) (any, *apiError) {
	q, err := e.sqsQueue(r)
	if err != nil {
		return nil, err
	}
	m, err := e.findReceipt(q, r.params.Get("ReceiptHandle"))
	if err != nil {
		return nil, err
	}
	if m != nil {
		e.removeMessage(q, m)
	}
	return nil, nil
}

func (e *Emulator) sqsDeleteMessageBatch(r *request) (any, *apiError) {
	q, err := e.sqsQueue(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		Entries []struct{ Id, ReceiptHandle string }
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	if len(in.Entries) == 0 {
		return nil, sqsError("EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", "There should be at least one DeleteMessageBatchRequestEntry in the request.")
	}
	type failed struct {
		ID          string `json:"Id"`
		Code        string `json:"Code"`
		Message     string `json:"Message"`
		SenderFault bool   `json:"SenderFault"`
	}
	type ok struct {
		ID string `json:"Id"`
	}
	out := struct {
		Successful []ok     `json:"Successful"`
		Failed     []failed `json:"Failed"`
	}{Successful: []ok{}, Failed: []failed{}}
	for _, en := range in.Entries {
		m, err := e.findReceipt(q, en.ReceiptHandle)
		if err != nil {
			out.Failed = append(out.Failed, failed{en.Id, "ReceiptHandleIsInvalid", err.Message, true})
			continue
		}
		if m != nil {
			e.removeMessage(q, m)
		}
		out.Successful = append(out.Successful, ok{en.Id})
	}
	return out, nil
}

func (e *Emulator) sqsChangeMessageVisibility(r *request) (any, *apiError) {
	q, err := e.sqsQueue(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		ReceiptHandle     string
		VisibilityTimeout int
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	return nil, e.changeVisibility(q, in.ReceiptHandle, in.VisibilityTimeout)
}

// changeVisibility is ChangeMessageVisibility of one message, for the
// single call and each entry of the batch.
func (e *Emulator) changeVisibility(q *queue, handle string, timeout int) *apiError {
	m, err := e.findReceipt(q, handle)
	if err != nil {
		return err
	}
	now := e.now()
	if m == nil {
		// SQS's answer for a message deleted (or never there) under a
		// well-formed handle.
		return invalidParam("Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", handle)
	}
	if timeout < 0 || timeout > 43200 {
		return invalidParam("Value %d for parameter VisibilityTimeout is invalid.", timeout)
	}
	if !now.Before(m.visibleAt) {
		// The handle's visibility ran out and no one has received the
		// message since: SQS answers OK and changes nothing (it is
		// visible, and the next receive takes it).
		return nil
	}
	m.visibleAt = now.Add(time.Duration(timeout) * time.Second)
	return nil
}

func (e *Emulator) sqsChangeMessageVisibilityBatch(r *request) (any, *apiError) {
	q, err := e.sqsQueue(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		Entries []struct {
			Id, ReceiptHandle string
			VisibilityTimeout int
		}
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	if len(in.Entries) == 0 {
		return nil, sqsError("EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", "There should be at least one ChangeMessageVisibilityBatchRequestEntry in the request.")
	}
	if len(in.Entries) > 10 {
		return nil, sqsError("TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10.")
	}
	type failed struct {
		ID          string `json:"Id"`
		Code        string `json:"Code"`
		Message     string `json:"Message"`
		SenderFault bool   `json:"SenderFault"`
	}
	type ok struct {
		ID string `json:"Id"`
	}
	out := struct {
		Successful []ok     `json:"Successful"`
		Failed     []failed `json:"Failed"`
	}{Successful: []ok{}, Failed: []failed{}}
	for _, en := range in.Entries {
		if err := e.changeVisibility(q, en.ReceiptHandle, en.VisibilityTimeout); err != nil {
			code := err.Code
			if err.QueryCode != "" {
				code = strings.SplitN(err.QueryCode, ";", 2)[0]
			}
			out.Failed = append(out.Failed, failed{en.Id, code, err.Message, true})
			continue
		}
		out.Successful = append(out.Successful, ok{en.Id})
	}
	return out, nil
}

func (e *Emulator) sqsPurgeQueue(r *request) (any, *apiError) {
	q, err := e.sqsQueue(r)
	if err != nil {
		return nil, err
	}
	q.messages = nil
	return nil, nil
}

// --- events ---

// EventKind names an EventBridge event the emulator can inject.
type EventKind string

// Event kinds, as the CLI names them.
const (
	EventSpotInterruption                EventKind = "spot-interruption"
	EventRebalance                       EventKind = "rebalance"
	EventStateChange                     EventKind = "state-change"
	EventScheduledChange                 EventKind = "scheduled-change"
	EventCapacityReservationInterruption EventKind = "capacity-reservation-interruption"
)

// EventKinds lists the kinds InjectEvent accepts.
var EventKinds = []EventKind{EventSpotInterruption, EventRebalance, EventStateChange, EventScheduledChange, EventCapacityReservationInterruption}

// Event is an interruption event to inject.
type Event struct {
	Kind        EventKind
	InstanceIDs []string
	// State is the new state of a state-change event (stopping, stopped,
	// shutting-down, terminated, ...). The instance itself is not changed.
	State string
	// Code is the AWS Health eventTypeCode of a scheduled change (default
	// AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED).
	Code string
	// TerminateAfter terminates the instances that long (on the clock)
	// after a spot or capacity-reservation interruption warning, as EC2 does
	// two minutes after; 0 leaves them running.
	TerminateAfter time.Duration
	// Queue is the target queue (name or URL); default the interruption queue.
	Queue string
}

// InjectEvent builds EventBridge-shaped messages and puts them on the
// queue: one message per instance, except a scheduled change, which names
// all of them. It returns the message ids.
func (e *Emulator) InjectEvent(ev Event) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	name := ev.Queue
	if name == "" {
		name = e.cfg.ClusterName
	}
	q := e.queueByURL(name)
	if q == nil {
		return nil, fmt.Errorf("emulator: no queue %q", name)
	}
	if len(ev.InstanceIDs) == 0 {
		return nil, fmt.Errorf("emulator: %s event needs instance ids", ev.Kind)
	}
	now := e.now()
	var bodies [][]byte
	switch ev.Kind {
	case EventSpotInterruption, EventCapacityReservationInterruption:
		for _, id := range ev.InstanceIDs {
			if ev.Kind == EventSpotInterruption {
				bodies = append(bodies, events.NewSpotInterruption(e.uuid(), id, now))
			} else {
				bodies = append(bodies, events.NewCapacityReservationInterruption(e.uuid(), id, now))
			}
			if ev.TerminateAfter > 0 {
				i, ok := e.world.instByID[id]
				if !ok {
					return nil, fmt.Errorf("emulator: no instance %s to terminate", id)
				}
				i.terminate = now.Add(ev.TerminateAfter)
			}
		}
	case EventRebalance:
		for _, id := range ev.InstanceIDs {
			bodies = append(bodies, events.NewRebalanceRecommendation(e.uuid(), id, now))
		}
	case EventStateChange:
		if _, ok := stateCodes[ev.State]; !ok {
			return nil, fmt.Errorf("emulator: unknown instance state %q", ev.State)
		}
		for _, id := range ev.InstanceIDs {
			bodies = append(bodies, events.NewStateChange(e.uuid(), id, ev.State, now))
		}
	case EventScheduledChange:
		code := ev.Code
		if code == "" {
			code = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
		}
		bodies = append(bodies, events.NewScheduledChange(e.uuid(), code, ev.InstanceIDs, now))
	default:
		return nil, fmt.Errorf("emulator: unknown event kind %q (known: %v)", ev.Kind, EventKinds)
	}
	var ids []string
	for _, b := range bodies {
		ids = append(ids, e.enqueue(q, string(b), 0).id)
	}
	e.log.Info("event injected", "kind", ev.Kind, "instances", strings.Join(ev.InstanceIDs, ","), "queue", q.name)
	return ids, nil
}

// sendStateChange posts a state-change notification to the interruption
// queue; callers hold e.mu.
func (e *Emulator) sendStateChange(i *instance, state string, now time.Time) {
	q := e.world.queues[e.cfg.ClusterName]
	if q == nil {
		return
	}
	e.enqueue(q, string(events.NewStateChange(e.uuid(), i.ID, state, now)), 0)
}
