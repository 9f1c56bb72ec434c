package proc

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTailKeepsTheLastLines(t *testing.T) {
	var tb Tail
	for _, chunk := range []string{"one\n", "two\n\n", "thr", "ee\n  four  \n", "five\nsix"} {
		_, _ = tb.Write([]byte(chunk))
	}
	if got, want := tb.Last(5, 512), "two | three | four | five | six"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	_, _ = tb.Write([]byte(strings.Repeat("x", 100_000) + "\nend\n"))
	if got := tb.Last(2, 40); len(got) != 40 || !strings.HasSuffix(got, "xx | end") || !strings.HasPrefix(got, "...") {
		t.Errorf("bounded tail: %q (%d bytes)", got, len(got))
	}
}

// kubeadm's hint about --v=5 says nothing of why it failed: the lines
// before it do.
func TestTailLeavesOutKubeadmsHint(t *testing.T) {
	var tb Tail
	_, _ = tb.Write([]byte("[preflight] Running pre-flight checks\nerror: boom\nTo see the stack trace of this error execute with --v=5 or higher\n"))
	if diff := cmp.Diff([]string{"[preflight] Running pre-flight checks", "error: boom"}, tb.Lines(5)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// String is the end of the output as written, bounded by Keep.
func TestTailStringKeepsTheEnd(t *testing.T) {
	tb := Tail{Keep: 16}
	_, _ = tb.Write([]byte("first line\nsecond\n"))
	if got := tb.String(); got != "rst line\nsecond\n" {
		t.Errorf("got %q, want the last 16 bytes", got)
	}
	for range 100 {
		_, _ = tb.Write([]byte("0123456789\n"))
	}
	if got := tb.String(); got != "6789\n0123456789\n" {
		t.Errorf("got %q", got)
	}
	if tb.mu.Lock(); len(tb.buf) > 2*16 {
		t.Errorf("holds %d bytes, more than twice Keep", len(tb.buf))
	}
	tb.mu.Unlock()
	small := Tail{Keep: 1 << 10}
	_, _ = small.Write([]byte("all of it\n"))
	if got := small.String(); got != "all of it\n" {
		t.Errorf("got %q", got)
	}
}
