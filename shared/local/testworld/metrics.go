package testworld

import (
	"bufio"
	"bytes"
	"encoding/json"
	"sync"
)

// Metrics collects the metric lines functions flush (an app.Env's Out, a
// tick's MetricsOut), so a test can check what CloudWatch would read.
// Writes may come from several goroutines.
type Metrics struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (m *Metrics) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.buf.Write(p)
}

// Lines are the JSON documents written for the metric name (each line's
// "metric" field), in order; a line that is not JSON is skipped.
func (m *Metrics) Lines(name string) []map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(m.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var doc map[string]any
		if json.Unmarshal(sc.Bytes(), &doc) == nil && doc["metric"] == name {
			out = append(out, doc)
		}
	}
	return out
}

// Values are the values of the metric's lines, a distribution's spread out.
func (m *Metrics) Values(name string) []float64 {
	var out []float64
	for _, doc := range m.Lines(name) {
		switch v := doc[name].(type) {
		case float64:
			out = append(out, v)
		case []any:
			for _, x := range v {
				if f, ok := x.(float64); ok {
					out = append(out, f)
				}
			}
		}
	}
	return out
}

// Sum adds up the values of the metric's lines whose dimensions include
// dims.
func (m *Metrics) Sum(name string, dims map[string]string) float64 {
	sum := 0.0
	for _, doc := range m.Lines(name) {
		match := true
		for k, v := range dims {
			if doc[k] != v {
				match = false
			}
		}
		if f, ok := doc[name].(float64); ok && match {
			sum += f
		}
	}
	return sum
}
