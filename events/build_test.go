package events

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
)

func TestBuildersRoundTrip(t *testing.T) {
	// Sub-second parts are dropped, as EventBridge writes whole seconds.
	at := time.Date(2026, 3, 2, 15, 5, 9, 420_000_000, time.FixedZone("CET", 3600))
	sec := at.UTC().Truncate(time.Second)
	base := func(kind Kind, id, source, detailType string) Message {
		return Message{Kind: kind, ID: id, Source: source, DetailType: detailType, Account: SampleAccount, Region: SampleRegion, Time: sec}
	}
	with := func(m Message, f func(*Message)) Message { f(&m); return m }

	tests := []struct {
		name string
		body []byte
		want Message
	}{
		{"spot interruption", NewSpotInterruption("e1", "i-0a1b2c3d4e5f60718", at),
			with(base(KindSpotInterruption, "e1", SourceEC2, DetailTypeSpotInterruption), func(m *Message) {
				m.InstanceIDs = []string{"i-0a1b2c3d4e5f60718"}
				m.Deadline = sec.Add(2 * time.Minute)
			})},
		{"rebalance recommendation", NewRebalanceRecommendation("e2", "i-0a1b2c3d4e5f60718", at),
			with(base(KindRebalanceRecommendation, "e2", SourceEC2, DetailTypeRebalanceRecommendation), func(m *Message) {
				m.InstanceIDs = []string{"i-0a1b2c3d4e5f60718"}
			})},
		{"capacity reservation interruption", NewCapacityReservationInterruption("e3", "i-0d9c8b7a6f5e4d3c2", at),
			with(base(KindCapacityReservationInterruption, "e3", SourceEC2, DetailTypeCapacityReservationInterruption), func(m *Message) {
				m.InstanceIDs = []string{"i-0d9c8b7a6f5e4d3c2"}
				m.Deadline = sec.Add(2 * time.Minute)
			})},
		{"capacity block expiration", NewCapacityBlockExpiration("e7", "cr-0a1b2c3d4e5f60718", sec.Add(40*time.Minute), at),
			with(base(KindCapacityBlockExpiration, "e7", SourceEC2, DetailTypeCapacityBlockExpiration), func(m *Message) {
				m.CapacityReservationID = "cr-0a1b2c3d4e5f60718"
				m.Deadline = sec.Add(10 * time.Minute)
			})},
		{"scheduled change", NewScheduledChange("e4", "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", []string{"i-0f1e2d3c4b5a69788", "i-4f9a2c1e", "i-02a4b6c8d0e1f3a5b"}, at),
			with(base(KindScheduledChange, "e4", SourceHealth, DetailTypeHealth), func(m *Message) {
				m.InstanceIDs = []string{"i-02a4b6c8d0e1f3a5b", "i-0f1e2d3c4b5a69788", "i-4f9a2c1e"}
				m.HealthEventTypeCode = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
			})},
		{"scheduled change naming nothing", NewScheduledChange("e5", "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", nil, at),
			with(base(KindScheduledChange, "e5", SourceHealth, DetailTypeHealth), func(m *Message) {
				m.HealthEventTypeCode = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
			})},
		{"scheduled tick", NewScheduledTick("e6", at), base(KindScheduled, "e6", SourceEvents, DetailTypeScheduled)},
	}
	for _, state := range []string{StatePending, StateRunning, StateStopping, StateStopped, StateShuttingDown, StateTerminated} {
		tests = append(tests, struct {
			name string
			body []byte
			want Message
		}{"state change " + state, NewStateChange("s-"+state, "i-07f3e2d1c0b9a8f76", state, at),
			with(base(KindStateChange, "s-"+state, SourceEC2, DetailTypeStateChange), func(m *Message) {
				m.InstanceIDs = []string{"i-07f3e2d1c0b9a8f76"}
				m.State = state
			})})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.body)
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, tt.body)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestBuildersWireShape checks the builders against the samples written from the AWS documentation:
// same envelope fields and the same detail keys, so the emulator injects what EventBridge delivers.
func TestBuildersWireShape(t *testing.T) {
	at := time.Date(2026, 3, 2, 14, 5, 9, 0, time.UTC)
	tests := []struct {
		sample string
		body   []byte
	}{
		{"spot-interruption.json", NewSpotInterruption("e1", "i-0a1b2c3d4e5f60718", at)},
		{"rebalance-recommendation.json", NewRebalanceRecommendation("e2", "i-0a1b2c3d4e5f60718", at)},
		{"state-change-stopping.json", NewStateChange("e3", "i-07f3e2d1c0b9a8f76", StateStopping, at)},
		{"capacity-reservation-interruption.json", NewCapacityReservationInterruption("e4", "i-0d9c8b7a6f5e4d3c2", at)},
		{"health-scheduled-change.json", NewScheduledChange("e5", "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", []string{"i-0c5d8e2f1a3b4c6d7"}, at)},
		{"scheduled-tick.json", NewScheduledTick("e6", at)},
	}
	for _, tt := range tests {
		t.Run(tt.sample, func(t *testing.T) {
			want := keys(t, readSample(t, tt.sample))
			got := keys(t, tt.body)
			// The sample shows fields Health adds that Karpless neither reads nor writes.
			for _, extra := range []string{"detail.communicationId", "detail.eventMetadata", "detail.page", "detail.totalPages"} {
				delete(want, extra)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("keys:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// keys lists the envelope keys and the detail keys (prefixed "detail.") of an event body.
func keys(t *testing.T, body []byte) map[string]bool {
	t.Helper()
	var env map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	var detail map[string]json.RawMessage
	if err := json.Unmarshal(env["detail"], &detail); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for k := range env {
		out[k] = true
	}
	for k := range detail {
		out["detail."+k] = true
	}
	return out
}

// TestBuildersAreEventBridgeEvents decodes a builder's output with aws-lambda-go's own type, as a
// handler taking an EventBridge event directly (the scheduled tick) does.
func TestBuildersAreEventBridgeEvents(t *testing.T) {
	at := time.Date(2026, 3, 2, 14, 6, 0, 0, time.UTC)
	var evt lambdaevents.EventBridgeEvent
	if err := json.Unmarshal(NewScheduledTick("t1", at), &evt); err != nil {
		t.Fatal(err)
	}
	if evt.Source != SourceEvents || evt.DetailType != DetailTypeScheduled || !evt.Time.Equal(at) || string(evt.Detail) != "{}" {
		t.Errorf("tick decodes as %+v", evt)
	}
}
