package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// A runner that dies, however it dies, must not leave its COMMAND running
// unrecorded, and a retry must never start a second COMMAND beside a first
// one that still runs.

// killGroupAtEnd kills process group pgid when the test ends, whatever
// happened to it.
func killGroupAtEnd(t *testing.T, pgid int) {
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
}

// processState is the state letter of a process (R, S, T, Z ...), "" when
// there is no such process.
func processState(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return ""
}

// pidFrom reads the pid a command wrote to file, waiting for it.
func pidFrom(t *testing.T, file string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(file)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && perr == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s within 30s", file)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitGone waits until process pid has ended (and was reaped).
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for processState(pid) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d, state %s) still runs 20s later", what, pid, processState(pid))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRecorded waits until the runner of the step has recorded where its
// COMMAND runs, and checks that it is this node's boot.
func (e *env) waitRecorded(pid int) {
	e.t.Helper()
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		e.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := e.planStatus()
		if len(st.Runners) == 1 && st.Runners[0].PID == pid {
			if st.Runners[0].BootID != strings.TrimSpace(string(boot)) {
				e.t.Fatalf("the runner recorded boot %q, not this node's %q", st.Runners[0].BootID, boot)
			}
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the runner did not record COMMAND's pid %d within 30s: %+v", pid, st.Runners)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestUpgradeRunPassesOnHangupAndQuit: a dropped ssh session (SIGHUP) or
// Ctrl-\ (SIGQUIT) is passed on to COMMAND like SIGTERM, and the outcome is
// recorded before the runner exits; COMMAND is gone.
func TestUpgradeRunPassesOnHangupAndQuit(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{
		{syscall.SIGHUP, 129},
		{syscall.SIGQUIT, 131},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			e := newEnv(t)
			wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
			pidFile := filepath.Join(t.TempDir(), "pid")
			bg := e.startPlugin(nil, "upgrade-run", "downloading-images", "--", "sh", "-c", "echo $$ > "+pidFile+"; echo ready; exec sleep 300")
			bg.waitFor("ready")
			pid := pidFrom(t, pidFile)
			killGroupAtEnd(t, pid)
			if err := bg.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			r := bg.wait()
			if r.code != tc.code || !lastLineMatches(r.stderr, fmt.Sprintf(
				`^error: downloading-images failed: sh was killed by signal %[1]s \(%[1]s passed on from the runner\) after \ds; recorded downloading-images-failed$`, tc.sig)) {
				t.Fatalf("%s: %s", tc.sig, r)
			}
			if st := e.planStatus(); st.State != "downloading-images-failed" || len(st.Runners) != 0 ||
				!strings.HasPrefix(st.Reason, "upgrade-run: sh was killed by signal "+tc.sig.String()) {
				t.Fatalf("after %s: %+v", tc.sig, st)
			}
			if st := processState(pid); st != "" {
				t.Fatalf("COMMAND (pid %d) is still there in state %s", pid, st)
			}
			e.wantNoHeartbeatLeases()
		})
	}
}

// TestUpgradeRunKilledRunnerTakesItsCommandAlong: a runner killed with
// SIGKILL (the OOM killer) cannot pass anything on; its COMMAND gets a
// parent-death signal and ends with it. The runner recorded COMMAND's pid
// and the node's boot, so the audit can tell it is gone: it fails the step,
// and the retry runs.
func TestUpgradeRunKilledRunnerTakesItsCommandAlong(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	pidFile := filepath.Join(t.TempDir(), "pid")
	runner := e.startPlugin(nil, "upgrade-run", "downloading-images", "--heartbeat-interval", "1s", "--",
		"sh", "-c", "echo $$ > "+pidFile+"; echo ready; exec sleep 300")
	runner.waitFor("ready")
	pid := pidFrom(t, pidFile)
	killGroupAtEnd(t, pid)
	e.waitRecorded(pid)
	if err := runner.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	runner.wait()
	waitGone(t, pid, "the COMMAND of a runner killed with SIGKILL")

	r := e.plugin("upgrade-audit", "--stale-after", "3s")
	wantExit(t, r, 0)
	if r.stdout != "upgrade state: downloading-images -> downloading-images-failed\n" {
		t.Fatalf("the audit of a dead runner whose COMMAND is gone: %s", r)
	}
	r = e.plugin("upgrade-run", "downloading-images", "--", "sh", "-c", "echo retried")
	wantExit(t, r, 0)
	if st := e.planStatus(); st.State != "downloaded-images" || len(st.LostRunners) != 0 {
		t.Fatalf("after the retry: %+v", st)
	}
}

// TestUpgradeRunRetryNeverJoinsALiveCommand: the parent-death signal ends
// COMMAND itself, not what it started: a script's child lives on in its
// process group after the runner is killed. An audit on the node sees it
// and leaves the step alone; one that cannot see the node's processes (in
// another PID namespace, as the CronJob's pod) fails the step; the retry on
// the node is refused while the group lives, and runs once it has ended.
func TestUpgradeRunRetryNeverJoinsALiveCommand(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	dir := t.TempDir()
	leaderFile, childFile, marker := filepath.Join(dir, "leader"), filepath.Join(dir, "child"), filepath.Join(dir, "second-ran")
	runner := e.startPlugin(nil, "upgrade-run", "downloading-images", "--heartbeat-interval", "1s", "--",
		"sh", "-c", "echo $$ > "+leaderFile+"; sleep 300 & echo $! > "+childFile+"; echo ready; wait")
	runner.waitFor("ready")
	leader, child := pidFrom(t, leaderFile), pidFrom(t, childFile)
	killGroupAtEnd(t, leader)
	e.waitRecorded(leader)
	if err := runner.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	runner.wait()
	waitGone(t, leader, "the COMMAND of a runner killed with SIGKILL")
	if processState(child) == "" {
		t.Fatal("the COMMAND's child ended too: this test shows nothing")
	}
	second := []string{"upgrade-run", "downloading-images", "--", "sh", "-c", fmt.Sprintf(
		"if kill -0 %d 2>/dev/null; then echo beside the first; fi; touch %s; echo second ran", child, marker)}
	wantNotRun := func(r result, want string) {
		t.Helper()
		wantExit(t, r, 4)
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("the refused retry does not say %q: %s", want, r)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("a second COMMAND ran beside the first")
		}
	}
	stillRuns := fmt.Sprintf("process group %d", leader)

	// On the node, the audit sees the group and leaves the step alone; the
	// retry is refused, the step being held.
	r := e.plugin("upgrade-audit", "--stale-after", "3s")
	wantExit(t, r, 0)
	if r.stdout != "upgrade state unchanged: downloading-images\n" || !strings.Contains(r.stderr, stillRuns) ||
		!strings.Contains(r.stderr, "still runs on this node") {
		t.Fatalf("an audit on the node failed a step whose COMMAND still runs: %s", r)
	}
	wantNotRun(e.plugin(second...), "already being run by")

	// An audit that cannot see the processes fails the step; the runner is
	// kept as lost, with its pid and boot.
	r = run(t, "unshare", append([]string{"--user", "--map-root-user", "--pid", "--fork", "--", "kubectl"},
		e.withConnection(testcluster.AdminContext, []string{"kubeadmcfg", "upgrade-audit", "--stale-after", "3s"})...)...)
	wantExit(t, r, 0)
	if r.stdout != "upgrade state: downloading-images -> downloading-images-failed\n" {
		t.Fatalf("an audit in another PID namespace: %s", r)
	}
	if st := e.planStatus(); len(st.LostRunners) != 1 || st.LostRunners[0].PID != leader {
		t.Fatalf("the failed runner was not kept as lost: %+v", st)
	}
	// The retry on the node checks the lost run's process group.
	wantNotRun(e.plugin(second...), stillRuns+" still runs on this node")

	if err := syscall.Kill(-leader, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, child, "the COMMAND's child, killed")
	r = e.plugin(second...)
	wantExit(t, r, 0)
	if r.stdout != "second ran\n" {
		t.Fatalf("the retry: %s", r)
	}
	if st := e.planStatus(); st.State != "downloaded-images" || len(st.LostRunners) != 0 {
		t.Fatalf("after the retry: %+v", st)
	}
}

// TestUpgradeRunRetryAfterUpgradeFailWaitsForTheFirst: upgrade-fail takes
// the step from a live runner; the retry on its node is refused until the
// first COMMAND has ended.
func TestUpgradeRunRetryAfterUpgradeFailWaitsForTheFirst(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	pidFile := filepath.Join(t.TempDir(), "pid")
	first := e.startPlugin(nil, "upgrade-run", "downloading-images", "--", "sh", "-c", "echo $$ > "+pidFile+"; echo ready; exec sleep 300")
	first.waitFor("ready")
	pid := pidFrom(t, pidFile)
	killGroupAtEnd(t, pid)
	e.waitRecorded(pid)
	wantExit(t, e.plugin("upgrade-fail", "--reason", "the operator gave up"), 0)

	r := e.plugin("upgrade-run", "downloading-images", "--", "echo", "second ran")
	wantExit(t, r, 4)
	if !strings.Contains(r.stderr, fmt.Sprintf("process group %d still runs on this node", pid)) || strings.Contains(r.stdout, "second ran") {
		t.Fatalf("a retry beside the first COMMAND: %s", r)
	}
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := first.wait(); r.code != 143 || !strings.Contains(r.stderr, "the step is no longer held by this run") {
		t.Fatalf("the first runner: %s", r)
	}
	r = e.plugin("upgrade-run", "downloading-images", "--", "echo", "second ran")
	wantExit(t, r, 0)
	if r.stdout != "second ran\n" || e.planStatus().State != "downloaded-images" {
		t.Fatalf("the retry: %s", r)
	}
}

// TestUpgradeRunOutlivesAReaderThatHasGone: a runner whose output goes to a
// pipe nobody reads any more (`upgrade-run ... 2>&1 | head -1`, the reader
// already gone) used to die of SIGPIPE at its first line: after moving the
// upgrade into the step, before COMMAND ran, leaving the step in progress
// for the audit. It now runs COMMAND and records the outcome; COMMAND
// itself still gets SIGPIPE as any process writing to such a pipe does.
func TestUpgradeRunOutlivesAReaderThatHasGone(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	cmd := exec.Command("kubectl", e.withConnection(testcluster.AdminContext,
		[]string{"kubeadmcfg", "upgrade-run", "downloading-images", "--", "sh", "-c", "sleep 1"})...)
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Run()
	_ = w.Close()
	if err != nil {
		t.Fatalf("upgrade-run writing to a pipe without a reader: %v", err)
	}
	if st := e.planStatus(); st.State != "downloaded-images" || len(st.Runners) != 0 {
		t.Fatalf("after a run whose reader had gone: %+v", st)
	}
	e.wantNoHeartbeatLeases()
}
