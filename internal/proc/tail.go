package proc

import (
	"bytes"
	"errors"
	"strings"
	"sync"
)

// Tail keeps the end of what a child writes, for the reason it failed
// with: a bounded copy, whatever the child prints.
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
// limit bytes (the end kept), leaving out kubeadm's hint about --v=5.
func (t *Tail) Last(n, limit int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return last(string(t.buf), n, limit)
}

func last(s string, n, limit int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "To see the stack trace of this error") {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := strings.Join(lines, " | ")
	if len(out) > limit {
		out = "..." + out[len(out)-limit+3:]
	}
	return strings.ToValidUTF8(out, "")
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
