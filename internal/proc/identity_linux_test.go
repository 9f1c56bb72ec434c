package proc

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startGroup starts sh -c script as Start does, with its stdin held open,
// and returns it with the first line it prints.
func startGroup(t *testing.T, script string) (*Process, string) {
	t.Helper()
	in, hold, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := Command("sh", "-c", script)
	c.Stdin, c.Stdout, c.NoTail = in, w, true // the pipe itself, which the child holds
	p, err := c.Start(context.Background())
	in.Close()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Signal(syscall.SIGKILL)
		hold.Close()
		<-p.Done()
		out.Close()
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	return p, strings.TrimSpace(line)
}

// This host is known: its boot, and the PID namespace this program sees,
// which name it in 16 hex digits.
func TestLocalHost(t *testing.T) {
	h := LocalHost()
	if !h.Known() || !strings.HasPrefix(h.PIDNamespace, "pid:[") || len(h.Key()) != 16 {
		t.Fatalf("this host: %+v, key %q", h, h.Key())
	}
	if (Host{}).Key() != "" || (Host{BootID: h.BootID}).Key() != "" {
		t.Error("a host not known has a key")
	}
	if (Host{BootID: "another", PIDNamespace: h.PIDNamespace}).Key() == h.Key() {
		t.Error("another boot has this one's key")
	}
}

// A child's identity is read before it can be reaped; its group runs
// while the child runs, and has ended once it is reaped.
func TestIdentityOfAChild(t *testing.T) {
	in, hold, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := Command("cat")
	c.Stdin = in
	p, err := c.Start(context.Background())
	in.Close()
	if err != nil {
		t.Fatal(err)
	}
	id := p.Identity()
	if id.PID != p.PID() || id.StartTicks == 0 || id.Host != LocalHost() {
		t.Fatalf("identity %+v of pid %d", id, p.PID())
	}
	if GroupState(id) != Running || ProcessState(id) != Running {
		t.Errorf("a running child: group %d, process %d", GroupState(id), ProcessState(id))
	}
	hold.Close()
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if GroupState(id) != Ended || ProcessState(id) != Ended {
		t.Errorf("a reaped child: group %d, process %d", GroupState(id), ProcessState(id))
	}
}

// This process runs; a child that exited, or a pid that another process
// took, has ended; a process named on another host cannot be told.
func TestProcessState(t *testing.T) {
	self := Describe(os.Getpid())
	if self.StartTicks == 0 || ProcessState(self) != Running {
		t.Fatalf("this process %+v: %d", self, ProcessState(self))
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	exited := Identity{Host: LocalHost(), PID: cmd.Process.Pid, StartTicks: 1}
	if got := ProcessState(exited); got != Ended {
		t.Errorf("an exited child: %d", got)
	}
	reused := self
	reused.StartTicks++
	if got := ProcessState(reused); got != Ended {
		t.Errorf("this pid, started at another time: %d", got)
	}
	for name, elsewhere := range map[string]Identity{
		"another boot":          {Host: Host{BootID: "another", PIDNamespace: self.PIDNamespace}, PID: self.PID, StartTicks: self.StartTicks},
		"another PID namespace": {Host: Host{BootID: self.BootID, PIDNamespace: "pid:[1]"}, PID: self.PID, StartTicks: self.StartTicks},
		"no pid":                {Host: self.Host},
		"no host":               {PID: self.PID, StartTicks: self.StartTicks},
	} {
		if got := ProcessState(elsewhere); got != Unknown {
			t.Errorf("%s: %d, want unknown", name, got)
		}
	}
}

// A killed child that is not waited for yet has ended, though its pid
// still shows.
func TestProcessStateOfAZombie(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	id := Describe(cmd.Process.Pid)
	if ProcessState(id) != Running {
		t.Fatalf("a running child: %d", ProcessState(id))
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, _ := readStat(id.PID); st.state == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed process never became a zombie")
		}
	}
	if got := ProcessState(id); got != Ended {
		t.Fatalf("a zombie: %d, want ended", got)
	}
}

// A group runs while anything of it runs, here; elsewhere nothing is
// known of it.
func TestGroupStateOfAGroup(t *testing.T) {
	// A script that started a child, as kubeadm under a script.
	leader, child := startGroup(t, "sleep 60 & echo $!; read x")
	id := leader.Identity()
	if got := GroupState(id); got != Running {
		t.Fatalf("a running group: %d", got)
	}
	for name, elsewhere := range map[string]Identity{
		"another boot":          {Host: Host{BootID: "another", PIDNamespace: id.PIDNamespace}, PID: id.PID, StartTicks: id.StartTicks},
		"another PID namespace": {Host: Host{BootID: id.BootID, PIDNamespace: "pid:[1]"}, PID: id.PID, StartTicks: id.StartTicks},
		"no pid":                {Host: id.Host},
	} {
		if got := GroupState(elsewhere); got != Unknown {
			t.Errorf("%s: %d, want unknown", name, got)
		}
	}
	reused := id
	reused.StartTicks++
	if got := GroupState(reused); got != Ended {
		t.Errorf("the pid of another process: %d, want ended", got)
	}

	// The leader is killed, as a parent-death signal does, and reaped: its
	// child still runs in the group.
	if err := syscall.Kill(id.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-leader.Done()
	if got := GroupState(id); got != Running {
		t.Fatalf("the group of a killed leader whose child %s runs: %d", child, got)
	}
	if pid, _ := strconv.Atoi(child); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	waitGroupState(t, id, Ended)
}

// A group whose leader exited but is not reaped yet has ended.
func TestGroupStateDoesNotCountZombies(t *testing.T) {
	cmd := exec.Command("sh", "-c", "echo started")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	id := Describe(cmd.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for st, _ := readStat(id.PID); st.state != "Z"; st, _ = readStat(id.PID) {
		if time.Now().After(deadline) {
			t.Fatalf("no zombie: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := GroupState(id); got != Ended {
		t.Fatalf("a zombie: %d, want ended", got)
	}
}

// Signal reaches the child's whole group; once it is done, nothing is
// sent.
func TestSignalReachesTheGroup(t *testing.T) {
	p, child := startGroup(t, "sleep 60 & echo $!; wait")
	pid, err := strconv.Atoi(child)
	if err != nil {
		t.Fatal(err)
	}
	sleeper := Describe(pid)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	waitProcessState(t, sleeper, Ended)
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("a signal once done: %v", err)
	}
}

// The kernel kills a child whose parent dies without stopping it.
func TestParentDeathKillsTheChild(t *testing.T) {
	if os.Getenv("PROC_TEST_PARENT") == "1" {
		p, err := Command("sleep", "60").Start(context.Background())
		if err != nil {
			os.Exit(2)
		}
		// Another goroutine's thread may end meanwhile: only the thread
		// that started the child counts.
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			runtime.LockOSThread() // not unlocked: its thread ends with it
		}()
		<-ended
		os.Stdout.WriteString(strconv.Itoa(p.PID()) + "\n")
		select {}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestParentDeathKillsTheChild$")
	cmd.Env = append(os.Environ(), "PROC_TEST_PARENT=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the parent said %q", line)
	}
	child := Describe(pid)
	if ProcessState(child) != Running {
		t.Fatalf("the child does not run: %+v", child)
	}
	// The child is in a group of its own; only the kernel can end it now.
	time.Sleep(200 * time.Millisecond)
	if ProcessState(child) != Running {
		t.Fatal("the child ended while its parent lives: a thread that ended took it along")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitProcessState(t, child, Ended)
}
