package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// TestAbandonUnwedgesADeadNodeInProgress is the review's
// TestReviewDeadNodeInProgressWedgesTheRecord (R3): cp-0's agent died in
// its turn and never comes back. Without abandon, nothing moves: undo
// waits for the turn, start for the rollout. Abandoned, cp-0 is
// RollbackFailed with its state unknown, the rollout Failed, the undo
// leaves cp-0 out (and says so), and a new rollout can start.
func TestAbandonUnwedgesADeadNodeInProgress(t *testing.T) {
	r := started(t, spec())
	if err := r.BeginNode(by("agent-cp-0", 10), 1, "cp-0", []string{"kube-apiserver"}, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Pause(by("alice", 20)); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, r.Undo(by("alice", 30), true), exitcode.Conflict, "node cp-0 is in progress in rollout 1; wait for its turn to end, then undo")
	wantRefused(t, r.Start(by("alice", 30), spec()), exitcode.Conflict,
		"another rollout is active: rollout 1 (rollout) is Paused, started by alice at 2026-11-30T12:00:00Z; resume it, or undo it")

	changed, err := r.Abandon(by("alice", 40), "cp-0")
	if err != nil || !changed {
		t.Fatalf("abandon: %v %v", changed, err)
	}
	s := r.Status
	n, _ := s.Lookup("cp-0")
	if s.Phase != Failed || n.Phase != NodeRollbackFailed || n.Message != "abandoned by alice: state unknown" || !n.FinishedAt.Equal(ts(40)) ||
		len(s.Abandoned) != 1 || s.Abandoned[0] != (Abandonment{Node: "cp-0", Phase: NodeInProgress, By: "alice", At: ts(40)}) {
		t.Fatalf("after abandon: %s %+v %+v", s.Phase, n, s.Abandoned)
	}
	if h := r.History[len(r.History)-1]; h.ID != 1 || h.Outcome != Failed || h.Message != "node cp-0 was abandoned by alice: its state is unknown" {
		t.Fatalf("history %+v", h)
	}
	if _, _, err := r.Ended(1, false); exitcode.FromError(err) != exitcode.RollbackFailed {
		t.Errorf("a wait for it ends with exit %d (%v), want 9", exitcode.FromError(err), err)
	}
	roundTrip(t, r)
	if changed, err := r.Abandon(by("alice", 41), "cp-0"); err != nil || changed {
		t.Errorf("abandoned twice: %v %v", changed, err)
	}

	if err := r.Undo(by("alice", 50), false); err != nil {
		t.Fatal(err)
	}
	if s := r.Status; s.Kind != KindUndo || len(s.Order) != 0 || strings.Join(s.LeftOut, ",") != "cp-0" {
		t.Fatalf("the undo: order %v, left out %v", s.Order, s.LeftOut)
	}
	roundTrip(t, r)
	if _, err := r.MarkDocumentRestored(by("alice", 51), "put back"); err != nil || r.Status.Phase != Succeeded {
		t.Fatalf("restored: %v %s", err, r.Status.Phase)
	}
	if h := r.History[len(r.History)-1]; h.Message != "put back; left out: cp-0 (abandoned, its state unknown)" {
		t.Errorf("the undo's history says %q", h.Message)
	}
	if err := r.Start(by("alice", 60), spec()); err != nil {
		t.Fatalf("start after the undo: %v", err)
	}
}

// TestAbandonDropsAGoneNodeFromATakeBack: a revert whose next node's agent
// is gone is not failed (its undo would bring the tried document back): the
// node is dropped from its order, the other nodes still go back, and it
// ends once the document is put back.
func TestAbandonDropsAGoneNodeFromATakeBack(t *testing.T) {
	r := started(t, spec(func(s *Spec) { s.Try = time.Minute }))
	for i, n := range cps {
		turn(t, r, 10*i, n, NodeUpdated)
	}
	if _, err := r.ExpireTry(by("agent-cp-0", 200)); err != nil {
		t.Fatal(err)
	}
	turn(t, r, 210, "cp-2", NodeUpdated)
	if err := r.BeginNode(by("agent-cp-1", 220), 2, "cp-1", nil, ""); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, r.Undo(by("alice", 230), false), exitcode.Conflict, "node cp-1 is in progress in rollout 2; wait for its turn to end, then undo")
	if changed, err := r.Abandon(by("alice", 230), "cp-1"); err != nil || !changed {
		t.Fatalf("abandon: %v %v", changed, err)
	}
	s := r.Status
	if s.Phase != Reverting || strings.Join(s.Order, ",") != "cp-2,cp-0" || len(s.Nodes) != 2 || len(s.Abandoned) != 1 {
		t.Fatalf("after abandon: %s, order %v, abandoned %+v", s.Phase, s.Order, s.Abandoned)
	}
	if next, ok := s.Turn(); !ok || next != "cp-0" {
		t.Fatalf("turn %q %v, want cp-0", next, ok)
	}
	roundTrip(t, r)
	// A late report from the abandoned node's agent is refused.
	wantRefused(t, r.FinishNode(by("agent-cp-1", 231), 2, "cp-1", Outcome{Phase: NodeUpdated}), exitcode.Conflict,
		"node cp-1 is not part of rollout 2 (its nodes: cp-2, cp-0)")
	turn(t, r, 240, "cp-0", NodeUpdated)
	if _, err := r.MarkDocumentRestored(by("agent-cp-0", 250), "kubeadm-config was put back"); err != nil {
		t.Fatal(err)
	}
	if s := r.Status; s.Phase != Succeeded {
		t.Fatalf("the revert is %s", s.Phase)
	}
	if h := r.History[len(r.History)-1]; h.ID != 2 || h.Message != "kubeadm-config was put back; abandoned: cp-1 (by alice, its state unknown)" {
		t.Errorf("history %+v", h)
	}

	// The last node of a take-back abandoned: it has nothing left to wait for.
	r = started(t, spec())
	turn(t, r, 10, "cp-0", NodeUpdated)
	if _, err := r.Pause(by("alice", 20)); err != nil {
		t.Fatal(err)
	}
	if err := r.Undo(by("alice", 30), false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.MarkDocumentRestored(by("alice", 31), "put back"); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Abandon(by("alice", 40), "cp-0"); err != nil || !changed || r.Status.Phase != Succeeded || len(r.Status.Nodes) != 0 {
		t.Fatalf("abandon the undo's only node: %v %v %+v", changed, err, r.Status)
	}
	roundTrip(t, r)
}

// TestAbandonAPendingNode: a node whose agent is gone before its turn fails
// the rollout too; the undo takes back the nodes the rollout did change and
// leaves the pending one alone (it was never changed).
func TestAbandonAPendingNode(t *testing.T) {
	r := started(t, spec())
	turn(t, r, 10, "cp-0", NodeUpdated)
	if changed, err := r.Abandon(by("alice", 20), "cp-2"); err != nil || !changed {
		t.Fatalf("abandon: %v %v", changed, err)
	}
	if got := phases(r.Status); got[0] != NodeUpdated || got[1] != NodePending || got[2] != NodeRollbackFailed || r.Status.Phase != Failed {
		t.Fatalf("after abandon: %v %s", got, r.Status.Phase)
	}
	if n, _ := r.Status.Lookup("cp-2"); n.Starts != 0 {
		t.Errorf("an abandoned pending node was started %d times", n.Starts)
	}
	roundTrip(t, r)
	if err := r.Undo(by("alice", 30), false); err != nil || strings.Join(r.Status.Order, ",") != "cp-0" || len(r.Status.LeftOut) != 0 {
		t.Fatalf("undo: %v, order %v, left out %v", err, r.Status.Order, r.Status.LeftOut)
	}
}

func TestAbandonRefusals(t *testing.T) {
	inProgress := started(t, spec())
	turn(t, inProgress, 10, "cp-0", NodeUpdated)
	if err := inProgress.BeginNode(by("agent-cp-1", 20), 1, "cp-1", nil, ""); err != nil {
		t.Fatal(err)
	}
	succeeded := started(t, spec())
	for i, n := range cps {
		turn(t, succeeded, 10*i, n, NodeUpdated)
	}
	for _, tc := range []struct {
		name string
		rec  *Record
		node string
		code exitcode.Code
		want string
	}{
		{"no rollout", &Record{}, "cp-0", exitcode.NotFound, "no rollout is recorded"},
		{"ended", succeeded, "cp-0", exitcode.Conflict, "rollout 1 is Succeeded: it waits for no node, so there is none to abandon"},
		{"not in the rollout", inProgress, "cp-9", exitcode.Conflict, "node cp-9 is not part of rollout 1 (its nodes: cp-0, cp-1, cp-2)"},
		{"done", inProgress, "cp-0", exitcode.Conflict, "node cp-0 is Updated in rollout 1: only a node in progress or pending can be abandoned"},
		{"another node in progress", inProgress, "cp-2", exitcode.Conflict,
			"node cp-1 is in progress in rollout 1: wait for its turn to end, or abandon it first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := clone(tc.rec)
			changed, err := tc.rec.Abandon(by("alice", 100), tc.node)
			wantRefused(t, err, tc.code, tc.want)
			if changed || diff(before, tc.rec) != "" {
				t.Errorf("a refused abandon changed the record: %s", diff(before, tc.rec))
			}
		})
	}
}

// roundTrip checks that r encodes and decodes to itself: the invariants
// allow what abandon makes.
func roundTrip(t *testing.T, r *Record) {
	t.Helper()
	cm := toConfigMap(t, r)
	got, err := FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(r, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
}
