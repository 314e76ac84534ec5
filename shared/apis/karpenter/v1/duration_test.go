package v1

import (
	"encoding/json"
	"testing"
	"time"
)

func TestNillableDurationRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		in, out string
		never   bool
		d       time.Duration
	}{
		{`"720h"`, `"720h"`, false, 720 * time.Hour},
		{`"1h30m"`, `"1h30m"`, false, 90 * time.Minute},
		{`"0s"`, `"0s"`, false, 0},
		{`"Never"`, `"Never"`, true, 0},
	} {
		var d NillableDuration
		if err := json.Unmarshal([]byte(tc.in), &d); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if d.IsNever() != tc.never || (!tc.never && *d.Duration != tc.d) || d.IsZero() {
			t.Errorf("%s: decoded %+v", tc.in, d)
		}
		var c NillableDuration
		d.DeepCopyInto(&c)
		b, err := json.Marshal(c)
		if err != nil || string(b) != tc.out {
			t.Errorf("%s: re-encoded as %s (%v), want the original text", tc.in, b, err)
		}
	}
	for _, bad := range []string{`"forever"`, `5`, `null`, `"1d"`} {
		var d NillableDuration
		if err := json.Unmarshal([]byte(bad), &d); err == nil && !d.IsZero() {
			t.Errorf("%s decoded without error to %v", bad, d)
		}
	}
}

func TestZeroDurationIsOmitted(t *testing.T) {
	b, err := json.Marshal(NodeClaimSpec{})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if _, ok := m["expireAfter"]; ok {
		t.Errorf("unset expireAfter was encoded: %s", b)
	}
	b, _ = json.Marshal(NodeClaimSpec{ExpireAfter: MustParseNillableDuration(Never)})
	_ = json.Unmarshal(b, &m)
	if m["expireAfter"] != "Never" {
		t.Errorf("explicit Never was not encoded: %s", b)
	}
}
