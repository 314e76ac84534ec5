package events

import "testing"

// TestMessageTypes: the message_type label of
// karpenter_interruption_received_messages_total takes Karpenter v1.14.1's
// values only (aws pkg/controllers/interruption/messages/types.go), "no_op"
// for whatever its parsers turn into nothing to do.
func TestMessageTypes(t *testing.T) {
	for _, tc := range []struct {
		kind  Kind
		state string
		want  string
	}{
		{KindSpotInterruption, "", "spot_interrupted"},
		{KindRebalanceRecommendation, "", "rebalance_recommendation"},
		{KindScheduledChange, "", "scheduled_change"},
		{KindStateChange, StateStopping, "instance_stopped"},
		{KindStateChange, StateStopped, "instance_stopped"},
		{KindStateChange, StateShuttingDown, "instance_terminated"},
		{KindStateChange, StateTerminated, "instance_terminated"},
		{KindStateChange, StatePending, "no_op"},
		{KindStateChange, StateRunning, "no_op"},
		{KindCapacityReservationInterruption, "", "capacity_reservation_interrupted"},
		{KindCapacityBlockExpiration, "", "capacity_reservation_interrupted"},
		{KindScheduled, "", "no_op"},
		{KindUnknown, "", "no_op"},
	} {
		if got := (Message{Kind: tc.kind, State: tc.state}).MessageType(); got != tc.want {
			t.Errorf("%s %s: message_type %q, want %q", tc.kind, tc.state, got, tc.want)
		}
	}
}
