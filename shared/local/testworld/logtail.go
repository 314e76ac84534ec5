package testworld

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// logTailLines is how many of the functions' last log lines a failed test
// prints: enough for the passes and invocations of one kill case (about a
// hundred lines), not a whole test's.
const logTailLines = 400

// logTail keeps the last lines the world's functions logged, so that a
// failure can say what each invocation decided (which pass created which
// claim) rather than only what the world looks like afterwards.
type logTail struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range bytes.Lines(p) {
		s := strings.TrimRight(string(line), "\n")
		if len(l.lines) < logTailLines {
			l.lines = append(l.lines, s)
			continue
		}
		l.lines[l.next] = s
		l.next = (l.next + 1) % logTailLines
		l.full = true
	}
	return len(p), nil
}

// String is the kept lines, oldest first.
func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.full {
		return strings.Join(l.lines, "\n")
	}
	return strings.Join(append(append([]string{}, l.lines[l.next:]...), l.lines[:l.next]...), "\n")
}

// Logger is a logger for an engine of identity whose lines a failed test
// prints (JSON, as the functions log in Lambda).
func (w *World) Logger(identity string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w.logs, nil)).With("function", identity)
}
