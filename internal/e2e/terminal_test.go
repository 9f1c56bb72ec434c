package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// openPTY opens a new pseudo-terminal pair from /dev/ptmx.
func openPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil { // unlockpt
		master.Close()
		return nil, nil, fmt.Errorf("unlock the pseudo-terminal: %w", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN) // ptsname
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("name the pseudo-terminal: %w", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// pluginOnTerminal runs `kubectl kubeadmcfg ARGS` as the admin the way a
// user at a terminal does: stdin and stdout are a new pseudo-terminal that
// is the process's controlling terminal, in a session of its own. stderr
// stays a pipe, so that its lines can be checked apart from what the
// terminal showed (returned as stdout, with the terminal's \r\n made \n).
func (e *env) pluginOnTerminal(args ...string) result {
	e.t.Helper()
	master, slave, err := openPTY()
	if err != nil {
		e.t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer master.Close()
	full := append(append([]string{"kubeadmcfg"}, args...),
		"--kubeconfig", s.cluster.Kubeconfig, "--context", testcluster.AdminContext, "-n", e.ns)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", full...)
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		slave.Close()
		e.t.Fatalf("run kubectl: %v", err)
	}
	slave.Close() // the terminal's reads end (EIO) when the last process holding it exits
	var shown bytes.Buffer
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&shown, master)
		close(copied)
	}()
	err = cmd.Wait()
	select {
	case <-copied:
	case <-time.After(10 * time.Second):
		e.t.Fatal("the terminal stayed open after kubectl exited")
	}
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run kubectl: %v", err)
	}
	return result{stdout: strings.ReplaceAll(shown.String(), "\r\n", "\n"), stderr: stderr.String(), code: code}
}
