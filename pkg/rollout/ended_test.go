package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// TestWaitJudge: how a wait for rollout 1 ends, for every way the record can
// stand. The watch itself is shown against a real API server (internal/e2e).
func TestEnded(t *testing.T) {
	progressing := started(t, spec())
	turn(t, progressing, 10, "cp-0", NodeUpdated)
	succeeded := started(t, spec())
	awaiting := started(t, spec(func(s *Spec) { s.Try = time.Minute }))
	for i, n := range cps {
		turn(t, succeeded, 10*i, n, NodeUpdated)
		turn(t, awaiting, 10*i, n, NodeUpdated)
	}
	rolledBack := started(t, spec())
	turn(t, rolledBack, 10, "cp-0", NodeUpdated)
	turn(t, rolledBack, 20, "cp-1", NodeRolledBack)
	rollbackFailed := started(t, spec())
	turn(t, rollbackFailed, 10, "cp-0", NodeRollbackFailed)
	// Rollout 1 failed at its rollback, then rollout 2 started: the history
	// alone tells how 1 ended.
	later := started(t, spec())
	turn(t, later, 10, "cp-0", NodeRollbackFailed)
	if err := later.Start(by("bob", 30), spec()); err != nil {
		t.Fatal(err)
	}
	paused := started(t, spec(func(s *Spec) { s.Canary = 1 }))
	turn(t, paused, 10, "cp-0", NodeUpdated)
	undone := started(t, spec(func(s *Spec) { s.Canary = 1 }))
	turn(t, undone, 10, "cp-0", NodeUpdated)
	if err := undone.Undo(by("bob", 20), false); err != nil {
		t.Fatal(err)
	}
	gone := &Record{Status: later.Status}

	for _, tc := range []struct {
		name       string
		r          *Record
		untilEnded bool
		done       bool
		code       exitcode.Code
		msg        string
	}{
		{"progressing", progressing, false, false, 0, ""},
		{"paused by its canary", paused, false, false, 0, ""},
		{"succeeded", succeeded, false, true, 0, ""},
		{"every node done on trial", awaiting, false, true, 0, ""},
		{"on trial, until ended", awaiting, true, false, 0, ""},
		{"a node rolled back", rolledBack, false, true, exitcode.RolledBack,
			"rollout 1 failed: node cp-1 failed and was rolled back: m; the nodes after cp-1 are untouched: cp-2"},
		{"a rollback failed", rollbackFailed, false, true, exitcode.RollbackFailed,
			"rollout 1 failed: node cp-0 failed and so did its rollback, a component of it may be down: m"},
		{"failed, as the history says", later, false, true, exitcode.RollbackFailed,
			"rollout 1 failed: node cp-0 failed and so did its rollback, a component of it may be down: m"},
		{"undone", undone, false, true, exitcode.Conflict, "rollout 1 was undone: undone by rollout 2 while Paused"},
		{"gone from the record", gone, false, true, exitcode.OutcomeUnknown,
			"stopped waiting before the rollout ended: rollout 1 is not in the record (rollout 2 is current, and the history no longer lists it)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, done, err := tc.r.Ended(1, tc.untilEnded)
			if done != tc.done || exitcode.FromError(err) != tc.code || (err != nil) != (tc.msg != "") || err != nil && err.Error() != tc.msg {
				t.Fatalf("got done %v, exit %d: %v\nwant done %v, exit %d: %s", done, exitcode.FromError(err), err, tc.done, tc.code, tc.msg)
			}
		})
	}
}

// TestRollbackFailedWords: the history tells exit 9 from 8 by the words
// FinishNode writes.
func TestRollbackFailedWords(t *testing.T) {
	r := started(t, spec())
	turn(t, r, 10, "cp-0", NodeRollbackFailed)
	if !strings.Contains(r.History[0].Message, rollbackFailedWords) {
		t.Fatalf("%q does not contain %q", r.History[0].Message, rollbackFailedWords)
	}
	r = started(t, spec())
	turn(t, r, 10, "cp-0", NodeRolledBack)
	if strings.Contains(r.History[0].Message, rollbackFailedWords) {
		t.Fatalf("%q contains %q", r.History[0].Message, rollbackFailedWords)
	}
	// An abandoned node's state is unknown: exit 9 too, from the history.
	r = started(t, spec())
	if _, err := r.Abandon(by("alice", 10), "cp-0"); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(by("alice", 20), spec()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Ended(1, false); exitcode.FromError(err) != exitcode.RollbackFailed {
		t.Fatalf("an abandoned rollout from the history: exit %d (%v)", exitcode.FromError(err), err)
	}
}

func TestSummary(t *testing.T) {
	r := started(t, spec())
	turn(t, r, 10, "cp-0", NodeUpdated)
	if err := r.BeginNode(by("agent-cp-1", 20), 1, "cp-1", nil, ""); err != nil {
		t.Fatal(err)
	}
	if got, want := r.Status.Summary(), "Progressing, 1 of 3 nodes done, node cp-1 in progress"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
