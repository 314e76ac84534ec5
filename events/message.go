package events

import "time"

// Kind says which event a Message came from.
type Kind string

const (
	KindSpotInterruption                Kind = "SpotInterruption"
	KindRebalanceRecommendation         Kind = "RebalanceRecommendation"
	KindStateChange                     Kind = "StateChange"
	KindScheduledChange                 Kind = "ScheduledChange" // AWS Health, service EC2, category scheduledChange
	KindCapacityReservationInterruption Kind = "CapacityReservationInterruption"
	// KindCapacityBlockExpiration is a Capacity Block about to end: every instance in it goes.
	KindCapacityBlockExpiration Kind = "CapacityBlockExpiration"
	KindScheduled               Kind = "Scheduled" // EventBridge scheduler tick
	KindUnknown                 Kind = "Unknown"
)

// Action is what Karpenter v1 does about a message.
type Action string

const (
	// CordonAndDrain deletes the instance's NodeClaim so the normal termination flow drains and replaces it.
	CordonAndDrain Action = "CordonAndDrain"
	// NoAction records the Kubernetes event and metric but leaves the node alone.
	NoAction Action = "NoAction"
	// Ignore means the message concerns nothing to act on or record; the caller deletes it.
	Ignore Action = "Ignore"
)

// EC2 instance states, as the state-change notification spells them.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
)

// Message is one event reduced to what the interruption function acts on.
type Message struct {
	Kind                                Kind
	ID                                  string // EventBridge event id
	Source, DetailType, Account, Region string
	Time                                time.Time // the envelope's time, in UTC
	// InstanceIDs holds one id for the EC2 kinds and, for a Health event, every instance it names (none
	// if it names only other resources); deduplicated, sorted, each a valid EC2 instance id.
	InstanceIDs []string
	State       string // StateChange only
	// Deadline is when EC2 takes the instance back: for SpotInterruption the event time plus the two
	// minutes of warning, for CapacityReservationInterruption the detail's instance-termination-time
	// (the same two minutes if that is missing). Zero for the other kinds.
	Deadline            time.Time
	HealthEventTypeCode string // ScheduledChange only
	// CapacityReservationID is the Capacity Block a CapacityBlockExpiration names (InstanceIDs is
	// empty: the handler finds the NodeClaims by their karpenter.k8s.aws/capacity-reservation-id).
	CapacityReservationID string
}

// CapacityBlockTerminationLead is how long before a Capacity Block's end EC2 starts terminating its
// instances (its warning comes 10 minutes earlier still, 40 minutes before the end).
const CapacityBlockTerminationLead = 30 * time.Minute

// spotWarning is how long before reclaiming an instance EC2 sends its spot interruption warning; the
// event does not repeat it, so the deadline is derived from the event time.
const spotWarning = 2 * time.Minute

// Action returns what Karpenter v1 does for the message (aws pkg/controllers/interruption, actionForMessage).
func (m Message) Action() Action {
	switch m.Kind {
	case KindSpotInterruption, KindCapacityReservationInterruption, KindScheduledChange, KindCapacityBlockExpiration:
		return CordonAndDrain
	case KindRebalanceRecommendation:
		return NoAction
	case KindStateChange:
		switch m.State {
		case StateStopping, StateStopped, StateShuttingDown, StateTerminated:
			return CordonAndDrain
		}
	}
	return Ignore
}

// MessageType returns the message_type label of karpenter_interruption_received_messages_total,
// Karpenter v1.14.1's kinds (aws pkg/controllers/interruption/messages/types.go): "no_op" for every
// message Karpenter parses to nothing to do (a state change to pending or running, a Health event
// that is not an EC2 scheduled change, an event of another source or detail type, a scheduler tick).
// A Capacity Block expiration, which Karpenter does not read from its queue, is counted with the
// capacity reservation interruptions, whose action it shares.
func (m Message) MessageType() string {
	switch m.Kind {
	case KindSpotInterruption:
		return "spot_interrupted"
	case KindCapacityReservationInterruption, KindCapacityBlockExpiration:
		return "capacity_reservation_interrupted"
	case KindScheduledChange:
		return "scheduled_change"
	case KindRebalanceRecommendation:
		return "rebalance_recommendation"
	case KindStateChange:
		switch m.State {
		case StateStopping, StateStopped:
			return "instance_stopped"
		case StateShuttingDown, StateTerminated:
			return "instance_terminated"
		}
	}
	return "no_op"
}

// Reason returns the reason of the Kubernetes Event Karpenter v1 publishes on the Node and NodeClaim,
// or "" when it publishes none.
func (m Message) Reason() string {
	switch m.Kind {
	case KindSpotInterruption:
		return "SpotInterrupted"
	case KindCapacityReservationInterruption, KindCapacityBlockExpiration:
		return "CapacityReservationInstanceInterrupted"
	case KindScheduledChange:
		return "InstanceUnhealthy"
	case KindRebalanceRecommendation:
		return "SpotRebalanceRecommendation"
	case KindStateChange:
		switch m.State {
		case StateStopping, StateStopped:
			return "InstanceStopping"
		case StateShuttingDown, StateTerminated:
			return "InstanceTerminating"
		}
	}
	return ""
}
