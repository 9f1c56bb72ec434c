package cmdutil

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// editorHelper runs in a session of its own whose controlling terminal is
// its stdin and stdout: it opens the file its environment names in an
// editor that needs the terminal, and says on stderr how it went.
func editorHelper() {
	fail := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "fail: "+format+"\n", a...)
		os.Exit(1)
	}
	// An editor that draws on the terminal needs it as its stdin and
	// stdout, and can read it only in the foreground.
	e := Editor{Args: []string{"sh", "-c", `[ -t 0 ] && [ -t 1 ] && read x && echo "$x" >"$0"`}}
	if err := e.Launch(context.Background(), os.Getenv("EDITOR_TEST_FILE"), os.Stdin, os.Stdout, os.Stderr); err != nil {
		fail("%v", err)
	}
	if fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err != nil || fg != syscall.Getpgrp() {
		fail("the terminal was not taken back from the editor: %d %v", fg, err)
	}
	fmt.Fprintln(os.Stderr, "edited")
	os.Exit(0)
}

// At a terminal the editor is given the terminal itself, and its
// foreground while it runs; the plugin has it back afterwards.
func TestEditorLaunchOnATerminal(t *testing.T) {
	if os.Getenv("EDITOR_TEST_FILE") != "" {
		editorHelper()
	}
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "doc.yaml")
	cmd := exec.Command(os.Args[0], "-test.run=^TestEditorLaunchOnATerminal$")
	cmd.Env = append(os.Environ(), "EDITOR_TEST_FILE="+file)
	cmd.Stdin, cmd.Stdout = slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	go func() { // what the terminal shows is not looked at
		buf := make([]byte, 1024)
		for {
			if _, err := master.Read(buf); err != nil {
				return
			}
		}
	}()
	if _, err := master.Write([]byte("typed\n")); err != nil {
		t.Fatal(err)
	}
	said := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stderr).ReadString('\n')
		said <- line
	}()
	select {
	case line := <-said:
		if line != "edited\n" {
			t.Fatalf("the helper said %q", line)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the editor did not end")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(file); string(got) != "typed\n" {
		t.Errorf("the editor wrote %q", got)
	}
}
