package proc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With NoTail the child writes to the file it is given, not to a pipe
// this program copies from: an editor draws on the terminal itself.
func TestNoTailGivesTheFileItself(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, noTail := range []bool{false, true} {
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Seek(0, 0); err != nil {
			t.Fatal(err)
		}
		c := Command("readlink", "/proc/self/fd/1")
		c.Stdout, c.NoTail = f, noTail
		p, err := c.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if gotFile := strings.TrimSpace(string(got)) == path; gotFile != noTail {
			t.Errorf("NoTail %v: the child's stdout is %q", noTail, got)
		}
		if noTail && p.Tail() != "" {
			t.Errorf("NoTail kept a tail: %q", p.Tail())
		}
	}
}
