package upgrade

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startGroup starts sh -c script as the leader of a process group of its
// own, and returns it with the first line it prints.
func startGroup(t *testing.T, script string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	return cmd, strings.TrimSpace(line)
}

func waitState(t *testing.T, ps Processes, p Process, want CommandState) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ps.Check(p) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%+v: %d, want %d", p, ps.Check(p), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLocalProcessesSeeAProcessGroup: a recorded COMMAND runs while
// anything of its process group runs, here; elsewhere nothing is known.
func TestLocalProcessesSeeAProcessGroup(t *testing.T) {
	ps := LocalProcesses()
	if ps.BootID == "" || !strings.HasPrefix(ps.PIDNamespace, "pid:[") {
		t.Fatalf("this node: %+v", ps)
	}
	// A script that started a child, as kubeadm under a script.
	leader, child := startGroup(t, "sleep 60 & echo $!; read x")
	p := ps.Describe(leader.Process.Pid)
	if p.StartTicks == 0 || p.BootID != ps.BootID {
		t.Fatalf("described: %+v", p)
	}
	if got := ps.Check(p); got != CommandRunning {
		t.Fatalf("a running COMMAND: %d", got)
	}
	for name, elsewhere := range map[string]Process{
		"another boot":          {PID: p.PID, StartTicks: p.StartTicks, BootID: "another", PIDNamespace: p.PIDNamespace},
		"another PID namespace": {PID: p.PID, StartTicks: p.StartTicks, BootID: p.BootID, PIDNamespace: "pid:[1]"},
		"no process recorded":   {BootID: p.BootID, PIDNamespace: p.PIDNamespace},
	} {
		if got := ps.Check(elsewhere); got != CommandUnknown {
			t.Errorf("%s: %d, want unknown", name, got)
		}
	}
	if got := (Processes{}).Check(p); got != CommandUnknown {
		t.Errorf("a node that names nothing: %d, want unknown", got)
	}
	reused := p
	reused.StartTicks++
	if got := ps.Check(reused); got != CommandEnded {
		t.Errorf("the pid of another process: %d, want ended", got)
	}

	// The leader is killed, as a parent-death signal does, and reaped: its
	// child still runs in the group.
	if err := syscall.Kill(leader.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = leader.Wait()
	if got := ps.Check(p); got != CommandRunning {
		t.Fatalf("the group of a killed leader whose child %s runs: %d", child, got)
	}
	if pid, _ := strconv.Atoi(child); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	waitState(t, ps, p, CommandEnded)
}

// TestLocalProcessesDoNotCountZombies: a COMMAND that has exited but is
// not reaped yet has ended.
func TestLocalProcessesDoNotCountZombies(t *testing.T) {
	ps := LocalProcesses()
	cmd, _ := startGroup(t, "echo started")
	p := ps.Describe(cmd.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for st, _ := readStat(p.PID); st.state != "Z"; st, _ = readStat(p.PID) {
		if time.Now().After(deadline) {
			t.Fatalf("no zombie: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := ps.Check(p); got != CommandEnded {
		t.Fatalf("a zombie: %d, want ended", got)
	}
}
