package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Processes a test starts and watches from outside: waited for with a
// deadline, and found afterwards by the directory their command lines name.

// keptDir is a new directory, kept with its logs when the test fails.
func keptDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kubeadmcfg-kept-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("files and logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// startedProcess is a process a test started and watches.
type startedProcess struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	start          time.Time
	done           chan struct{}
	err            error
}

func startProcess(t *testing.T, cmd *exec.Cmd) *startedProcess {
	t.Helper()
	p := &startedProcess{cmd: cmd, start: time.Now(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.stdout, &p.stderr
	// A child that outlives the process keeps its output open: wait for
	// the process, not for the child (processesNaming finds it).
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitFor waits until path exists; a process that ends first fails the test.
func (p *startedProcess) waitFor(t *testing.T, path string) {
	t.Helper()
	deadline := time.After(4 * time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%s ended before %s existed: %v\nstdout:\n%s\nstderr:\n%s", p.cmd.Path, path, p.err, &p.stdout, &p.stderr)
		case <-deadline:
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Fatalf("%s did not appear in time\nstderr of %s:\n%s", path, p.cmd.Path, &p.stderr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// wait waits for the process to end and returns what it did; -1 is a
// process killed by a signal.
func (p *startedProcess) wait(t *testing.T, timeout time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not end in %s\nstderr:\n%s", p.cmd.Path, timeout, &p.stderr)
	}
	var exitErr *exec.ExitError
	if p.err != nil && !errors.As(p.err, &exitErr) && !errors.Is(p.err, exec.ErrWaitDelay) {
		t.Fatal(p.err)
	}
	return result{stdout: p.stdout.String(), stderr: p.stderr.String(), code: p.cmd.ProcessState.ExitCode()}
}

// processesNaming lists the processes whose command line names a path in
// dir (dir/...), as pgrep -a -f shows them ("" when there are none). The
// test's directory is its own: whatever names it, the test started, and
// kills when it ends.
func processesNaming(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command("pgrep", "-a", "-f", regexp.QuoteMeta(dir+"/")).Output()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.ExitCode() == 1 {
		return "" // none
	}
	if err != nil {
		t.Fatalf("pgrep: %v", err)
	}
	t.Cleanup(func() {
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			pid, _, _ := strings.Cut(line, " ")
			if n, err := strconv.Atoi(pid); err == nil {
				_ = syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})
	return string(out)
}

// anyLine reports whether a line of text holds every one of subs.
func anyLine(text string, subs ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		all := line != ""
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			return true
		}
	}
	return false
}

func wantFile(t *testing.T, path string) {
	t.Helper()
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		t.Errorf("want a file at %s: %v", path, err)
	}
}

// readIfThere reads a file that may not exist yet.
func readIfThere(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

func readString(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// readEnv reads the output of env.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, line := range strings.Split(readString(t, path), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}
