package upgrade

import (
	"strings"
	"sync"
)

// Tail keeps the end of what a command writes, for the reason its step
// failed with: a bounded copy, whatever the command prints.
type Tail struct {
	mu  sync.Mutex
	buf []byte
}

// tailKeep is how much of the end a Tail keeps.
const tailKeep = 8 << 10

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*tailKeep {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailKeep:]...)
	}
	return len(p), nil
}

// Last returns the last n non-empty lines, joined with " | ", at most
// limit bytes (the end kept).
func (t *Tail) Last(n, limit int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lines []string
	for _, l := range strings.Split(string(t.buf), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s := strings.Join(lines, " | ")
	if len(s) > limit {
		s = "..." + s[len(s)-limit+3:]
	}
	return strings.ToValidUTF8(s, "")
}
