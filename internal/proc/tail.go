package proc

import (
	"bytes"
	"errors"
	"strings"
	"sync"
)

// Tail keeps the end of what a child writes, for the reason it failed
// with: a bounded copy, whatever the child prints. The zero value keeps
// DefaultTailKeep bytes.
type Tail struct {
	// Keep is how much of the end String returns (DefaultTailKeep when 0);
	// the Tail holds at most twice that.
	Keep int

	mu  sync.Mutex
	buf []byte
}

// DefaultTailKeep is how much of the end a Tail keeps by default: more
// than the last lines of any kubeadm failure.
const DefaultTailKeep = 8 << 10

func (t *Tail) keep() int { return orDefault(t.Keep, DefaultTailKeep) }

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if keep := t.keep(); len(t.buf) > 2*keep {
		t.buf = append([]byte(nil), lastBytes(t.buf, keep)...)
	}
	return len(p), nil
}

// String is the end kept: at most Keep bytes, which may start within a
// line.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(lastBytes(t.buf, t.keep())), "")
}

func lastBytes(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return b[len(b)-n:]
}

// Lines returns the last n non-empty lines, trimmed, leaving out kubeadm's
// hint about --v=5, which says nothing of the failure.
func (t *Tail) Lines(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastLines(string(t.buf), n)
}

// Last returns the last n non-empty lines (as Lines) joined with " | ", at
// most limit bytes (the end kept).
func (t *Tail) Last(n, limit int) string {
	out := strings.Join(t.Lines(n), " | ")
	if len(out) > limit {
		out = "..." + out[len(out)-limit+3:]
	}
	return strings.ToValidUTF8(out, "")
}

func lastLines(s string, n int) []string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "To see the stack trace of this error") {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// capped keeps what is written up to max bytes; past it, the write fails
// and full is called, which stops the child.
type capped struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	max      int
	overflow bool
	full     func()
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf.Len()+len(p) > c.max {
		c.overflow = true
		c.full()
		return 0, errors.New("output too large")
	}
	return c.buf.Write(p)
}

func (c *capped) overflowed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overflow
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}
