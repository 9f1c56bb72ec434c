package crash

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

func explode(m map[string]int) int {
	m["x"]++ // a nil map: a runtime panic
	return m["x"]
}

// TestGo: a goroutine started with Go hands over its error, or its panic as
// an internal error (exit 10) that names the value and where it happened,
// and then closes the channel.
func TestGo(t *testing.T) {
	if err, ok := <-Go(func() error { return nil }); err != nil || !ok {
		t.Fatalf("a goroutine that returned nil: %v, %v", err, ok)
	}
	plain := errors.New("plain")
	done := Go(func() error { return plain })
	if err := <-done; !errors.Is(err, plain) {
		t.Fatalf("a goroutine's error: %v", err)
	}
	if _, ok := <-done; ok {
		t.Fatal("the channel is not closed after the one value")
	}
	for _, tc := range []struct {
		name string
		f    func() error
		want string
	}{
		{"value", func() error { panic("boom") }, "internal error: boom (in internal/crash.TestGo.func3, crash_test.go:"},
		{"runtime error", func() error { explode(nil); return nil }, "internal error: assignment to entry in nil map (in internal/crash.explode, crash_test.go:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := <-Go(tc.f)
			if code := exitcode.FromError(err); code != exitcode.Internal {
				t.Fatalf("exit %d (%v), want %d", code, err, exitcode.Internal)
			}
			msg := exitcode.Message(err)
			if !strings.HasPrefix(msg, tc.want) || !strings.HasSuffix(msg, "); please report it") {
				t.Fatalf("message %q, want %q...; please report it", msg, tc.want)
			}
		})
	}
}

// TestRecover: deferred in a function, Recover stops its panic and hands it
// over; the function returns normally.
func TestRecover(t *testing.T) {
	run := func() (err error) {
		defer Recover(func(p error) { err = p })
		panic(errors.New("wrapped"))
	}
	err := run()
	var p *Panic
	if !errors.As(err, &p) || exitcode.FromError(err) != exitcode.Internal || !strings.HasPrefix(err.Error(), "internal error: wrapped (in ") {
		t.Fatalf("got %v", err)
	}
}

// TestTraceback: the stack only when GOTRACEBACK asks for it, and only for
// a panic.
func TestTraceback(t *testing.T) {
	err := <-Go(func() error { panic("boom") })
	for _, tc := range []struct {
		env   string
		err   error
		stack bool
	}{
		{"", err, false},
		{"none", err, false},
		{"0", err, false},
		{"single", err, true},
		{"all", err, true},
		{"all", errors.New("not a panic"), false},
	} {
		var b bytes.Buffer
		Traceback(&b, tc.err, func(string) string { return tc.env })
		if got := strings.Contains(b.String(), "created by "+modulePath+"internal/crash.Go"); got != tc.stack || (b.Len() > 0) != tc.stack {
			t.Errorf("GOTRACEBACK=%q, %v: printed %q", tc.env, tc.err, b.String())
		}
	}
}
