package proc

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a new pseudo-terminal pair from /dev/ptmx.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil { // unlockpt
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN) // ptsname
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, slave
}

// foregroundHelper runs in a session of its own whose controlling terminal
// is its stdin: it hands the terminal to a child that reads it, and says
// on stdout how it went.
func foregroundHelper() {
	fail := func(format string, a ...any) {
		fmt.Printf("fail: "+format+"\n", a...)
		os.Exit(1)
	}
	tty, background := ForegroundTerminal(os.Stdin)
	if tty == nil || background {
		fail("stdin is not the terminal this program holds: %v %v", tty, background)
	}
	fd := int(tty.Fd())
	c := Command("sh", "-c", "read x && echo \"read $x\" >&2")
	c.Stdin, c.Foreground = tty, tty
	var stderr strings.Builder
	c.Stderr = &stderr
	p, err := c.Start(context.Background())
	if err != nil {
		fail("start: %v", err)
	}
	if fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err != nil || fg != p.PID() {
		fail("the child (group %d) does not hold the foreground: %d %v", p.PID(), fg, err)
	}
	if got, background := ForegroundTerminal(os.Stdin); got != nil || !background {
		fail("while the child holds it, the terminal is still this program's: %v %v", got, background)
	}
	fmt.Println("handed over")
	// A child in the background would be stopped reading the terminal.
	if err := p.Wait(); err != nil || stderr.String() != "read typed\n" {
		fail("the child: %v, said %q", err, stderr.String())
	}
	if fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err != nil || fg != syscall.Getpgrp() {
		fail("the foreground was not taken back: %d %v", fg, err)
	}
	if tty, background := ForegroundTerminal(os.Stdin); tty == nil || background {
		fail("the terminal is not this program's again")
	}
	fmt.Println("taken back")
	os.Exit(0)
}

// A child handed the terminal holds its foreground, and can read it, while
// it runs; this program takes the foreground back once it exits.
func TestForegroundIsHandedOverAndTakenBack(t *testing.T) {
	if os.Getenv("PROC_TEST_FOREGROUND") == "1" {
		foregroundHelper()
	}
	master, slave := openPTY(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestForegroundIsHandedOverAndTakenBack$")
	cmd.Env = append(os.Environ(), "PROC_TEST_FOREGROUND=1")
	cmd.Stdin, cmd.Stderr = slave, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	go func() { // what the terminal shows (its echo) is not looked at
		buf := make([]byte, 1024)
		for {
			if _, err := master.Read(buf); err != nil {
				return
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	lines := bufio.NewScanner(out)
	want := func(line string) {
		t.Helper()
		if !lines.Scan() || lines.Text() != line {
			t.Fatalf("the helper said %q, want %q", lines.Text(), line)
		}
	}
	want("handed over")
	if _, err := master.Write([]byte("typed\n")); err != nil {
		t.Fatal(err)
	}
	want("taken back")
	select {
	case err := <-exited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the helper did not end")
	}
}

// A reader that is not this program's controlling terminal is read as it
// is.
func TestForegroundTerminalOfOtherReaders(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	_, slave := openPTY(t)
	defer slave.Close()
	for name, in := range map[string]any{"a pipe": r, "a terminal that is not this program's": slave, "a reader": strings.NewReader("")} {
		if tty, background := ForegroundTerminal(in.(interface{ Read([]byte) (int, error) })); tty != nil || background {
			t.Errorf("%s: %v %v", name, tty, background)
		}
	}
}
