package v1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Never disables a NillableDuration (no expiry, no consolidation).
const Never = "Never"

// NillableDuration is a duration that can also be "Never". The original text
// is kept so that a round trip through our functions rewrites exactly what
// the user applied (GitOps tools compare the bytes).
type NillableDuration struct {
	Duration *time.Duration `json:"-"`
	raw      []byte
}

// MustParseNillableDuration parses "Never" or a Go duration and panics on bad
// input; for constants and tests only.
func MustParseNillableDuration(s string) NillableDuration {
	d, err := ParseNillableDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// ParseNillableDuration parses "Never" or a Go duration string.
func ParseNillableDuration(s string) (NillableDuration, error) {
	if s == Never {
		return NillableDuration{raw: []byte(`"Never"`)}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return NillableDuration{}, fmt.Errorf("parsing duration %q: %w", s, err)
	}
	raw, _ := json.Marshal(s)
	return NillableDuration{Duration: &d, raw: raw}, nil
}

// IsZero reports whether the value was never set. Such a value is omitted
// when encoded (fields use omitzero), so the API server applies its default;
// an explicit "Never" is not zero.
func (d NillableDuration) IsZero() bool { return d.Duration == nil && d.raw == nil }

// IsNever reports whether the duration is disabled.
func (d NillableDuration) IsNever() bool { return d.Duration == nil }

// String returns the duration or "Never".
func (d NillableDuration) String() string {
	if d.Duration == nil {
		return Never
	}
	return d.Duration.String()
}

// UnmarshalJSON accepts a JSON string: "Never" or a Go duration.
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string: %w", err)
	}
	v, err := ParseNillableDuration(s)
	if err != nil {
		return err
	}
	v.raw = bytes.Clone(b)
	*d = v
	return nil
}

// MarshalJSON writes the text the value was parsed from, else its canonical form.
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	if d.raw != nil {
		return d.raw, nil
	}
	return json.Marshal(d.String())
}

// ToUnstructured lets apimachinery's unstructured converter handle the type.
func (d NillableDuration) ToUnstructured() any {
	if d.raw != nil {
		var s string
		if json.Unmarshal(d.raw, &s) == nil {
			return s
		}
	}
	return d.String()
}

// DeepCopyInto copies the duration and its original text.
func (d *NillableDuration) DeepCopyInto(out *NillableDuration) {
	*out = NillableDuration{}
	if d.Duration != nil {
		v := *d.Duration
		out.Duration = &v
	}
	out.raw = bytes.Clone(d.raw)
}
