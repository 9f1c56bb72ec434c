package upgrade

import (
	"strings"
	"testing"
)

func TestRunTailKeepsTheLastLines(t *testing.T) {
	var tb tailBuffer
	for _, chunk := range []string{"one\n", "two\n\n", "thr", "ee\n  four  \n", "five\nsix"} {
		_, _ = tb.Write([]byte(chunk))
	}
	if got, want := tb.last(5, 512), "two | three | four | five | six"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	_, _ = tb.Write([]byte(strings.Repeat("x", 100_000) + "\nend\n"))
	if got := tb.last(2, 40); len(got) != 40 || !strings.HasSuffix(got, "xx | end") || !strings.HasPrefix(got, "...") {
		t.Errorf("bounded tail: %q (%d bytes)", got, len(got))
	}
}

func TestCommandLineQuotesWhatAShellWould(t *testing.T) {
	got := commandLine([]string{"sh", "-c", "echo 'hi'; exit 3", ""})
	if want := `sh -c 'echo '\''hi'\''; exit 3' ''`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
