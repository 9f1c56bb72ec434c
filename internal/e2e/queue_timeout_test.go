package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/queue"
)

// Writers that run out of --timeout in the write queue (review Q1).

// The writers below wait no longer than a queue TTL: they can never outwait
// a Lease left behind, so one left by any of them would make every later
// writer queue, time out and leave its own.
var shortWriter = []string{"patch", "--no-backup", "--timeout", "2s", "--queue-ttl", "5s"}

// holdTurn takes the turn in the test's write queue from the test process,
// renews it until release, and waits until the apiserver's cache (which
// writers read to decide whether to queue) shows it.
func holdTurn(t *testing.T, e *env) (lease string, release func()) {
	t.Helper()
	q := &queue.Queue{Client: s.admin.CoordinationV1(), Namespace: e.ns, Name: "kubeadm-config",
		Identity: "e2e-holder/1", TTL: 5 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	rel, err := q.Acquire(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	release = func() { rel(); cancel() }
	t.Cleanup(release)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if held := queueLeases(t, e, "0"); len(held) == 1 {
			return held[0], release
		}
		if time.Now().After(deadline) {
			t.Fatal("the held turn never showed in the apiserver's cache")
		}
	}
}

// queueLeases lists the names of the queue Leases of the test's
// kubeadm-config, read at resourceVersion rv ("" for a quorum read).
func queueLeases(t *testing.T, e *env, rv string) []string {
	t.Helper()
	list, err := s.admin.CoordinationV1().Leases(e.ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: queue.QueueLabel + "=kubeadm-config", ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range list.Items {
		names = append(names, l.Name)
	}
	return names
}

// wantStraightIn runs one more short writer once the turn is free: it must
// write with its first attempt, without queueing.
func wantStraightIn(t *testing.T, e *env, san string) {
	t.Helper()
	r := e.plugin(append(slices.Clone(shortWriter), "-o", "json", "--set", appendSAN(san))...)
	wantExit(t, r, 0)
	var out struct {
		Changed   bool `json:"changed"`
		Attempts  int  `json:"attempts"`
		Conflicts int  `json:"conflicts"`
		Queued    bool `json:"queued"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, r)
	}
	if !out.Changed || out.Queued || out.Attempts != 1 || out.Conflicts != 0 {
		t.Fatalf("the next writer did not go straight in: %+v", out)
	}
	if n := countSAN(e.document(), san); n != 1 {
		t.Fatalf("%s is in the document %d times", san, n)
	}
	if left := queueLeases(t, e, ""); len(left) != 0 {
		t.Fatalf("Leases left after the last write: %v", left)
	}
}

// TestTimedOutWritersLeaveNoLease: while the test holds the turn, five
// writers whose --timeout is shorter than --queue-ttl queue behind it one
// after another and time out (exit 4, nothing written). None leaves its
// Lease behind: right after each exits, only the held Lease is there. Once
// the turn is free, the next writer goes straight in.
func TestTimedOutWritersLeaveNoLease(t *testing.T) {
	e := newEnv(t)
	held, release := holdTurn(t, e)
	for i := range 5 {
		san := fmt.Sprintf("late-%d", i)
		r := e.plugin(append(slices.Clone(shortWriter), "--set", appendSAN(san))...)
		wantExit(t, r, 4)
		if left := queueLeases(t, e, ""); !slices.Equal(left, []string{held}) {
			t.Fatalf("writer %d timed out; queue Leases now %v, want only the held %s", i, left, held)
		}
		if n := countSAN(e.document(), san); n != 0 {
			t.Fatalf("%s timed out but is in the document", san)
		}
	}
	release()
	wantStraightIn(t, e, "next")
}

// TestKilledWriterDoesNotMakeNewcomersQueue: a writer killed with SIGKILL
// while queued leaves its Lease. A newcomer of the same host sees that the
// Lease's process is gone and deletes it rather than queue behind it: with
// a --timeout shorter than the TTL it could never outwait it.
func TestKilledWriterDoesNotMakeNewcomersQueue(t *testing.T) {
	e := newEnv(t)
	held, release := holdTurn(t, e)
	cmd := exec.Command(filepath.Join(s.binDir, "kubectl-kubeadmcfg"), "patch", "--no-backup", "--timeout", "1m",
		"--kubeconfig", s.cluster.Kubeconfig, "-n", e.ns, "--set", appendSAN("killed"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if queuedAs(t, e, strconv.Itoa(cmd.Process.Pid)) {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal("the writer never queued")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	release()
	if left := queueLeases(t, e, ""); len(left) != 1 || left[0] == held {
		t.Fatalf("queue Leases %v, want the killed writer's alone", left)
	}
	wantStraightIn(t, e, "after-kill")
}

// queuedAs reports whether a queue Lease of the test is held by a writer
// with pid.
func queuedAs(t *testing.T, e *env, pid string) bool {
	t.Helper()
	list, err := s.admin.CoordinationV1().Leases(e.ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: queue.QueueLabel + "=kubeadm-config"})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list.Items {
		if h := l.Spec.HolderIdentity; h != nil && filepath.Base(*h) == pid {
			return true
		}
	}
	return false
}
