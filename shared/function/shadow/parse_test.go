package shadow

import (
	"encoding/json"
	"strings"
	"testing"
)

// A provisioner's log line as the function writes it.
const sampleLine = `{"time":"2026-11-27T10:00:00.123Z","level":"INFO","msg":"shadow decision: not carried out","decision":{"kind":"launch","function":"provisioner","at":"2026-11-27T10:00:00Z","nodepool":"general","reason":"provisioning","instanceTypes":["c6a.large"],"instanceTypeCount":290,"offering":{"instanceType":"c6a.large","zone":"us-west-2a","capacityType":"spot","price":0.0341},"pods":["web/web-1"],"podCount":1,"priceAfter":0.0341}}`

// TestParseLogs reads the three shapes a log file comes in: the lines as
// written, `aws logs tail` (a time and stream before each), and the JSON
// document of `aws logs filter-log-events`; other lines are counted, not
// read.
func TestParseLogs(t *testing.T) {
	tail := "2026-11-27T10:00:00.123000+00:00 2026/11/27/[$LATEST]abc " + sampleLine
	events, _ := json.Marshal(map[string]any{"events": []map[string]any{{"message": sampleLine}, {"message": `{"msg":"provisioning tick done"}`}}})
	for name, in := range map[string]string{
		"lines":             sampleLine + "\n" + `{"msg":"provisioning pass done"}` + "\nnot json\n\n",
		"tail":              tail + "\n" + "2026-11-27T10:00:01 stream START RequestId: 1\n",
		"filter-log-events": string(events),
	} {
		ds, others, err := ParseLogs(strings.NewReader(in))
		if err != nil || len(ds) != 1 || others == 0 {
			t.Errorf("%s: %d decisions, %d others, %v", name, len(ds), others, err)
			continue
		}
		if d := ds[0]; d.Kind != KindLaunch || d.Offering == nil || d.Offering.Price != 0.0341 || d.PodCount != 1 || d.At.IsZero() {
			t.Errorf("%s: %+v", name, d)
		}
	}
	for _, bad := range []string{
		`{"decision":{"kind":"launch"}}`,                             // no time
		`{"decision":{"kind":"reboot","at":"2026-11-27T10:00:00Z"}}`, // no such kind
		`{"decision":"launch"}`, `{"decision":null}`, `{"decision":{`, "decision",
	} {
		if d, ok := ParseLine(bad); ok {
			t.Errorf("%q read as %+v", bad, d)
		}
	}
}

// FuzzParseLine: any line is read without panicking, and a decision read
// from one is written and read back to the same decision. Seeds are in
// testdata/fuzz/FuzzParseLine.
func FuzzParseLine(f *testing.F) {
	f.Add(sampleLine)
	f.Fuzz(func(t *testing.T, line string) {
		d, ok := ParseLine(line)
		if !ok {
			return
		}
		again, ok := ParseLine(`{"decision":` + d.Marshal() + `}`)
		if !ok || again.Marshal() != d.Marshal() || again.Key() != d.Key() {
			t.Errorf("round trip of %q: %s -> %s (%v)", line, d.Marshal(), again.Marshal(), ok)
		}
	})
}
