package proc

import (
	"strings"
	"testing"
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
	if got, want := tb.Last(5, 512), "[preflight] Running pre-flight checks | error: boom"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
