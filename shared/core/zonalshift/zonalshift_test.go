package zonalshift

import (
	"reflect"
	"testing"
	"time"
)

func TestActive(t *testing.T) {
	now := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		shifts []Shift
		want   []string
	}{
		{"none", nil, []string{}},
		{"applied and unexpired", []Shift{{AwayFrom: "usw2-az1", Expiry: now.Add(time.Hour), Applied: true}}, []string{"usw2-az1"}},
		{"not applied", []Shift{{AwayFrom: "usw2-az1", Expiry: now.Add(time.Hour)}}, []string{}},
		{"expired", []Shift{{AwayFrom: "usw2-az1", Expiry: now.Add(-time.Second), Applied: true}}, []string{}},
		{"expiring now", []Shift{{AwayFrom: "usw2-az1", Expiry: now, Applied: true}}, []string{}},
		{"no zone", []Shift{{Expiry: now.Add(time.Hour), Applied: true}}, []string{}},
		{"two zones, one expired", []Shift{
			{AwayFrom: "usw2-az2", Expiry: now.Add(time.Minute), Applied: true},
			{AwayFrom: "usw2-az1", Expiry: now.Add(-time.Minute), Applied: true},
			{AwayFrom: "usw2-az3", Expiry: now.Add(time.Minute), Applied: true},
		}, []string{"usw2-az2", "usw2-az3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Active(tc.shifts, now)
			if !reflect.DeepEqual(got.Sorted(), tc.want) {
				t.Errorf("Active = %v, want %v", got.Sorted(), tc.want)
			}
			for _, id := range tc.want {
				if !got.Has(id) {
					t.Errorf("Has(%s) = false", id)
				}
			}
		})
	}
}

func TestParseRoundTrip(t *testing.T) {
	for _, s := range []string{"", "usw2-az1", "usw2-az1,usw2-az3"} {
		if got := Parse(s).String(); got != s {
			t.Errorf("Parse(%q).String() = %q", s, got)
		}
	}
	if z := Parse(" , usw2-az2 ,"); !z.Has("usw2-az2") || len(z) != 1 {
		t.Errorf("Parse of a ragged list = %v", z)
	}
	if Parse("").Has("") || (Zones(nil)).Has("usw2-az1") {
		t.Error("the empty set has a zone")
	}
}

func TestNames(t *testing.T) {
	nc := classWith("default")
	got := Zones{"tstz1-1a": true, "tstz1-1z": true}.Names(nc)
	if !reflect.DeepEqual(got, map[string]bool{"test-zone-1a": true}) {
		t.Errorf("Names = %v, want only test-zone-1a (the class has no subnet in tstz1-1z)", got)
	}
	if Zones(nil).Names(nc) != nil {
		t.Error("no shift named zones")
	}
}

func TestUnavailable(t *testing.T) {
	nc := classWith("default")
	marked := func(ct, it, zone string) bool { return ct == "spot" && zone == "test-zone-1b" }
	un := Zones{"tstz1-1a": true}.Unavailable(nc, marked)
	for _, tc := range []struct {
		ct, zone string
		want     bool
	}{
		{"on-demand", "test-zone-1a", true},
		{"spot", "test-zone-1a", true},
		{"reserved", "test-zone-1a", true},
		{"on-demand", "test-zone-1b", false},
		{"spot", "test-zone-1b", true}, // the capacity mark still holds
		{"reserved", "test-zone-1c", false},
	} {
		if got := un(tc.ct, "m5.large", tc.zone); got != tc.want {
			t.Errorf("%s in %s: unavailable %v, want %v", tc.ct, tc.zone, got, tc.want)
		}
	}
	if (Zones{"tstz1-1a": true}).Unavailable(nc, nil)("spot", "m5.large", "test-zone-1b") {
		t.Error("with no marks, an unshifted zone is unavailable")
	}
	if Zones(nil).Unavailable(nc, nil) != nil {
		t.Error("no shift changed the marks")
	}
}
