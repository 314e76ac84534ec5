package events

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		body, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	at := time.Date(2026, 3, 2, 14, 5, 9, 0, time.UTC)
	f.Add(NewScheduledChange("f1", "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED", []string{"i-0f1e2d3c4b5a69788", "h-0123456789abcdef0", "i-0f1e2d3c4b5a69788"}, at))
	f.Add([]byte(`{"detail":{"instance-id":"i-0a1b2c3d4e5f60718","Instance-Id":"i-0ffffffffffffffff"}}`))

	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := Parse(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %q does not match ErrMalformed", err)
			}
			return
		}
		for _, id := range m.InstanceIDs {
			if !ValidInstanceID(id) {
				t.Fatalf("accepted instance id %q", id)
			}
		}
		if !slices.IsSorted(m.InstanceIDs) || len(slices.Compact(slices.Clone(m.InstanceIDs))) != len(m.InstanceIDs) {
			t.Fatalf("instance ids not sorted and unique: %q", m.InstanceIDs)
		}
		switch m.Kind {
		case KindSpotInterruption, KindRebalanceRecommendation, KindStateChange, KindCapacityReservationInterruption:
			if len(m.InstanceIDs) != 1 {
				t.Fatalf("%s with %d instance ids", m.Kind, len(m.InstanceIDs))
			}
		case KindScheduledChange:
			if len(m.InstanceIDs) > MaxAffectedEntities {
				t.Fatalf("%d instance ids", len(m.InstanceIDs))
			}
		case KindScheduled, KindUnknown, KindCapacityBlockExpiration:
			if len(m.InstanceIDs) != 0 {
				t.Fatalf("%s with instance ids %q", m.Kind, m.InstanceIDs)
			}
		default:
			t.Fatalf("kind %q", m.Kind)
		}
		if m.Kind == KindStateChange && !slices.Contains([]string{StatePending, StateRunning, StateStopping, StateStopped, StateShuttingDown, StateTerminated}, m.State) {
			t.Fatalf("state %q", m.State)
		}
		if m.Action() == CordonAndDrain && m.Reason() == "" {
			t.Fatalf("%s drains without an event reason", m.Kind)
		}
	})
}
