package events

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
)

// The builders write events as EventBridge delivers them to the queue, for tests and for the local
// emulator's injector. They use one account and region so that bodies are reproducible; the event
// time is cut to whole seconds because that is all EventBridge writes. A time outside years 1-9999
// cannot be written as JSON and makes them panic, as a misuse of a test helper should.
const (
	SampleAccount = "123456789012"
	SampleRegion  = "us-west-2"
)

// NewSpotInterruption builds an "EC2 Spot Instance Interruption Warning" whose instance will be
// terminated.
func NewSpotInterruption(id, instanceID string, at time.Time) []byte {
	return build(id, SourceEC2, DetailTypeSpotInterruption, at, []string{instanceARN(instanceID)},
		SpotInterruptionDetail{InstanceID: instanceID, InstanceAction: "terminate"})
}

// NewRebalanceRecommendation builds an "EC2 Instance Rebalance Recommendation".
func NewRebalanceRecommendation(id, instanceID string, at time.Time) []byte {
	return build(id, SourceEC2, DetailTypeRebalanceRecommendation, at, []string{instanceARN(instanceID)},
		RebalanceRecommendationDetail{InstanceID: instanceID})
}

// NewStateChange builds an "EC2 Instance State-change Notification" for state (see the State constants).
func NewStateChange(id, instanceID, state string, at time.Time) []byte {
	return build(id, SourceEC2, DetailTypeStateChange, at, []string{instanceARN(instanceID)},
		StateChangeDetail{InstanceID: instanceID, State: state})
}

// NewCapacityReservationInterruption builds an "EC2 Capacity Reservation Instance Interruption Warning"
// that terminates the instance two minutes after at.
func NewCapacityReservationInterruption(id, instanceID string, at time.Time) []byte {
	return build(id, SourceEC2, DetailTypeCapacityReservationInterruption, at, []string{instanceARN(instanceID)},
		CapacityReservationInterruptionDetail{
			InstanceID:              instanceID,
			InstanceAction:          "terminate",
			InstanceTerminationTime: at.UTC().Truncate(time.Second).Add(spotWarning).Format(time.RFC3339),
			AvailabilityZoneID:      "usw2-az1",
		})
}

// NewCapacityBlockExpiration builds the "Capacity Block Reservation Expiration Warning" EC2 sends 40
// minutes before the Capacity Block reservationID ends at end.
func NewCapacityBlockExpiration(id, reservationID string, end, at time.Time) []byte {
	arn := fmt.Sprintf("arn:aws:ec2:%s:%s:capacity-reservation/%s", SampleRegion, SampleAccount, reservationID)
	return build(id, SourceEC2, DetailTypeCapacityBlockExpiration, at, []string{arn},
		CapacityBlockExpirationDetail{CapacityReservationID: reservationID, EndDate: end.UTC().Truncate(time.Second).Format(time.RFC3339)})
}

// NewScheduledChange builds an "AWS Health Event" for an EC2 scheduled change (eventTypeCode such as
// AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED) naming instanceIDs, due two weeks after at.
func NewScheduledChange(id, eventTypeCode string, instanceIDs []string, at time.Time) []byte {
	at = at.UTC().Truncate(time.Second)
	entities := make([]HealthAffectedEntity, 0, len(instanceIDs))
	for _, instanceID := range instanceIDs {
		entities = append(entities, HealthAffectedEntity{EntityValue: instanceID, Status: "PENDING"})
	}
	start := at.Add(14 * 24 * time.Hour)
	return build(id, SourceHealth, DetailTypeHealth, at, instanceIDs, HealthDetail{
		EventARN:          fmt.Sprintf("arn:aws:health:%s::event/EC2/%s/%s_%s", SampleRegion, eventTypeCode, eventTypeCode, id),
		Service:           HealthServiceEC2,
		EventTypeCode:     eventTypeCode,
		EventTypeCategory: HealthCategoryScheduled,
		EventScopeCode:    "ACCOUNT_SPECIFIC",
		StartTime:         start.Format(http.TimeFormat),
		EndTime:           start.Add(2 * time.Hour).Format(http.TimeFormat),
		LastUpdatedTime:   at.Format(http.TimeFormat),
		StatusCode:        "upcoming",
		EventRegion:       SampleRegion,
		EventDescription: []HealthEventDescription{{
			Language:          "en_US",
			LatestDescription: "EC2 has scheduled maintenance for the listed instances.",
		}},
		AffectedEntities: entities,
		AffectedAccount:  SampleAccount,
	})
}

// NewScheduledTick builds the "Scheduled Event" an EventBridge schedule rule sends.
func NewScheduledTick(id string, at time.Time) []byte {
	rule := fmt.Sprintf("arn:aws:events:%s:%s:rule/karpless-tick", SampleRegion, SampleAccount)
	return build(id, SourceEvents, DetailTypeScheduled, at, []string{rule}, struct{}{})
}

func instanceARN(instanceID string) string {
	return fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", SampleRegion, SampleAccount, instanceID)
}

func build(id, source, detailType string, at time.Time, resources []string, detail any) []byte {
	raw, err := json.Marshal(detail)
	if err != nil {
		panic(fmt.Sprintf("events: building %s detail: %v", detailType, err))
	}
	if resources == nil {
		resources = []string{}
	}
	body, err := json.Marshal(lambdaevents.CloudWatchEvent{
		Version:    eventVersion,
		ID:         id,
		DetailType: detailType,
		Source:     source,
		AccountID:  SampleAccount,
		Time:       at.UTC().Truncate(time.Second),
		Region:     SampleRegion,
		Resources:  resources,
		Detail:     raw,
	})
	if err != nil {
		panic(fmt.Sprintf("events: building %s event: %v", detailType, err))
	}
	return body
}
