//go:build !windows

package upgrade

import (
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
)

// lineWatcher closes seen when text has been written to it.
type lineWatcher struct {
	text string
	once sync.Once
	seen chan struct{}
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.text) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// TestExecuteKillsAtASecondSignal: a command that ignores the signal passed
// on is killed by the second one, as an impatient second Ctrl-C or kill
// asks, and the reason says so.
func TestExecuteKillsAtASecondSignal(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	ready := &lineWatcher{text: "ready", seen: make(chan struct{})}
	done := make(chan *runOutcome, 1)
	go func() {
		done <- execute(command{args: []string{"sh", "-c", `trap "" TERM; echo ready; sleep 30; echo not reached`},
			stdout: ready, stderr: io.Discard}, sigs)
	}()
	select {
	case <-ready.seen:
	case <-time.After(20 * time.Second):
		t.Fatal("the command did not start")
	}
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGTERM
	var out *runOutcome
	select {
	case out = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the command outlived a second signal")
	}
	summary := out.summary([]string{"sh"})
	if !out.killed || out.code != 128+int(syscall.SIGKILL) ||
		!strings.HasPrefix(summary, "sh was killed by signal killed (terminated passed on from the runner, then killed at a second signal) after ") {
		t.Fatalf("exit %d: %s", out.code, summary)
	}
}

// TestExecuteOffATerminalGivesItsStdin: off a terminal the command reads the
// runner's stdin, and onStart names it before it can be reaped.
func TestExecuteOffATerminalGivesItsStdin(t *testing.T) {
	var got strings.Builder
	var started int
	out := execute(command{args: []string{"sh", "-c", `read a; echo "got $a"; echo $$`}, in: strings.NewReader("yes\n"),
		stdout: &got, stderr: io.Discard, onStart: func(id proc.Identity) { started = id.PID }}, make(chan os.Signal))
	if out.code != 0 || got.String() != "got yes\n"+strconv.Itoa(started)+"\n" {
		t.Fatalf("exit %d, pid %d: %q", out.code, started, got.String())
	}
}
