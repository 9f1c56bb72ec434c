// Package crash turns a panic into an error: a bug in the plugin ends the
// command with exit code 10 (exitcode.Internal) and one line on stderr,
// like every other failure, instead of Go's own exit 2, which scripts read
// as a usage error. The root command recovers the main goroutine with
// Recover, and every goroutine the plugin starts is started with Go, so that
// a panic in it reaches the error path of the call that started it rather
// than ending the process; a test keeps every go statement under pkg/ and
// cmd/ going through Go.
package crash

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Panic is a recovered panic. It comes wrapped in an *exitcode.Error with
// the code exitcode.Internal.
type Panic struct {
	// Value is what was passed to panic.
	Value any
	// Where is the function that panicked, with its file and line.
	Where string
	// Stack is the panicking goroutine's stack, which Traceback prints on
	// request.
	Stack []byte
}

func (p *Panic) Error() string {
	where := ""
	if p.Where != "" {
		where = " (in " + p.Where + ")"
	}
	return fmt.Sprintf("internal error: %v%s; please report it", p.Value, where)
}

// Recover turns a panic of its goroutine into an internal error and hands
// it to report. Defer it directly, since only a deferred function can stop
// a panic: defer crash.Recover(func(err error) { ... }).
func Recover(report func(error)) {
	if v := recover(); v != nil {
		report(newPanic(v))
	}
}

// Go runs f in a new goroutine and returns a channel that receives f's
// error, or the panic that ended f as an internal error, and is closed after
// that one value. It is how the plugin starts every goroutine: a panic in
// one then reaches the error path of the call that waits for it.
func Go(f func() error) <-chan error {
	done := make(chan error, 1)
	go func() {
		defer close(done)
		defer Recover(func(err error) { done <- err })
		done <- f()
	}()
	return done
}

// Traceback writes the stack of the goroutine that panicked when err is a
// recovered panic and the GOTRACEBACK environment variable (read with
// getenv) asks for stacks, being set to anything but "none" or "0". By
// default a panic is reported in its one line only.
func Traceback(w io.Writer, err error, getenv func(string) string) {
	var p *Panic
	if !errors.As(err, &p) {
		return
	}
	switch getenv("GOTRACEBACK") {
	case "", "none", "0":
		return
	}
	_, _ = w.Write(p.Stack)
}

func newPanic(v any) error {
	return exitcode.New(exitcode.Internal, &Panic{Value: v, Where: panicked(), Stack: debug.Stack()})
}

// modulePath is left out of function names: every function that can panic
// here is the plugin's own or a dependency's, which keeps its full path.
const modulePath = "github.com/kubeadmcfg/kubectl-kubeadmcfg/"

// panicked names the function that panicked: the first frame below the
// runtime's panic machinery (runtime.gopanic, and for a fault the frames
// that turn it into a panic).
func panicked() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	inPanic := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			inPanic = true
		case inPanic && !strings.HasPrefix(f.Function, "runtime."):
			return fmt.Sprintf("%s, %s:%d", strings.TrimPrefix(f.Function, modulePath), filepath.Base(f.File), f.Line)
		}
		if !more {
			return ""
		}
	}
}
