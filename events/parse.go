package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
)

const (
	// MaxBodyBytes is the largest body Parse reads: 256 KiB is the most EventBridge will put in one event,
	// so anything longer did not come from a rule and is not worth decoding.
	MaxBodyBytes = 256 << 10
	// MaxAffectedEntities bounds how many instances one Health event may name, so a single message cannot
	// fan out into an unbounded number of NodeClaim look-ups and deletions.
	MaxAffectedEntities = 1000
)

// ErrMalformed matches (with errors.Is) every error Parse returns: the body is not an event it can
// trust, so retrying it cannot help and the caller should log it and delete it.
var ErrMalformed = errors.New("events: malformed message")

type malformedError struct{ err error }

func (e *malformedError) Error() string        { return e.err.Error() }
func (e *malformedError) Unwrap() error        { return e.err }
func (e *malformedError) Is(target error) bool { return target == ErrMalformed }

func malformed(format string, args ...any) error {
	return &malformedError{fmt.Errorf("events: "+format, args...)}
}

var instanceIDPattern = regexp.MustCompile(`^i-[0-9a-f]{8,17}$`)

// ValidInstanceID reports whether id looks like an EC2 instance id: "i-" and 8 to 17 lower-case hex
// digits (8 for instances from before 2016, 17 since).
func ValidInstanceID(id string) bool {
	return instanceIDPattern.MatchString(id)
}

var kinds = map[[2]string]Kind{
	{SourceEC2, DetailTypeSpotInterruption}:                KindSpotInterruption,
	{SourceEC2, DetailTypeRebalanceRecommendation}:         KindRebalanceRecommendation,
	{SourceEC2, DetailTypeStateChange}:                     KindStateChange,
	{SourceEC2, DetailTypeCapacityReservationInterruption}: KindCapacityReservationInterruption,
	{SourceEC2, DetailTypeCapacityBlockExpiration}:         KindCapacityBlockExpiration,
	{SourceHealth, DetailTypeHealth}:                       KindScheduledChange,
	{SourceEvents, DetailTypeScheduled}:                    KindScheduled,
}

// nouns name each kind in error messages.
var nouns = map[Kind]string{
	KindSpotInterruption:                "spot interruption",
	KindRebalanceRecommendation:         "rebalance recommendation",
	KindStateChange:                     "state change",
	KindScheduledChange:                 "health event",
	KindCapacityReservationInterruption: "capacity reservation interruption",
	KindCapacityBlockExpiration:         "capacity block expiration",
	KindScheduled:                       "scheduled event",
}

// Parse reads one SQS message body holding an EventBridge event. A well-formed event of a kind Karpless
// does not handle comes back as KindUnknown with a nil error; input that cannot be trusted comes back as
// an error matching ErrMalformed. Parse never panics and reads at most MaxBodyBytes.
func Parse(body []byte) (Message, error) {
	if len(body) == 0 {
		return Message{}, malformed("empty message body")
	}
	if len(body) > MaxBodyBytes {
		return Message{}, malformed("message body is %d bytes, more than the %d an EventBridge event can have", len(body), MaxBodyBytes)
	}
	if err := checkJSON(body); err != nil {
		return Message{}, malformed("parsing EventBridge envelope: %w", err)
	}
	var env lambdaevents.CloudWatchEvent
	if err := json.Unmarshal(body, &env); err != nil {
		return Message{}, malformed("parsing EventBridge envelope: %w", err)
	}
	m := Message{
		Kind:       KindUnknown,
		ID:         env.ID,
		Source:     env.Source,
		DetailType: env.DetailType,
		Account:    env.AccountID,
		Region:     env.Region,
		Time:       env.Time.UTC(),
	}
	if env.Version == eventVersion {
		if k, ok := kinds[[2]string{env.Source, env.DetailType}]; ok {
			m.Kind = k
		}
	}
	if m.Kind == KindUnknown {
		return m, nil
	}

	noun := nouns[m.Kind]
	// The id keys what the caller records (taints, events) and the time feeds the queue-latency metric;
	// EventBridge always sets both, so their absence means the body was not written by it.
	if m.ID == "" {
		return Message{}, malformed("%s without id", noun)
	}
	if env.Time.IsZero() {
		return Message{}, malformed("%s without time", noun)
	}
	if m.Kind == KindScheduled {
		return m, nil // a tick's detail is empty and carries nothing
	}
	if d := bytes.TrimSpace(env.Detail); len(d) == 0 || string(d) == "null" {
		return Message{}, malformed("%s without detail", noun)
	}

	var err error
	switch m.Kind {
	case KindSpotInterruption:
		err = parseSpotInterruption(&m, env.Detail)
	case KindRebalanceRecommendation:
		err = parseRebalanceRecommendation(&m, env.Detail)
	case KindStateChange:
		err = parseStateChange(&m, env.Detail)
	case KindCapacityReservationInterruption:
		err = parseCapacityReservationInterruption(&m, env.Detail)
	case KindScheduledChange:
		err = parseHealth(&m, env.Detail)
	case KindCapacityBlockExpiration:
		err = parseCapacityBlockExpiration(&m, env.Detail)
	}
	if err != nil {
		return Message{}, err
	}
	return m, nil
}

func decodeDetail(noun string, raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return malformed("parsing %s detail: %w", noun, err)
	}
	return nil
}

func checkInstanceID(noun, id string) error {
	if id == "" {
		return malformed("%s without instance-id", noun)
	}
	if !ValidInstanceID(id) {
		return malformed("instance id %s is not an EC2 instance id", quote(id))
	}
	return nil
}

func parseSpotInterruption(m *Message, raw json.RawMessage) error {
	noun := nouns[m.Kind]
	var d SpotInterruptionDetail
	if err := decodeDetail(noun, raw, &d); err != nil {
		return err
	}
	// instance-action is not checked: whatever EC2 is about to do, the node must be drained, and an
	// unfamiliar action must not turn a real interruption into a dropped message.
	if err := checkInstanceID(noun, d.InstanceID); err != nil {
		return err
	}
	m.InstanceIDs = []string{d.InstanceID}
	m.Deadline = m.Time.Add(spotWarning)
	return nil
}

func parseRebalanceRecommendation(m *Message, raw json.RawMessage) error {
	noun := nouns[m.Kind]
	var d RebalanceRecommendationDetail
	if err := decodeDetail(noun, raw, &d); err != nil {
		return err
	}
	if err := checkInstanceID(noun, d.InstanceID); err != nil {
		return err
	}
	m.InstanceIDs = []string{d.InstanceID}
	return nil
}

func parseStateChange(m *Message, raw json.RawMessage) error {
	noun := nouns[m.Kind]
	var d StateChangeDetail
	if err := decodeDetail(noun, raw, &d); err != nil {
		return err
	}
	if err := checkInstanceID(noun, d.InstanceID); err != nil {
		return err
	}
	// Karpenter lower-cases the state before matching; doing the same keeps a stop from being missed.
	state := strings.ToLower(d.State)
	switch state {
	case StatePending, StateRunning, StateStopping, StateStopped, StateShuttingDown, StateTerminated:
	case "":
		return malformed("%s without state", noun)
	default:
		return malformed("%s has unknown state %s", noun, quote(d.State))
	}
	m.InstanceIDs = []string{d.InstanceID}
	m.State = state
	return nil
}

func parseCapacityReservationInterruption(m *Message, raw json.RawMessage) error {
	noun := nouns[m.Kind]
	var d CapacityReservationInterruptionDetail
	if err := decodeDetail(noun, raw, &d); err != nil {
		return err
	}
	if err := checkInstanceID(noun, d.InstanceID); err != nil {
		return err
	}
	m.InstanceIDs = []string{d.InstanceID}
	// The warning comes two minutes ahead, like spot's. A missing or oddly written termination time
	// falls back to that rather than costing the drain.
	m.Deadline = m.Time.Add(spotWarning)
	if t, err := time.Parse(time.RFC3339, d.InstanceTerminationTime); err == nil {
		m.Deadline = t.UTC()
	}
	return nil
}

var capacityReservationIDPattern = regexp.MustCompile(`^cr-[0-9a-z]+$`)

func parseCapacityBlockExpiration(m *Message, raw json.RawMessage) error {
	noun := nouns[m.Kind]
	var d CapacityBlockExpirationDetail
	if err := decodeDetail(noun, raw, &d); err != nil {
		return err
	}
	if !capacityReservationIDPattern.MatchString(d.CapacityReservationID) {
		return malformed("%s: capacity reservation id %q is not one", noun, d.CapacityReservationID)
	}
	m.CapacityReservationID = d.CapacityReservationID
	// EC2 terminates the block's instances from 30 minutes before its end; without an end date the
	// warning's own 10 minutes are what is left.
	m.Deadline = m.Time.Add(10 * time.Minute)
	if t, err := time.Parse(time.RFC3339, d.EndDate); err == nil {
		m.Deadline = t.UTC().Add(-CapacityBlockTerminationLead)
	}
	return nil
}

func parseHealth(m *Message, raw json.RawMessage) error {
	noun := nouns[m.Kind]
	var d HealthDetail
	if err := decodeDetail(noun, raw, &d); err != nil {
		return err
	}
	// Karpenter acts only on EC2's scheduled changes; every other Health event is someone else's news.
	if d.Service != HealthServiceEC2 || d.EventTypeCategory != HealthCategoryScheduled {
		m.Kind = KindUnknown
		return nil
	}
	if n := len(d.AffectedEntities); n > MaxAffectedEntities {
		return malformed("%s lists %d affected entities, more than the %d accepted", noun, n, MaxAffectedEntities)
	}
	// EC2 scheduled changes can also name dedicated hosts or volumes; those match no NodeClaim, so they
	// are left out rather than failing the instances listed beside them.
	ids := make([]string, 0, len(d.AffectedEntities))
	for _, e := range d.AffectedEntities {
		if ValidInstanceID(e.EntityValue) {
			ids = append(ids, e.EntityValue)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > 0 {
		m.InstanceIDs = ids
	}
	m.HealthEventTypeCode = d.EventTypeCode
	return nil
}

// quote quotes s for an error message, cut short so a hostile value cannot flood the log.
func quote(s string) string {
	const limit = 64
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "..."
	}
	return strconv.Quote(s)
}
