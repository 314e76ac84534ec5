package events

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm.UTC()
}

func readSample(t *testing.T, name string) []byte {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// outcome is everything a caller reads from a parsed message.
type outcome struct {
	Message
	Action      Action
	MessageType string
	Reason      string
}

func outcomeOf(m Message) outcome {
	return outcome{Message: m, Action: m.Action(), MessageType: m.MessageType(), Reason: m.Reason()}
}

func TestParseSamples(t *testing.T) {
	ec2 := func(kind Kind, detailType, id, at, instanceID string) Message {
		return Message{
			Kind: kind, ID: id, Source: SourceEC2, DetailType: detailType,
			Account: "123456789012", Region: "us-west-2", Time: mustTime(t, at),
			InstanceIDs: []string{instanceID},
		}
	}
	stateChange := func(n int, state, at, instanceID string) Message {
		m := ec2(KindStateChange, DetailTypeStateChange, "5e2a9c40-81d3-4f6b-a7e2-3b0c9d1e4f0"+string(rune('0'+n)), at, instanceID)
		m.State = state
		return m
	}
	spot := ec2(KindSpotInterruption, DetailTypeSpotInterruption, "6b1e8f0a-5c2d-4e7b-9a31-0d2c4f8e7a15", "2026-03-02T14:05:09Z", "i-0a1b2c3d4e5f60718")
	spot.Deadline = mustTime(t, "2026-03-02T14:07:09Z")
	cr := ec2(KindCapacityReservationInterruption, DetailTypeCapacityReservationInterruption, "7e3f0a92-b5c1-4d8e-a6f7-2c9d0b1e3a58", "2026-03-04T09:10:30Z", "i-0d9c8b7a6f5e4d3c2")
	cr.Deadline = mustTime(t, "2026-03-04T09:12:31Z")

	tests := []struct {
		file string
		want outcome
	}{
		{"spot-interruption.json", outcome{spot, CordonAndDrain, "spot_interrupted", "SpotInterrupted"}},
		{"rebalance-recommendation.json", outcome{
			ec2(KindRebalanceRecommendation, DetailTypeRebalanceRecommendation, "c39d4a7e-2f1b-48a6-b0e5-7f9a1c3d5e20", "2026-03-02T13:58:41Z", "i-0a1b2c3d4e5f60718"),
			NoAction, "rebalance_recommendation", "SpotRebalanceRecommendation"}},
		{"state-change-pending.json", outcome{stateChange(1, "pending", "2026-03-03T07:11:21Z", "i-07f3e2d1c0b9a8f76"), Ignore, "no_op", ""}},
		{"state-change-running.json", outcome{stateChange(2, "running", "2026-03-03T07:12:22Z", "i-07f3e2d1c0b9a8f76"), Ignore, "no_op", ""}},
		{"state-change-stopping.json", outcome{stateChange(3, "stopping", "2026-03-03T07:13:23Z", "i-07f3e2d1c0b9a8f76"), CordonAndDrain, "instance_stopped", "InstanceStopping"}},
		{"state-change-stopped.json", outcome{stateChange(4, "stopped", "2026-03-03T07:14:24Z", "i-07f3e2d1c0b9a8f76"), CordonAndDrain, "instance_stopped", "InstanceStopping"}},
		{"state-change-shutting-down.json", outcome{stateChange(5, "shutting-down", "2026-03-03T07:15:25Z", "i-07f3e2d1c0b9a8f76"), CordonAndDrain, "instance_terminated", "InstanceTerminating"}},
		{"state-change-terminated.json", outcome{stateChange(6, "terminated", "2026-03-03T07:16:26Z", "i-4f9a2c1e"), CordonAndDrain, "instance_terminated", "InstanceTerminating"}},
		{"health-scheduled-change.json", outcome{Message{
			Kind: KindScheduledChange, ID: "0f7d3b21-6a9e-4c58-b1d4-e2a7c6f90b3d", Source: SourceHealth, DetailType: DetailTypeHealth,
			Account: "123456789012", Region: "us-west-2", Time: mustTime(t, "2026-03-05T18:30:00Z"),
			InstanceIDs:         []string{"i-02a4b6c8d0e1f3a5b", "i-0c5d8e2f1a3b4c6d7", "i-0f1e2d3c4b5a69788"},
			HealthEventTypeCode: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
		}, CordonAndDrain, "scheduled_change", "InstanceUnhealthy"}},
		{"health-non-ec2.json", outcome{Message{
			Kind: KindUnknown, ID: "a4c7e1b9-3d2f-4a60-8e5b-1f9c0d7a2b64", Source: SourceHealth, DetailType: DetailTypeHealth,
			Account: "123456789012", Region: "us-west-2", Time: mustTime(t, "2026-03-06T09:00:00Z"),
		}, Ignore, "no_op", ""}},
		{"health-ec2-issue.json", outcome{Message{
			Kind: KindUnknown, ID: "d2b8f6a0-7c4e-41d9-95a3-6e0f2c8b1d47", Source: SourceHealth, DetailType: DetailTypeHealth,
			Account: "123456789012", Region: "us-west-2", Time: mustTime(t, "2026-03-06T11:42:17Z"),
		}, Ignore, "no_op", ""}},
		{"capacity-reservation-interruption.json", outcome{cr, CordonAndDrain, "capacity_reservation_interrupted", "CapacityReservationInstanceInterrupted"}},
		{"scheduled-tick.json", outcome{Message{
			Kind: KindScheduled, ID: "19c6e0d4-8a2b-4f73-b5e9-0d1a7c3f6b82", Source: SourceEvents, DetailType: DetailTypeScheduled,
			Account: "123456789012", Region: "us-west-2", Time: mustTime(t, "2026-03-02T14:06:00Z"),
		}, Ignore, "no_op", ""}},
		{"unknown-source.json", outcome{Message{
			Kind: KindUnknown, ID: "e8a1c5f3-0b7d-4e29-9c64-5a3f1d8b0e72", Source: "aws.autoscaling", DetailType: "EC2 Instance-terminate Lifecycle Action",
			Account: "123456789012", Region: "us-west-2", Time: mustTime(t, "2026-03-07T16:21:05Z"),
		}, Ignore, "no_op", ""}},
		{"unknown-detail-type.json", outcome{Message{
			Kind: KindUnknown, ID: "3c9f7b15-e0a4-4d62-b8c1-7f2e5a0d9b36", Source: SourceEC2, DetailType: "EBS Snapshot Notification",
			Account: "123456789012", Region: "us-west-2", Time: mustTime(t, "2026-03-07T02:00:44Z"),
		}, Ignore, "no_op", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			m, err := Parse(readSample(t, tt.file))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := outcomeOf(m); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}

	// Every sample but the malformed ones is covered above.
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.file] = true
	}
	for _, f := range files {
		if name := filepath.Base(f); !covered[name] && !strings.HasPrefix(name, "malformed-") {
			t.Errorf("sample %s has no expectation", name)
		}
	}
}

func TestParseMalformedSamples(t *testing.T) {
	tests := map[string]string{
		"malformed-truncated.json":                  "events: parsing EventBridge envelope: unexpected EOF",
		"malformed-spot-without-instance-id.json":   "events: spot interruption without instance-id",
		"malformed-bad-instance-id.json":            `events: instance id "i-0A1B2C3D4E5F60718; kubectl delete node --all" is not an EC2 instance id`,
		"malformed-unknown-state.json":              `events: state change has unknown state "rebooting"`,
		"malformed-null-detail.json":                "events: capacity reservation interruption without detail",
		"malformed-duplicate-key.json":              `events: parsing EventBridge envelope: duplicate key "Instance-ID"`,
		"malformed-health-entities-not-a-list.json": "events: parsing health event detail: json: cannot unmarshal string",
		"malformed-bad-time.json":                   `events: parsing EventBridge envelope: parsing time "two minutes ago"`,
	}
	files, err := filepath.Glob(filepath.Join("testdata", "malformed-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(tests) {
		t.Errorf("%d malformed samples, %d expectations", len(files), len(tests))
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			checkMalformed(t, readSample(t, name), want)
		})
	}
}

// checkMalformed asserts that Parse rejects body as malformed with an error starting with want.
func checkMalformed(t *testing.T, body []byte, want string) {
	t.Helper()
	m, err := Parse(body)
	if err == nil {
		t.Fatalf("Parse accepted it: %+v", m)
	}
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("error %q does not match ErrMalformed", err)
	}
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q\ndoes not start with %q", err, want)
	}
	if !reflect.DeepEqual(m, Message{}) {
		t.Errorf("Parse returned %+v with its error", m)
	}
}

func TestParseMalformed(t *testing.T) {
	spot := func(detail string) string {
		return `{"version":"0","id":"x1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2",` +
			`"account":"123456789012","time":"2026-03-02T14:05:09Z","region":"us-west-2","resources":[],"detail":` + detail + `}`
	}
	health := func(entities string) string {
		return `{"version":"0","id":"h1","detail-type":"AWS Health Event","source":"aws.health","time":"2026-03-05T18:30:00Z",` +
			`"detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":` + entities + `}}`
	}
	var entities []string
	for range MaxAffectedEntities + 1 {
		entities = append(entities, `{"entityValue":"i-0123456789abcdef0"}`)
	}
	valid := string(readSample(t, "spot-interruption.json"))

	tests := []struct {
		name, body, want string
	}{
		{"empty", ``, "events: empty message body"},
		{"whitespace", "  \n", "events: parsing EventBridge envelope: EOF"},
		{"truncated", valid[:len(valid)/2], "events: parsing EventBridge envelope: unexpected EOF"},
		{"not JSON", `instance-id=i-0a1b2c3d4e5f60718`, "events: parsing EventBridge envelope: invalid character"},
		{"array", `[{"source":"aws.ec2"}]`, "events: parsing EventBridge envelope: body is not a JSON object"},
		{"string", `"aws.ec2"`, "events: parsing EventBridge envelope: body is not a JSON object"},
		{"null", `null`, "events: parsing EventBridge envelope: body is not a JSON object"},
		{"trailing data", valid + `{}`, "events: parsing EventBridge envelope: data after the JSON object"},
		{"trailing garbage", valid + `x`, "events: parsing EventBridge envelope:"},
		{"time is a number", strings.Replace(spot(`{}`), `"2026-03-02T14:05:09Z"`, `1772460309`, 1), "events: parsing EventBridge envelope: "},
		{"source is a list", `{"source":["aws.ec2"],"detail-type":"x"}`, "events: parsing EventBridge envelope: json: cannot unmarshal array"},
		{"resources is a string", strings.Replace(spot(`{}`), `"resources":[]`, `"resources":"all"`, 1), "events: parsing EventBridge envelope: json: cannot unmarshal string"},
		{"detail missing", strings.Replace(spot(`{}`), `,"detail":{}`, ``, 1), "events: spot interruption without detail"},
		{"detail null", spot(`null`), "events: spot interruption without detail"},
		{"detail is a string", spot(`"i-0a1b2c3d4e5f60718"`), "events: parsing spot interruption detail: json: cannot unmarshal string"},
		{"detail is a list", spot(`[]`), "events: parsing spot interruption detail: json: cannot unmarshal array"},
		{"instance-id is a number", spot(`{"instance-id":7}`), "events: parsing spot interruption detail: json: cannot unmarshal number"},
		{"instance-id empty", spot(`{"instance-id":""}`), "events: spot interruption without instance-id"},
		{"instance-id upper case", spot(`{"instance-id":"i-0A1B2C3D4E5F60718"}`), `events: instance id "i-0A1B2C3D4E5F60718" is not an EC2 instance id`},
		{"instance-id too short", spot(`{"instance-id":"i-0a1b2c3"}`), `events: instance id "i-0a1b2c3" is not an EC2 instance id`},
		{"instance-id too long", spot(`{"instance-id":"i-0a1b2c3d4e5f607189"}`), `events: instance id "i-0a1b2c3d4e5f607189" is not an EC2 instance id`},
		{"instance-id with newline", spot(`{"instance-id":"i-0a1b2c3d4e5f60718\n"}`), `events: instance id "i-0a1b2c3d4e5f60718\n" is not an EC2 instance id`},
		{"spot request id", spot(`{"instance-id":"sir-0a1b2c3d"}`), `events: instance id "sir-0a1b2c3d" is not an EC2 instance id`},
		{"long instance-id is cut short", spot(`{"instance-id":"` + strings.Repeat("A", 5000) + `"}`), `events: instance id "` + strings.Repeat("A", 64) + `"... is not`},
		{"duplicate key", spot(`{"instance-id":"i-0a1b2c3d4e5f60718","instance-id":"i-0ffffffffffffffff"}`), `events: parsing EventBridge envelope: duplicate key "instance-id"`},
		{"duplicate key by case", spot(`{"instance-id":"i-0a1b2c3d4e5f60718","INSTANCE-ID":"i-0ffffffffffffffff"}`), `events: parsing EventBridge envelope: duplicate key "INSTANCE-ID"`},
		{"duplicate key by unicode folding", spot(`{"instance-id":"i-0a1b2c3d4e5f60718","in\u017ftance-id":"i-0ffffffffffffffff"}`), `events: parsing EventBridge envelope: duplicate key "inſtance-id"`},
		{"duplicate key by escape", spot(`{"instance-id":"i-0a1b2c3d4e5f60718","instance\u002did":"i-0ffffffffffffffff"}`), `events: parsing EventBridge envelope: duplicate key "instance-id"`},
		{"duplicate envelope key", `{"source":"aws.ec2","source":"aws.health"}`, `events: parsing EventBridge envelope: duplicate key "source"`},
		{"duplicate detail", spot(`{"instance-id":"i-0a1b2c3d4e5f60718"},"Detail":{"instance-id":"i-0ffffffffffffffff"}`), `events: parsing EventBridge envelope: duplicate key "Detail"`},
		{"duplicate entity key", health(`[{"entityValue":"i-0123456789abcdef0","EntityValue":"i-0ffffffffffffffff"}]`), `events: parsing EventBridge envelope: duplicate key "EntityValue"`},
		{"duplicate key in opaque object", spot(`{"instance-id":"i-0a1b2c3d4e5f60718","x":{"a":1,"a":2}}`), `events: parsing EventBridge envelope: duplicate key "a"`},
		{"deeply nested", spot(`{"x":` + strings.Repeat(`[`, 40) + strings.Repeat(`]`, 40) + `}`), "events: parsing EventBridge envelope: JSON nested deeper than 32 levels"},
		{"very deeply nested", spot(strings.Repeat(`{"a":`, 20000) + `1` + strings.Repeat(`}`, 20000)), "events: parsing EventBridge envelope: JSON nested deeper than 32 levels"},
		{"unclosed nesting", `{"detail":` + strings.Repeat(`[`, 100000), "events: parsing EventBridge envelope:"},
		{"huge body", valid + strings.Repeat(" ", MaxBodyBytes), "events: message body is"},
		{"without id", strings.Replace(spot(`{}`), `"id":"x1"`, `"id":""`, 1), "events: spot interruption without id"},
		{"without time", strings.Replace(spot(`{}`), `"time":"2026-03-02T14:05:09Z"`, `"time":null`, 1), "events: spot interruption without time"},
		{"tick without id", `{"version":"0","source":"aws.events","detail-type":"Scheduled Event","time":"2026-03-02T14:06:00Z"}`, "events: scheduled event without id"},
		{"state missing", strings.Replace(string(NewStateChange("s1", "i-07f3e2d1c0b9a8f76", "", time.Now())), `"state":""`, `"x":1`, 1), "events: state change without state"},
		{"state unknown", string(NewStateChange("s1", "i-07f3e2d1c0b9a8f76", "hibernating", time.Now())), `events: state change has unknown state "hibernating"`},
		{"state is a bool", strings.Replace(string(NewStateChange("s1", "i-07f3e2d1c0b9a8f76", "", time.Now())), `"state":""`, `"state":true`, 1), "events: parsing state change detail: json: cannot unmarshal bool"},
		{"rebalance without instance", strings.Replace(string(NewRebalanceRecommendation("r1", "i-0a1b2c3d4e5f60718", time.Now())), `"instance-id":"i-0a1b2c3d4e5f60718"`, `"instance":"i-0a1b2c3d4e5f60718"`, 1), "events: rebalance recommendation without instance-id"},
		{"capacity reservation bad id", string(NewCapacityReservationInterruption("c1", "cr-0a1b2c3d4e5f60718", time.Now())), `events: instance id "cr-0a1b2c3d4e5f60718" is not`},
		{"capacity block bad reservation id", string(NewCapacityBlockExpiration("b1", "i-0a1b2c3d4e5f60718", time.Now(), time.Now())), `events: capacity block expiration: capacity reservation id "i-0a1b2c3d4e5f60718" is not one`},
		{"too many health entities", health(`[` + strings.Join(entities, ",") + `]`), "events: health event lists 1001 affected entities, more than the 1000 accepted"},
		{"health entity is a number", health(`[1]`), "events: parsing health event detail: json: cannot unmarshal number"},
		{"health service is an object", strings.Replace(health(`[]`), `"service":"EC2"`, `"service":{"name":"EC2"}`, 1), "events: parsing health event detail: json: cannot unmarshal object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkMalformed(t, []byte(tt.body), tt.want)
		})
	}
}

func TestParseAccepts(t *testing.T) {
	at := mustTime(t, "2026-03-02T14:05:09Z")
	tests := []struct {
		name string
		body []byte
		want Message
	}{
		{"empty object is an unknown event", []byte(`{}`), Message{Kind: KindUnknown}},
		{"other version", []byte(strings.Replace(string(NewSpotInterruption("v1", "i-0a1b2c3d4e5f60718", at)), `"version":"0"`, `"version":"1"`, 1)),
			Message{Kind: KindUnknown, ID: "v1", Source: SourceEC2, DetailType: DetailTypeSpotInterruption, Account: SampleAccount, Region: SampleRegion, Time: at}},
		{"unknown event with garbage detail", []byte(`{"source":"aws.s3","detail-type":"Object Created","detail":"not an object"}`),
			Message{Kind: KindUnknown, Source: "aws.s3", DetailType: "Object Created"}},
		{"state in upper case", NewStateChange("s1", "i-07f3e2d1c0b9a8f76", "Stopping", at),
			Message{Kind: KindStateChange, ID: "s1", Source: SourceEC2, DetailType: DetailTypeStateChange, Account: SampleAccount, Region: SampleRegion, Time: at,
				InstanceIDs: []string{"i-07f3e2d1c0b9a8f76"}, State: StateStopping}},
		{"spot with an unfamiliar action", []byte(strings.Replace(string(NewSpotInterruption("a1", "i-0a1b2c3d4e5f60718", at)), `"terminate"`, `"evaporate"`, 1)),
			Message{Kind: KindSpotInterruption, ID: "a1", Source: SourceEC2, DetailType: DetailTypeSpotInterruption, Account: SampleAccount, Region: SampleRegion, Time: at,
				InstanceIDs: []string{"i-0a1b2c3d4e5f60718"}, Deadline: at.Add(2 * time.Minute)}},
		{"capacity reservation without termination time", []byte(strings.Replace(string(NewCapacityReservationInterruption("c1", "i-0d9c8b7a6f5e4d3c2", at)), `"instance-termination-time":"2026-03-02T14:07:09Z"`, `"instance-termination-time":"soon"`, 1)),
			Message{Kind: KindCapacityReservationInterruption, ID: "c1", Source: SourceEC2, DetailType: DetailTypeCapacityReservationInterruption, Account: SampleAccount, Region: SampleRegion, Time: at,
				InstanceIDs: []string{"i-0d9c8b7a6f5e4d3c2"}, Deadline: at.Add(2 * time.Minute)}},
		{"health naming other resources", NewScheduledChange("h1", "AWS_EC2_DEDICATED_HOST_RETIREMENT_SCHEDULED", []string{"h-0123456789abcdef0", "vol-0123456789abcdef0"}, at),
			Message{Kind: KindScheduledChange, ID: "h1", Source: SourceHealth, DetailType: DetailTypeHealth, Account: SampleAccount, Region: SampleRegion, Time: at,
				HealthEventTypeCode: "AWS_EC2_DEDICATED_HOST_RETIREMENT_SCHEDULED"}},
		{"health with duplicates and a host", NewScheduledChange("h2", "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED", []string{"i-0f1e2d3c4b5a69788", "h-0123456789abcdef0", "i-02a4b6c8d0e1f3a5b", "i-0f1e2d3c4b5a69788"}, at),
			Message{Kind: KindScheduledChange, ID: "h2", Source: SourceHealth, DetailType: DetailTypeHealth, Account: SampleAccount, Region: SampleRegion, Time: at,
				InstanceIDs: []string{"i-02a4b6c8d0e1f3a5b", "i-0f1e2d3c4b5a69788"}, HealthEventTypeCode: "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED"}},
		{"case-distinct tags", []byte(strings.Replace(string(NewScheduledChange("h3", "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", []string{"i-02a4b6c8d0e1f3a5b"}, at)), `"status":"PENDING"`, `"status":"PENDING","tags":{"Name":"a","name":"b"}`, 1)),
			Message{Kind: KindScheduledChange, ID: "h3", Source: SourceHealth, DetailType: DetailTypeHealth, Account: SampleAccount, Region: SampleRegion, Time: at,
				InstanceIDs: []string{"i-02a4b6c8d0e1f3a5b"}, HealthEventTypeCode: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"}},
		{"time with an offset", []byte(strings.Replace(string(NewRebalanceRecommendation("r1", "i-0a1b2c3d4e5f60718", at)), `"2026-03-02T14:05:09Z"`, `"2026-03-02T15:05:09+01:00"`, 1)),
			Message{Kind: KindRebalanceRecommendation, ID: "r1", Source: SourceEC2, DetailType: DetailTypeRebalanceRecommendation, Account: SampleAccount, Region: SampleRegion, Time: at,
				InstanceIDs: []string{"i-0a1b2c3d4e5f60718"}}},
		{"body of exactly the maximum size", padTo(NewScheduledTick("t1", at), MaxBodyBytes),
			Message{Kind: KindScheduled, ID: "t1", Source: SourceEvents, DetailType: DetailTypeScheduled, Account: SampleAccount, Region: SampleRegion, Time: at}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.body)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// padTo pads body with trailing white space to n bytes.
func padTo(body []byte, n int) []byte {
	return append(body, strings.Repeat(" ", n-len(body))...)
}

func TestValidInstanceID(t *testing.T) {
	for id, want := range map[string]bool{
		"i-4f9a2c1e":           true,
		"i-0a1b2c3d4e5f60718":  true,
		"i-0a1b2c3d4e5f6071":   true,
		"i-4f9a2c1":            false,
		"i-0a1b2c3d4e5f607189": false,
		"i-0A1B2C3D":           false,
		"I-4f9a2c1e":           false,
		"i-4f9a2c1g":           false,
		" i-4f9a2c1e":          false,
		"i-4f9a2c1e\n":         false,
		"":                     false,
	} {
		if got := ValidInstanceID(id); got != want {
			t.Errorf("ValidInstanceID(%q) = %v, want %v", id, got, want)
		}
	}
}
