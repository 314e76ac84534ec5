package shadow

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// maxLogBytes bounds what ParseLogs reads.
const maxLogBytes = 1 << 30

// ParseLine reads a decision from one log line: the function's JSON line
// (with LogKey), possibly after a prefix such as the timestamp and stream
// `aws logs tail` prints. ok is false for any other line.
func ParseLine(line string) (d Decision, ok bool) {
	i := strings.IndexByte(line, '{')
	if i < 0 || !strings.Contains(line[i:], `"`+LogKey+`"`) {
		return Decision{}, false
	}
	var l struct {
		Decision *Decision `json:"decision"`
	}
	if json.NewDecoder(strings.NewReader(line[i:])).Decode(&l) != nil || l.Decision == nil || !l.Decision.Valid() {
		return Decision{}, false
	}
	return *l.Decision, true
}

// ParseLogs reads the decisions of a file of log lines: the functions'
// output, `aws logs tail` or `aws logs filter-log-events --output text`
// (one line each), or the JSON document `aws logs filter-log-events`
// writes (its events' messages). It returns the decisions and how many
// lines were not decisions.
func ParseLogs(r io.Reader) (ds []Decision, others int, err error) {
	data, err := io.ReadAll(io.LimitReader(r, maxLogBytes+1))
	if err != nil {
		return nil, 0, err
	}
	if len(data) > maxLogBytes {
		return nil, 0, fmt.Errorf("log file larger than %d MiB: filter it first (docs/shadow.md)", maxLogBytes>>20)
	}
	if lines, ok := filterLogEvents(data); ok {
		for _, l := range lines {
			if d, ok := ParseLine(l); ok {
				ds = append(ds, d)
			} else {
				others++
			}
		}
		return ds, others, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		if d, ok := ParseLine(line); ok {
			ds = append(ds, d)
		} else {
			others++
		}
	}
	return ds, others, sc.Err()
}

// filterLogEvents reads the document of `aws logs filter-log-events`.
func filterLogEvents(data []byte) ([]string, bool) {
	t := bytes.TrimSpace(data)
	if len(t) == 0 || t[0] != '{' || !bytes.Contains(t, []byte(`"events"`)) {
		return nil, false
	}
	var doc struct {
		Events []struct {
			Message string `json:"message"`
		} `json:"events"`
	}
	if json.Unmarshal(t, &doc) != nil || doc.Events == nil {
		return nil, false
	}
	out := make([]string, len(doc.Events))
	for i, e := range doc.Events {
		out[i] = e.Message
	}
	return out, true
}
