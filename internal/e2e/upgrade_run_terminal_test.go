package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// onTerminal is the plugin running as a user at a terminal runs it: stdin
// and stdout are a pseudo-terminal that is its controlling terminal, in a
// session of its own; the test types into the terminal and reads what it
// shows. stderr stays a pipe, so its lines can be checked apart.
type onTerminal struct {
	t       *testing.T
	master  *os.File
	cmd     *exec.Cmd
	mu      sync.Mutex
	shown   bytes.Buffer // what the terminal showed, \r\n made \n
	stderr  bytes.Buffer
	changed chan struct{} // a token whenever shown or stderr grow
	done    chan struct{}
	res     result
}

// startOnTerminal starts `kubectl kubeadmcfg ARGS` as the admin on a new
// pseudo-terminal and returns at once.
func (e *env) startOnTerminal(args ...string) *onTerminal {
	e.t.Helper()
	return e.startCmdOnTerminal(exec.Command("kubectl", e.withConnection(testcluster.AdminContext, append([]string{"kubeadmcfg"}, args...))...))
}

// startInTheBackgroundOnTerminal starts `kubectl kubeadmcfg ARGS` as a
// shell with job control starts it with &: in the background of its
// terminal, which is still its stdin.
func (e *env) startInTheBackgroundOnTerminal(args ...string) *onTerminal {
	e.t.Helper()
	line := "kubectl"
	for _, a := range e.withConnection(testcluster.AdminContext, append([]string{"kubeadmcfg"}, args...)) {
		line += " " + shellQuote(a)
	}
	return e.startCmdOnTerminal(exec.Command("sh", "-c", "set -m; "+line+" & wait $!"))
}

func (e *env) startCmdOnTerminal(cmd *exec.Cmd) *onTerminal {
	e.t.Helper()
	master, slave, err := openPTY()
	if err != nil {
		e.t.Fatalf("open a pseudo-terminal: %v", err)
	}
	p := &onTerminal{t: e.t, master: master, cmd: cmd, changed: make(chan struct{}, 1), done: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, stderrWriter{p}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	cmd.WaitDelay = 10 * time.Second // a process left behind keeps stderr open
	if err := cmd.Start(); err != nil {
		slave.Close()
		master.Close()
		e.t.Fatalf("run kubectl: %v", err)
	}
	slave.Close() // the terminal's reads end (EIO) when the last process holding it exits
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.mu.Lock()
			p.shown.Write(bytes.ReplaceAll(buf[:n], []byte("\r\n"), []byte("\n")))
			p.mu.Unlock()
			p.poke()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		defer close(p.done)
		err := cmd.Wait()
		select {
		case <-copied:
		case <-time.After(10 * time.Second): // a process left holding the terminal
		}
		code := 0
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			code = exitErr.ExitCode()
			if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		}
		p.mu.Lock()
		p.res = result{stdout: p.shown.String(), stderr: p.stderr.String(), code: code}
		p.mu.Unlock()
		p.poke()
	}()
	e.t.Cleanup(func() {
		killSession(cmd.Process.Pid)
		<-p.done
		master.Close()
	})
	return p
}

type stderrWriter struct{ p *onTerminal }

func (w stderrWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	defer w.p.poke()
	return w.p.stderr.Write(b)
}

func (p *onTerminal) poke() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// typed writes keys to the terminal, as a user types them.
func (p *onTerminal) typed(keys string) {
	p.t.Helper()
	if _, err := p.master.WriteString(keys); err != nil {
		p.t.Fatalf("type %q: %v", keys, err)
	}
}

// waitShown waits until the terminal (or, with onStderr, stderr) shows text.
func (p *onTerminal) waitShown(text string, onStderr bool) {
	p.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		got := p.shown.String()
		if onStderr {
			got = p.stderr.String()
		}
		p.mu.Unlock()
		if strings.Contains(got, text) {
			return
		}
		select {
		case <-p.changed:
		case <-p.done:
			p.t.Fatalf("the plugin ended before showing %q: %s", text, p.res)
		case <-timeout:
			p.mu.Lock()
			defer p.mu.Unlock()
			p.t.Fatalf("%q was not shown within 30s\nterminal:\n%s\nstderr:\n%s", text, p.shown.String(), p.stderr.String())
		}
	}
}

// wait waits for the plugin to end, at most a minute: a runner whose
// command hangs fails the test rather than holding it.
func (p *onTerminal) wait() result {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.mu.Lock()
		defer p.mu.Unlock()
		p.t.Fatalf("the plugin did not end within a minute\nterminal:\n%s\nstderr:\n%s", p.shown.String(), p.stderr.String())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.res
}

// killSession kills every process of session sid, whatever group it is in
// (the runner, its command, a shell's background job).
func killSession(sid int) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if err != nil || i < 0 {
			continue
		}
		// After the command's name: state ppid pgrp session ...
		if f := strings.Fields(s[i+1:]); len(f) > 3 && f[3] == strconv.Itoa(sid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitBlocked waits until process pid is blocked (sleeping in a read, or
// stopped) rather than running, so that a key typed next finds it there.
func waitBlocked(t *testing.T, pid int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		switch st := processState(pid); st {
		case "S", "T":
			return st
		case "":
			t.Fatalf("process %d is gone", pid)
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not block within 30s", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUpgradeRunOnATerminal: at a terminal COMMAND has the terminal, as it
// would without upgrade-run: it reads what is typed (kubeadm upgrade apply's
// [y/N]), Ctrl-C interrupts it and the step is recorded failed, and Ctrl-Z
// does not leave the step suspended with the terminal held.
func TestUpgradeRunOnATerminal(t *testing.T) {
	prompt := func(pidFile string) string {
		return "echo $$ > " + pidFile + "; printf 'proceed? [y/N] '; read answer; echo \"got $answer\""
	}
	t.Run("COMMAND reads the answer typed", func(t *testing.T) {
		e := newEnv(t)
		wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
		pidFile := filepath.Join(t.TempDir(), "pid")
		p := e.startOnTerminal("upgrade-run", "downloading-images", "--", "sh", "-c", prompt(pidFile))
		p.waitShown("proceed? [y/N] ", false)
		if st := waitBlocked(t, pidFrom(t, pidFile)); st != "S" {
			t.Errorf("COMMAND waiting for the answer is in state %s, want S (reading)", st)
		}
		p.typed("y\n")
		p.waitShown("got y\n", false)
		r := p.wait()
		wantExit(t, r, 0)
		if !strings.Contains(r.stderr, "upgrade state: downloading-images -> downloaded-images (sh succeeded in ") {
			t.Fatalf("the answered prompt: %s", r)
		}
		if st := e.planStatus(); st.State != "downloaded-images" {
			t.Fatalf("after the answered prompt: %+v", st)
		}
	})
	t.Run("Ctrl-C interrupts COMMAND and the step is recorded failed", func(t *testing.T) {
		e := newEnv(t)
		wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
		pidFile := filepath.Join(t.TempDir(), "pid")
		p := e.startOnTerminal("upgrade-run", "downloading-images", "--", "sh", "-c", prompt(pidFile))
		p.waitShown("proceed? [y/N] ", false)
		pid := pidFrom(t, pidFile)
		waitBlocked(t, pid)
		p.typed("\x03")
		r := p.wait()
		if r.code != 130 || !lastLineMatches(r.stderr,
			`^error: downloading-images failed: sh was killed by signal interrupt after \ds; recorded downloading-images-failed$`) {
			t.Fatalf("Ctrl-C: %s", r)
		}
		if st := e.planStatus(); st.State != "downloading-images-failed" || !strings.HasPrefix(st.Reason, "upgrade-run: sh was killed by signal interrupt") {
			t.Fatalf("after Ctrl-C: %+v", st)
		}
		if processState(pid) != "" {
			t.Fatalf("COMMAND (pid %d) outlived its runner", pid)
		}
		e.wantNoHeartbeatLeases()
	})
	t.Run("in the background, COMMAND reads end of file", func(t *testing.T) {
		e := newEnv(t)
		wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
		p := e.startInTheBackgroundOnTerminal("upgrade-run", "downloading-images", "--", "sh", "-c",
			`printf 'proceed? [y/N] '; if read answer; then echo "got $answer"; else echo "end of file"; exit 1; fi`)
		p.waitShown("end of file\n", false)
		r := p.wait()
		if r.code != 1 || !lastLineMatches(r.stderr, `^error: downloading-images failed: sh exited 1 after \ds; recorded downloading-images-failed$`) {
			t.Fatalf("a prompt in the background: %s", r)
		}
	})
	t.Run("Ctrl-Z does not suspend the step", func(t *testing.T) {
		e := newEnv(t)
		wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
		pidFile := filepath.Join(t.TempDir(), "pid")
		p := e.startOnTerminal("upgrade-run", "downloading-images", "--", "sh", "-c", prompt(pidFile))
		p.waitShown("proceed? [y/N] ", false)
		waitBlocked(t, pidFrom(t, pidFile))
		p.typed("\x1a")
		p.waitShown("a step cannot be suspended", true)
		p.typed("y\n")
		p.waitShown("got y\n", false)
		if r := p.wait(); r.code != 0 || e.planStatus().State != "downloaded-images" {
			t.Fatalf("after Ctrl-Z: %s", r)
		}
	})
}
