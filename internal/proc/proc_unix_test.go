//go:build !windows

package proc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func runError(t *testing.T, err error) *RunError {
	t.Helper()
	var re *RunError
	if !errors.As(err, &re) {
		t.Fatalf("want a *RunError, got %T: %v", err, err)
	}
	return re
}

// A child that exits other than 0 is a RunError with its exit code and its
// last lines, without kubeadm's hint about --v=5; the message names the
// command without its flags.
func TestRunErrorOfAChildThatExits3(t *testing.T) {
	err := Command("sh", "-c", `for i in 1 2 3 4 5 6 7; do echo line $i; done >&2; echo oops >&2
echo "To see the stack trace of this error execute with --v=5 or higher" >&2; exit 3`).Run(context.Background())
	re := runError(t, err)
	if re.ExitCode != 3 || re.NotStarted || re.Signal != nil || re.TimedOut || re.Interrupted || re.TooLarge {
		t.Errorf("%#v, want exit 3 only", re)
	}
	if want := "line 4 | line 5 | line 6 | line 7 | oops"; re.Tail != want {
		t.Errorf("tail %q, want %q", re.Tail, want)
	}
	if want := "sh exited 3: line 4 | line 5 | line 6 | line 7 | oops"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestRunOfAChildThatSucceeds(t *testing.T) {
	if err := Command("true").Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A child ended by a signal says which, and has no exit code.
func TestRunErrorOfAChildKilledByASignal(t *testing.T) {
	re := runError(t, Command("sh", "-c", "kill -TERM $$").Run(context.Background()))
	if re.Signal != syscall.SIGTERM || re.ExitCode != -1 || re.Interrupted {
		t.Errorf("%#v, want killed by SIGTERM", re)
	}
	if want := "sh was killed by signal terminated"; re.Error() != want {
		t.Errorf("error %q, want %q", re.Error(), want)
	}
}

// A missing command cannot start, and says that it is not found.
func TestRunErrorOfAMissingCommand(t *testing.T) {
	err := Command("kubeadmcfg-no-such-command", "version").Run(context.Background())
	re := runError(t, err)
	if !re.NotStarted || re.ExitCode != -1 || !errors.Is(err, ErrNotFound) {
		t.Errorf("%#v, want not started, not found", re)
	}
	if !strings.HasPrefix(err.Error(), "kubeadmcfg-no-such-command version could not start: ") {
		t.Errorf("error %q", err)
	}
	if _, err := LookPath("kubeadmcfg-no-such-command"); !errors.Is(err, ErrNotFound) {
		t.Errorf("LookPath: %v", err)
	}
}

// Timeout stops the whole process group: what the child started in it
// ends with it.
func TestTimeoutKillsTheWholeGroup(t *testing.T) {
	c := Command("sh", "-c", "sleep 60 & echo started; wait")
	c.Timeout = 300 * time.Millisecond
	p, err := c.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = p.Wait()
	re := runError(t, err)
	if !re.TimedOut || re.Interrupted || re.ExitCode != -1 || re.Tail != "started" {
		t.Errorf("%#v, want timed out, with its output", re)
	}
	if want := "sh did not finish within 300ms: started"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if LocalHost().Known() { // Linux
		waitGroupState(t, p.Identity(), Ended)
	}
}

// A context that ends stops the child as interrupted.
func TestContextEndInterrupts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Command("sleep", "60").Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	re := runError(t, p.Wait())
	if !re.Interrupted || re.TimedOut || re.ExitCode != -1 {
		t.Errorf("%#v, want interrupted", re)
	}
	// A parent's deadline is not the child's Timeout.
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c := Command("sleep", "60")
	c.Timeout = time.Minute
	re = runError(t, c.Run(ctx))
	if !re.Interrupted || re.TimedOut {
		t.Errorf("%#v, want interrupted, not timed out", re)
	}
}

// A context that ends once the child has exited by itself leaves how it
// ended alone.
func TestContextEndAfterTheExit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Command("sh", "-c", "exit 3").Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	cancel()
	if re := runError(t, p.Wait()); re.ExitCode != 3 || re.Interrupted {
		t.Errorf("%#v, want exit 3", re)
	}
}

// With Grace, a stop is asked for first: the group gets SIGTERM, which a
// child may trap to end what it started elsewhere before it exits; one
// that ignores it is killed once Grace has passed. (The children wait for
// their sleeps with wait, which a trapped signal interrupts at once.)
func TestGraceAsksTheGroupToStopFirst(t *testing.T) {
	dir := t.TempDir()
	ready, ended := filepath.Join(dir, "ready"), filepath.Join(dir, "ended")
	for _, tc := range []struct {
		name, script string
		timeout      bool
		want         string // what the child wrote when it was told
	}{
		{"a timeout", `trap 'echo stopped >` + ended + `; exit 1' TERM; touch ` + ready + `; while :; do sleep 1 >/dev/null 2>&1 & wait $!; done`, true, "stopped\n"},
		{"the context's end", `trap 'echo stopped >` + ended + `; exit 1' TERM; touch ` + ready + `; while :; do sleep 1 >/dev/null 2>&1 & wait $!; done`, false, "stopped\n"},
		{"a child that ignores it", `trap '' TERM; touch ` + ready + `; while :; do sleep 1 >/dev/null 2>&1 & wait $!; done`, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(ready)
			_ = os.Remove(ended)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := Command("sh", "-c", tc.script)
			c.Grace = time.Second
			if tc.timeout {
				c.Timeout = time.Second
			}
			p, err := c.Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.timeout {
				for _, err := os.Stat(ready); err != nil; _, err = os.Stat(ready) {
					time.Sleep(10 * time.Millisecond)
				}
				cancel()
			}
			re := runError(t, p.Wait())
			if re.TimedOut != tc.timeout || re.Interrupted == tc.timeout {
				t.Errorf("%#v, want timed out %v, else interrupted", re, tc.timeout)
			}
			if got, _ := os.ReadFile(ended); string(got) != tc.want {
				t.Errorf("the child wrote %q when it was told to stop, want %q", got, tc.want)
			}
			if LocalHost().Known() { // Linux
				waitGroupState(t, p.Identity(), Ended)
			}
		})
	}
}

// MaxStdout stops a child that floods its output, and the tail quotes its
// standard error, not the flood.
func TestMaxStdoutStopsAFlood(t *testing.T) {
	c := Command("sh", "-c", "echo flooding >&2; yes")
	c.MaxStdout = 1 << 16
	out, err := c.Output(context.Background())
	re := runError(t, err)
	if !re.TooLarge || re.TimedOut || re.Interrupted || re.Tail != "flooding" {
		t.Errorf("%#v, want too large, quoting stderr", re)
	}
	if want := "sh printed more than 65536 bytes and was stopped: flooding"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if len(out) > 1<<16 || !strings.HasPrefix(out, "y\ny\n") {
		t.Errorf("kept %d bytes of the flood", len(out))
	}
}

// Output returns the standard output alone; Env is added to the
// environment, Environ replaces this program's.
func TestOutputAndEnvironment(t *testing.T) {
	t.Setenv("PROC_TEST_INHERITED", "inherited")
	c := Command("sh", "-c", `echo "$PROC_TEST_INHERITED $PROC_TEST_ADDED"; echo not this >&2`)
	c.Env = []string{"PROC_TEST_ADDED=added"}
	out, err := c.Output(context.Background())
	if err != nil || out != "inherited added\n" {
		t.Errorf("got %q, %v", out, err)
	}
	c = Command("env")
	c.Environ, c.Env = []string{"A=1", "B=2"}, []string{"B=3"}
	if out, err := c.Output(context.Background()); err != nil || out != "A=1\nB=3\n" {
		t.Errorf("env: got %q, %v", out, err)
	}
}

// Stdout and Stderr receive the output as it comes, and the tail keeps it
// too.
func TestOutputGoesToItsWritersAndTheTail(t *testing.T) {
	var stdout, stderr strings.Builder
	c := Command("sh", "-c", "echo out; echo err >&2; exit 1")
	c.Stdout, c.Stderr = &stdout, &stderr
	p, err := c.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = p.Wait()
	if stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if re := runError(t, err); re.ExitCode != 1 || !strings.Contains(re.Tail, "err") || !strings.Contains(re.Tail, "out") {
		t.Errorf("%#v", re)
	}
	if again := p.Wait(); again != err { //nolint:errorlint // the same value, not an error it wraps
		t.Errorf("a second Wait: %v, want %v", again, err)
	}
	if ps := p.State(); ps == nil || ps.ExitCode() != 1 {
		t.Errorf("state %v", ps)
	}
}

func waitGroupState(t *testing.T, id Identity, want State) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for GroupState(id) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%+v: group state %d, want %d", id, GroupState(id), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitProcessState(t *testing.T, id Identity, want State) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ProcessState(id) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%+v: process state %d, want %d", id, ProcessState(id), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
