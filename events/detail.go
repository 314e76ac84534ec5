package events

// Envelope sources and detail-types that the EventBridge rules route to the interruption queue, plus the
// scheduler's tick. The rules in the stack match on exactly these strings.
const (
	SourceEC2    = "aws.ec2"
	SourceHealth = "aws.health"
	SourceEvents = "aws.events"

	DetailTypeSpotInterruption                = "EC2 Spot Instance Interruption Warning"
	DetailTypeRebalanceRecommendation         = "EC2 Instance Rebalance Recommendation"
	DetailTypeStateChange                     = "EC2 Instance State-change Notification"
	DetailTypeCapacityReservationInterruption = "EC2 Capacity Reservation Instance Interruption Warning"
	DetailTypeCapacityBlockExpiration         = "Capacity Block Reservation Expiration Warning"
	DetailTypeHealth                          = "AWS Health Event"
	DetailTypeScheduled                       = "Scheduled Event"

	// eventVersion is the only envelope version EventBridge has published; a new one may change the
	// detail shapes, so Parse treats anything else as a kind it does not know.
	eventVersion = "0"
)

// The Health filter Karpenter v1 applies: only EC2's scheduled changes name instances to drain.
const (
	HealthServiceEC2        = "EC2"
	HealthCategoryScheduled = "scheduledChange"
)

// SpotInterruptionDetail is the detail of an aws.ec2 "EC2 Spot Instance Interruption Warning".
// EC2 sends it about two minutes before it reclaims the instance; the event carries no deadline of its own.
type SpotInterruptionDetail struct {
	InstanceID string `json:"instance-id"`
	// InstanceAction is what EC2 will do: hibernate, stop or terminate. Karpenter drains in every case.
	InstanceAction string `json:"instance-action"`
}

// RebalanceRecommendationDetail is the detail of an aws.ec2 "EC2 Instance Rebalance Recommendation":
// the spot instance runs at elevated risk of interruption.
type RebalanceRecommendationDetail struct {
	InstanceID string `json:"instance-id"`
}

// StateChangeDetail is the detail of an aws.ec2 "EC2 Instance State-change Notification".
type StateChangeDetail struct {
	InstanceID string `json:"instance-id"`
	// State is pending, running, stopping, stopped, shutting-down or terminated.
	State string `json:"state"`
}

// CapacityReservationInterruptionDetail is the detail of an aws.ec2
// "EC2 Capacity Reservation Instance Interruption Warning": the owner of an interruptible capacity
// reservation reclaims it and the instance will be terminated.
type CapacityReservationInterruptionDetail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
	// InstanceTerminationTime is RFC 3339, e.g. 2026-03-01T10:02:00Z.
	InstanceTerminationTime string `json:"instance-termination-time"`
	AvailabilityZoneID      string `json:"azId"`
}

// CapacityBlockExpirationDetail is the detail of an aws.ec2 "Capacity Block Reservation Expiration
// Warning": EC2 sends it 40 minutes before a Capacity Block ends, and starts terminating the block's
// instances 10 minutes later. It names the reservation, not its instances.
type CapacityBlockExpirationDetail struct {
	CapacityReservationID string `json:"capacity-reservation-id"`
	// EndDate is RFC 3339, e.g. 2026-03-01T11:30:00Z.
	EndDate string `json:"end-date"`
}

// HealthDetail is the detail of an aws.health "AWS Health Event". Only the fields Karpless reads or
// logs are typed; the rest (eventMetadata, paging) are skipped so a change in their shape cannot turn a
// real scheduled change into a decode error. Times stay strings: Health writes them in RFC 1123 form
// ("Tue, 03 Mar 2026 08:00:00 GMT"), not RFC 3339, and nothing here computes with them.
type HealthDetail struct {
	EventARN          string                   `json:"eventArn"`
	Service           string                   `json:"service"`
	EventTypeCode     string                   `json:"eventTypeCode"`
	EventTypeCategory string                   `json:"eventTypeCategory"`
	EventScopeCode    string                   `json:"eventScopeCode,omitempty"`
	CommunicationID   string                   `json:"communicationId,omitempty"`
	StartTime         string                   `json:"startTime,omitempty"`
	EndTime           string                   `json:"endTime,omitempty"`
	LastUpdatedTime   string                   `json:"lastUpdatedTime,omitempty"`
	StatusCode        string                   `json:"statusCode,omitempty"`
	EventRegion       string                   `json:"eventRegion,omitempty"`
	EventDescription  []HealthEventDescription `json:"eventDescription,omitempty"`
	AffectedEntities  []HealthAffectedEntity   `json:"affectedEntities"`
	AffectedAccount   string                   `json:"affectedAccount,omitempty"`
}

// HealthEventDescription is one language's text of a Health event.
type HealthEventDescription struct {
	Language          string `json:"language"`
	LatestDescription string `json:"latestDescription"`
}

// HealthAffectedEntity names one resource a Health event is about; for EC2 instance events EntityValue
// is the instance id.
type HealthAffectedEntity struct {
	EntityValue     string `json:"entityValue"`
	LastUpdatedTime string `json:"lastUpdatedTime,omitempty"`
	Status          string `json:"status,omitempty"`
}
