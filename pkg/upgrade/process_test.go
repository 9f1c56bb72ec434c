package upgrade

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// seen is a ProcessCheck that answers from a table by pid.
func seen(states map[int]CommandState) ProcessCheck {
	return func(p Process) CommandState { return states[p.PID] }
}

func lostPIDs(rec *Record) []int {
	pids := []int{}
	for _, l := range rec.Lost {
		pids = append(pids, l.PID)
	}
	return pids
}

// TestAuditLeavesAStepWhoseCommandRunsHere: a silent runner is dead only if
// its COMMAND is not seen running; one taken for dead is kept as lost, and
// a retry of its step is refused while its COMMAND is seen running, and
// forgets it once seen ended. Where it cannot be seen, the retry runs and
// the lost runner stays for a check where it can.
func TestAuditLeavesAStepWhoseCommandRunsHere(t *testing.T) {
	rec := walkTo(t, UpgradedFirstMaster)
	if _, err := rec.BeginRun(at(0), Run{ID: "cp", Step: string(UpgradingSecondMaster), Leases: leases}); err != nil {
		t.Fatal(err)
	}
	if changed, err := rec.RecordProcess("cp", Process{PID: 100, BootID: "b", PIDNamespace: "pid:[1]"}); err != nil || !changed {
		t.Fatalf("record the process: %v %v", changed, err)
	}
	silent := map[string]time.Duration{"cp": time.Minute}

	changed, err := rec.Audit(at(100), time.Hour, silent, seen(map[int]CommandState{100: CommandRunning}))
	if err != nil || changed || rec.State != UpgradingSecondMaster || len(rec.Runners) != 1 {
		t.Fatalf("a step whose COMMAND runs was touched: %v %v %s %+v", changed, err, rec.State, rec.Runners)
	}
	// Nor is it stuck, however long it runs.
	if changed, err := rec.Audit(Clock{Now: time.Unix(0, 0).Add(72 * time.Hour)}, time.Hour, silent,
		seen(map[int]CommandState{100: CommandRunning})); err != nil || changed {
		t.Fatalf("a step whose COMMAND runs was failed as stuck: %v %v", changed, err)
	}

	// An auditor that cannot see it takes the runner for dead.
	changed, err = rec.Audit(at(100), time.Hour, silent, nil)
	if err != nil || !changed || rec.State != UpgradingSecondMasterFailed || len(rec.Runners) != 0 || !cmp.Equal([]int{100}, lostPIDs(rec)) {
		t.Fatalf("an unseen silent runner: %v %v %s %+v lost %v", changed, err, rec.State, rec.Runners, lostPIDs(rec))
	}

	retry := Run{ID: "r1", Step: string(UpgradingSecondMaster), Leases: leases, Command: "kubeadm upgrade node"}
	retry.Check = seen(map[int]CommandState{100: CommandRunning})
	_, err = rec.BeginRun(at(200), retry)
	var live *LiveCommandError
	if exitcode.FromError(err) != exitcode.Conflict || !errors.As(err, &live) || live.Runner.ID != "cp" ||
		!strings.HasPrefix(err.Error(), "upgrading-second-master: process group 100 still runs on this node: the COMMAND of an earlier run (by cp since ") {
		t.Fatalf("a retry beside a live COMMAND: %v", err)
	}
	if rec.State != UpgradingSecondMasterFailed || len(rec.Runners) != 0 || len(rec.Lost) != 1 {
		t.Fatalf("the refused retry changed the record: %s %+v", rec.State, rec.Runners)
	}

	// Unseen: the retry runs; the lost runner stays.
	retry.Check = nil
	if _, err := rec.BeginRun(at(201), retry); err != nil || !cmp.Equal([]int{100}, lostPIDs(rec)) {
		t.Fatalf("an unseen lost runner: %v, lost %v", err, lostPIDs(rec))
	}
	// It ends itself: ended, not lost.
	if _, err := rec.EndRun(at(202), "r1", false, "exited 1"); err != nil || !cmp.Equal([]int{100}, lostPIDs(rec)) {
		t.Fatalf("an ended run was lost: %v, lost %v", err, lostPIDs(rec))
	}
	// Seen ended: forgotten.
	retry.ID, retry.Check = "r2", seen(map[int]CommandState{100: CommandEnded})
	if _, err := rec.BeginRun(at(203), retry); err != nil || len(rec.Lost) != 0 {
		t.Fatalf("an ended lost runner: %v, lost %v", err, lostPIDs(rec))
	}
}

// TestLostRunnersOfAHostAndByHand: a host's runner whose status is set by
// hand is lost, and a retry of that host's step checks it; another host's
// step is not held back by it.
func TestLostRunnersOfAHostAndByHand(t *testing.T) {
	rec := walkTo(t, UpgradingKubelets)
	for i, node := range []string{"worker-1", "worker-2"} {
		id := "w" + node[len(node)-1:]
		if _, err := rec.BeginRun(at(0), Run{ID: id, Step: string(HostUpgradingKubelet), Host: node, Leases: leases}); err != nil {
			t.Fatal(err)
		}
		if _, err := rec.RecordProcess(id, Process{PID: 200 + i}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rec.SetHost(at(1), "worker-1", HostUpgradingKubeletFailed, "", false); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal([]int{200}, lostPIDs(rec)) || len(rec.Runners) != 1 {
		t.Fatalf("set by hand: lost %v, runners %+v", lostPIDs(rec), rec.Runners)
	}
	running := seen(map[int]CommandState{200: CommandRunning, 201: CommandRunning})
	if _, err := rec.BeginRun(at(2), Run{ID: "x", Step: string(HostUpgradingKubelet), Host: "worker-1", Leases: leases, Check: running}); !strings.HasPrefix(
		fmt.Sprint(err), "host worker-1: upgrading-kubelet: process group 200 still runs on this node") {
		t.Fatalf("worker-1's retry: %v", err)
	}
	if _, err := rec.BeginRun(at(2), Run{ID: "y", Step: string(HostUpgradingKubelet), Host: "worker-3", Leases: leases, Check: running}); err != nil {
		t.Fatalf("another host was held back: %v", err)
	}
}

// TestLostRunnersAreBoundedAndStored: the oldest lost runners go first;
// they are stored in their own annotation, absent when there are none.
func TestLostRunnersAreBoundedAndStored(t *testing.T) {
	rec := walkTo(t, UpgradedFirstMaster)
	for i := range MaxLostRunners + 3 {
		if _, err := rec.BeginRun(at(int64(i)), Run{ID: fmt.Sprint(i), Step: string(UpgradingSecondMaster), Leases: leases}); err != nil {
			t.Fatal(err)
		}
		if _, err := rec.RecordProcess(fmt.Sprint(i), Process{PID: 1000 + i, StartTicks: 7, BootID: "b", PIDNamespace: "pid:[1]"}); err != nil {
			t.Fatal(err)
		}
		if _, err := rec.Fail(at(int64(i)), "operator"); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.Lost) != MaxLostRunners || rec.Lost[0].PID != 1003 || rec.Lost[MaxLostRunners-1].PID != 1000+MaxLostRunners+2 {
		t.Fatalf("lost: %v", lostPIDs(rec))
	}
	ann := map[string]string{}
	if err := rec.Encode(ann); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ann[KeyLostRunners], `"pid":1003,"startTicks":7,"bootID":"b","pidNamespace":"pid:[1]"`) {
		t.Fatalf("stored: %s", ann[KeyLostRunners])
	}
	back, _, err := Decode(ann)
	if err != nil || !cmp.Equal(rec.Lost, back.Lost) {
		t.Fatalf("read back: %v %s", err, cmp.Diff(rec.Lost, back.Lost))
	}
	back.Lost = nil
	if err := back.Encode(ann); err != nil {
		t.Fatal(err)
	}
	if _, ok := ann[KeyLostRunners]; ok {
		t.Fatal("an empty list of lost runners is stored")
	}
	if _, _, err := Decode(map[string]string{KeyState: "x", KeyLostRunners: "{"}); exitcode.FromError(err) != exitcode.Invalid {
		t.Fatalf("bad lost runners: %v", err)
	}
}
