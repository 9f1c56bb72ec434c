package rollout

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

func TestStart(t *testing.T) {
	r := started(t, spec(func(s *Spec) { s.Canary, s.Try, s.Message = 1, 20*time.Second, "audit logs for 7 days" }))
	want := &Status{
		ID: 1, Kind: KindRollout, Phase: Progressing,
		Target:   Ref{Hash: Hash(docV2), ResourceVersion: "812", Source: SourcePatch},
		Previous: &Ref{Hash: Hash(docV1), ResourceVersion: "790"},
		Order:    cps, Canary: 1, Try: &Try{Duration: metav1.Duration{Duration: 20 * time.Second}},
		StartedBy: "alice", StartedAt: base, Message: "audit logs for 7 days",
		Nodes: []Node{{Name: "cp-0", Phase: NodePending}, {Name: "cp-1", Phase: NodePending}, {Name: "cp-2", Phase: NodePending}},
	}
	if d := diff(want, r.Status); d != "" {
		t.Errorf("status (-want +got):\n%s", d)
	}
	if string(r.Target) != string(docV2) || string(r.Previous) != string(docV1) || len(r.History) != 0 {
		t.Errorf("documents or history: %q %q %v", r.Target, r.Previous, r.History)
	}
	// The order given is copied, not shared.
	nodes := []string{"a", "b"}
	r = started(t, spec(func(s *Spec) { s.Nodes = nodes }))
	nodes[0] = "z"
	if r.Status.Order[0] != "a" {
		t.Error("the order shares the caller's slice")
	}
}

func TestStartRefusals(t *testing.T) {
	active := func(phase Phase) *Record {
		r := started(t, spec(func(s *Spec) { s.Try = time.Minute }))
		r.Status.Phase = phase
		if phase == AwaitingConfirm {
			r.Status.Try.Deadline = ts(60)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		rec  *Record
		spec Spec
		code exitcode.Code
		want string
	}{
		{"progressing", active(Progressing), spec(), exitcode.Conflict,
			"another rollout is active: rollout 1 (rollout) is Progressing, started by alice at 2026-11-30T12:00:00Z; wait for it to end"},
		{"paused", active(Paused), spec(), exitcode.Conflict,
			"another rollout is active: rollout 1 (rollout) is Paused, started by alice at 2026-11-30T12:00:00Z; resume it, or undo it"},
		{"awaiting confirmation", active(AwaitingConfirm), spec(), exitcode.Conflict,
			"another rollout is active: rollout 1 (rollout) is AwaitingConfirm, started by alice at 2026-11-30T12:00:00Z; confirm it, or undo it"},
		{"no previous for a try", &Record{}, spec(func(s *Spec) { s.Previous, s.Try = nil, time.Second }), exitcode.Conflict,
			"no previous document is recorded, so a rollout on trial would have nothing to revert to"},
		{"empty target", &Record{}, spec(func(s *Spec) { s.Target = nil }), exitcode.Invalid, "the target document is empty"},
		{"source of an undo", &Record{}, spec(func(s *Spec) { s.Source = SourceUndo }), exitcode.Usage,
			`a rollout's source is one of live, patch, edit, restore, not "undo"`},
		{"no nodes", &Record{}, spec(func(s *Spec) { s.Nodes = nil }), exitcode.Usage, "a rollout needs at least one node"},
		{"unnamed node", &Record{}, spec(func(s *Spec) { s.Nodes = []string{"a", ""} }), exitcode.Usage, "node 2 of the order has no name"},
		{"node twice", &Record{}, spec(func(s *Spec) { s.Nodes = []string{"a", "b", "a"} }), exitcode.Usage, "node a is named twice in the order"},
		{"canary of every node", &Record{}, spec(func(s *Spec) { s.Canary = 3 }), exitcode.Usage,
			"the canary must be from 0 to 2 (fewer than the 3 nodes), not 3"},
		{"negative canary", &Record{}, spec(func(s *Spec) { s.Canary = -1 }), exitcode.Usage,
			"the canary must be from 0 to 2 (fewer than the 3 nodes), not -1"},
		{"negative try", &Record{}, spec(func(s *Spec) { s.Try = -time.Second }), exitcode.Usage, "the try must not be negative, not -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := clone(tc.rec)
			wantRefused(t, tc.rec.Start(by("bob", 5), tc.spec), tc.code, tc.want)
			if d := diff(before, tc.rec); d != "" {
				t.Errorf("a refused start changed the record (-want +got):\n%s", d)
			}
		})
	}
}

// TestStartPrevious: without a previous document given, the record's last
// good one is taken.
func TestStartPrevious(t *testing.T) {
	succeeded := started(t, spec())
	for i, n := range cps {
		turn(t, succeeded, 10*i, n, NodeUpdated)
	}
	failed := started(t, spec())
	turn(t, failed, 10, "cp-0", NodeUpdated)
	turn(t, failed, 20, "cp-1", NodeRolledBack)
	firstFailed := started(t, spec(func(s *Spec) { s.Previous = nil }))
	turn(t, firstFailed, 10, "cp-0", NodeRollbackFailed)

	for _, tc := range []struct {
		name     string
		rec      *Record
		given    []byte
		want     []byte
		wantRef  *Ref
		wantNext int64
	}{
		{"none recorded", &Record{}, nil, nil, nil, 1},
		{"the last rollout succeeded: its target", succeeded, nil, docV2, &Ref{Hash: Hash(docV2), ResourceVersion: "812"}, 2},
		{"the last rollout failed: its previous", failed, nil, docV1, &Ref{Hash: Hash(docV1), ResourceVersion: "790"}, 2},
		{"the first rollout failed: unknown", firstFailed, nil, nil, nil, 2},
		{"given by a patch", succeeded, docV1, docV1, &Ref{Hash: Hash(docV1), ResourceVersion: "7"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := clone(tc.rec)
			err := r.Start(by("bob", 100), Spec{Target: docV3, Previous: tc.given, PreviousResourceVersion: "7", Nodes: cps})
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Previous) != string(tc.want) || (r.Previous == nil) != (tc.want == nil) {
				t.Errorf("previous document %q, want %q", r.Previous, tc.want)
			}
			if d := diff(tc.wantRef, r.Status.Previous); d != "" {
				t.Errorf("previous (-want +got):\n%s", d)
			}
			if r.Status.ID != tc.wantNext || r.Status.Target.Source != SourceLive || len(r.History) != len(tc.rec.History) {
				t.Errorf("id %d source %s history %d", r.Status.ID, r.Status.Target.Source, len(r.History))
			}
		})
	}
}

// TestStartKnowsWhatTheTargetReplaced: without a previous document given,
// the last good target is exactly the previous only when kubeadm-config
// says the target replaced it (or the target is it). Otherwise it stays the
// previous, with what going back to it would drop; a try is refused and an
// undo needs forcing.
func TestStartKnowsWhatTheTargetReplaced(t *testing.T) {
	succeeded := started(t, spec())
	for i, n := range cps {
		turn(t, succeeded, 10*i, n, NodeUpdated)
	}
	docC := []byte(string(docV2) + "clusterName: other\n")
	untracked := &Untracked{FromResourceVersion: "812", ToResourceVersion: "900", Fields: []string{"clusterName"}}
	for _, tc := range []struct {
		name     string
		target   []byte
		replaced string
		want     *Untracked
	}{
		{"it replaced the last good target", docC, Hash(docV2), nil},
		{"it is the last good target", docV2, "", nil},
		{"it replaced another document", docC, Hash(docV1), untracked},
		{"what it replaced is unknown", docC, "", untracked},
		{"neither document parses: no fields", []byte("not: [a document"), "", &Untracked{FromResourceVersion: "812", ToResourceVersion: "900"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := clone(succeeded)
			sp := Spec{Target: tc.target, TargetResourceVersion: "900", Replaced: tc.replaced, Nodes: cps}
			if err := r.Start(by("bob", 100), sp); err != nil {
				t.Fatal(err)
			}
			if d := diff(tc.want, r.Status.Untracked); d != "" {
				t.Errorf("untracked (-want +got):\n%s", d)
			}
			if r.Status.Previous == nil || r.Status.Previous.Hash != Hash(docV2) || string(r.Previous) != string(docV2) {
				t.Errorf("previous %+v, want the last good target", r.Status.Previous)
			}
			tried := clone(succeeded)
			sp.Try = time.Minute
			err := tried.Start(by("bob", 100), sp)
			if tc.want == nil {
				if err != nil || tried.Status.Try == nil {
					t.Errorf("a try of a target whose previous is known: %v", err)
				}
				return
			}
			var drop *DropError
			if !errors.As(err, &drop) || exitcode.FromError(err) != exitcode.Conflict || tried.Status.ID != 1 {
				t.Fatalf("a try with untracked writes: %v (exit %d), rollout %d", err, exitcode.FromError(err), tried.Status.ID)
			}
		})
	}
	// Its undo is refused, naming what it would drop, unless forced.
	r := clone(succeeded)
	if err := r.Start(by("bob", 100), Spec{Target: docC, TargetResourceVersion: "900", Nodes: cps}); err != nil {
		t.Fatal(err)
	}
	turn(t, r, 110, "cp-0", NodeUpdated)
	if _, err := r.Pause(by("bob", 120)); err != nil {
		t.Fatal(err)
	}
	before := clone(r)
	wantRefused(t, r.Undo(by("bob", 130), false), exitcode.Conflict, "undoing rollout 2 would drop more than its own change: kubeadm-config was written "+
		"outside rollouts since "+Short(Hash(docV2))+" (resourceVersion 812 -> 900); going back to it changes clusterName; nothing was undone")
	if d := diff(before, r); d != "" {
		t.Errorf("a refused undo changed the record (-want +got):\n%s", d)
	}
	if err := r.Undo(by("bob", 130), true); err != nil || r.Status.Kind != KindUndo || r.Status.Untracked != nil || string(r.Target) != string(docV2) {
		t.Fatalf("forced undo: %v %+v", err, r.Status)
	}
}

func TestUndo(t *testing.T) {
	// cp-0 and cp-2 were changed; cp-1 needed nothing.
	r := started(t, spec())
	turn(t, r, 10, "cp-0", NodeUpdated)
	turn(t, r, 20, "cp-1", NodeUnchanged)
	turn(t, r, 30, "cp-2", NodeUpdated)
	if err := r.Undo(by("bob", 100), false); err != nil {
		t.Fatal(err)
	}
	want := &Status{
		ID: 2, Kind: KindUndo, Phase: Progressing,
		Target:   Ref{Hash: Hash(docV1), ResourceVersion: "790", Source: SourceUndo},
		Previous: &Ref{Hash: Hash(docV2), ResourceVersion: "812"},
		Order:    []string{"cp-2", "cp-0"}, StartedBy: "bob", StartedAt: ts(100), Message: "undoes rollout 1",
		Nodes: []Node{{Name: "cp-2", Phase: NodePending}, {Name: "cp-0", Phase: NodePending}},
	}
	if d := diff(want, r.Status); d != "" {
		t.Errorf("undo (-want +got):\n%s", d)
	}
	if string(r.Target) != string(docV1) || string(r.Previous) != string(docV2) {
		t.Errorf("documents not swapped: %q %q", r.Target, r.Previous)
	}
	// The undone rollout's history entry was written when it succeeded; the
	// undo writes none for it.
	if len(r.History) != 1 || r.History[0].Outcome != Succeeded {
		t.Errorf("history %+v", r.History)
	}
	// It ends once its nodes are done and the document is back.
	turn(t, r, 110, "cp-2", NodeUpdated)
	turn(t, r, 120, "cp-0", NodeUpdated)
	if r.Status.Phase != Progressing || r.Status.Message != "every node is done; waiting for kubeadm-config to be put back" {
		t.Fatalf("ended before its document was put back: %s %q", r.Status.Phase, r.Status.Message)
	}
	if changed, err := r.MarkDocumentRestored(by("bob", 130), ""); err != nil || !changed || r.Status.Phase != Succeeded {
		t.Fatalf("restored: %v %v %s", changed, err, r.Status.Phase)
	}
	if got := r.History[len(r.History)-1]; got.ID != 2 || got.Kind != KindUndo || got.Outcome != Succeeded || got.TargetHash != Hash(docV1) {
		t.Errorf("undo's history entry %+v", got)
	}
}

// TestUndoStopsAnActiveRollout: a rollout paused or awaiting confirmation
// is stopped and recorded as Undone; the node that failed its rollback is
// taken back too.
func TestUndoStopsAnActiveRollout(t *testing.T) {
	for _, tc := range []struct {
		phase     Phase
		spec      Spec
		done      []string
		wantOrder string
	}{
		{Paused, spec(func(s *Spec) { s.Canary = 1 }), []string{"cp-0"}, "cp-0"},
		{AwaitingConfirm, spec(func(s *Spec) { s.Try = time.Hour }), cps, "cp-2,cp-1,cp-0"},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			r := started(t, tc.spec)
			for _, n := range tc.done {
				turn(t, r, 10, n, NodeUpdated)
			}
			if r.Status.Phase != tc.phase {
				t.Fatalf("phase %s", r.Status.Phase)
			}
			if err := r.Undo(by("bob", 20), false); err != nil {
				t.Fatal(err)
			}
			want := []HistoryEntry{{ID: 1, Kind: KindRollout, TargetHash: Hash(docV2), By: "alice", StartedAt: base, FinishedAt: ts(20),
				Outcome: Undone, Message: "undone by rollout 2 while " + string(tc.phase)}}
			if d := diff(want, r.History); d != "" {
				t.Errorf("history (-want +got):\n%s", d)
			}
			if r.Status.ID != 2 || strings.Join(r.Status.Order, ",") != tc.wantOrder {
				t.Errorf("undo %d over %v", r.Status.ID, r.Status.Order)
			}
		})
	}

	r := started(t, spec())
	turn(t, r, 10, "cp-0", NodeUpdated)
	turn(t, r, 20, "cp-1", NodeRollbackFailed)
	if err := r.Undo(by("bob", 30), false); err != nil || strings.Join(r.Status.Order, ",") != "cp-1,cp-0" {
		t.Fatalf("undo after a failed rollback: %v %v", err, r.Status.Order)
	}
}

func TestUndoRefusals(t *testing.T) {
	progressing := started(t, spec())
	inProgress := started(t, spec())
	if err := inProgress.BeginNode(by("agent", 1), 1, "cp-0", nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := inProgress.Pause(by("bob", 2)); err != nil {
		t.Fatal(err)
	}
	noPrevious := started(t, spec(func(s *Spec) { s.Previous = nil }))
	turn(t, noPrevious, 10, "cp-0", NodeRolledBack)
	sameDocument := started(t, spec(func(s *Spec) { s.Previous = s.Target }))
	for i, n := range cps {
		turn(t, sameDocument, 10*i, n, NodeUnchanged)
	}
	reverting := started(t, spec(func(s *Spec) { s.Try = time.Second }))
	for i, n := range cps {
		turn(t, reverting, 10*i, n, NodeUpdated)
	}
	if _, err := reverting.ExpireTry(by("cp-0", 100)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rec  *Record
		want string
	}{
		{"none recorded", &Record{}, "nothing to undo: no rollout is recorded"},
		{"progressing", progressing, "rollout 1 is Progressing; pause it first, then undo it"},
		{"a node in progress", inProgress, "node cp-0 is in progress in rollout 1; wait for its turn to end, then undo"},
		{"no previous", noPrevious, "nothing to undo: no previous document is recorded for rollout 1"},
		{"no node changed, same document", sameDocument, "nothing to undo: rollout 1 changed no node, and its document is the one before it"},
		{"reverting", reverting, "rollout 2 is Reverting; wait for it to end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := clone(tc.rec)
			wantRefused(t, tc.rec.Undo(by("bob", 200), false), exitcode.Conflict, tc.want)
			if d := diff(before, tc.rec); d != "" {
				t.Errorf("a refused undo changed the record (-want +got):\n%s", d)
			}
		})
	}
}

func TestExpireTry(t *testing.T) {
	r := started(t, spec(func(s *Spec) { s.Try = 20 * time.Second }))
	_, err := r.ExpireTry(by("cp-0", 5))
	wantRefused(t, err, exitcode.Conflict, "rollout 1 is Progressing, not awaiting confirmation: it has no try to expire")
	turn(t, r, 10, "cp-0", NodeUpdated)
	turn(t, r, 20, "cp-1", NodeUnchanged)
	turn(t, r, 30, "cp-2", NodeUpdated) // done at 31: deadline 51
	if r.Status.Phase != AwaitingConfirm || !r.Status.Try.Deadline.Equal(ts(51)) ||
		r.Status.Message != "every node is done; confirm by 2026-11-30T12:00:51Z, or it is reverted" {
		t.Fatalf("after the last node: %s %v %q", r.Status.Phase, r.Status.Try.Deadline, r.Status.Message)
	}
	if r.Status.TryExpired(ts(51)) || !r.Status.TryExpired(ts(51).Add(time.Millisecond)) {
		t.Error("the deadline is the last moment to confirm")
	}
	before := clone(r)
	_, err = r.ExpireTry(by("cp-0", 51))
	wantRefused(t, err, exitcode.Conflict, "the try of rollout 1 ends at 2026-11-30T12:00:51Z: it has not expired")
	if d := diff(before, r); d != "" {
		t.Fatalf("refused expiry changed the record (-want +got):\n%s", d)
	}

	if changed, err := r.ExpireTry(by("cp-2", 52)); err != nil || !changed {
		t.Fatalf("expire: %v %v", changed, err)
	}
	want := &Status{
		ID: 2, Kind: KindRevert, Phase: Reverting,
		Target:   Ref{Hash: Hash(docV1), ResourceVersion: "790", Source: SourceRevert},
		Previous: &Ref{Hash: Hash(docV2), ResourceVersion: "812"},
		Order:    []string{"cp-2", "cp-0"}, StartedBy: "cp-2", StartedAt: ts(52),
		Message: "reverts rollout 1, not confirmed by 2026-11-30T12:00:51Z",
		Nodes:   []Node{{Name: "cp-2", Phase: NodePending}, {Name: "cp-0", Phase: NodePending}},
	}
	if d := diff(want, r.Status); d != "" {
		t.Errorf("revert (-want +got):\n%s", d)
	}
	wantHistory := []HistoryEntry{{ID: 1, Kind: KindRollout, TargetHash: Hash(docV2), By: "alice", StartedAt: base, FinishedAt: ts(52),
		Outcome: Reverted, Message: "not confirmed by 2026-11-30T12:00:51Z; reverted by rollout 2"}}
	if d := diff(wantHistory, r.History); d != "" {
		t.Errorf("history (-want +got):\n%s", d)
	}
	// A second agent's expiry, run again on the record it lost to, finds
	// the revert made.
	if changed, err := r.ExpireTry(by("cp-1", 53)); err != nil || changed || r.Status.ID != 2 {
		t.Errorf("second expiry: %v %v", changed, err)
	}
	// Confirming now is too late.
	_, err = r.Confirm(by("alice", 54))
	wantRefused(t, err, exitcode.Conflict, "rollout 2 (revert) is not on trial: there is nothing to confirm")
	// The revert goes node by node, reverse order, and ends with the document.
	if _, err := r.MarkDocumentRestored(by("cp-2", 55), ""); err != nil || r.Status.Phase != Reverting {
		t.Fatalf("document restored: %v %s", err, r.Status.Phase)
	}
	if got, _ := r.Status.Turn(); got != "cp-2" {
		t.Fatalf("first turn of the revert: %s", got)
	}
	turn(t, r, 60, "cp-2", NodeUpdated)
	turn(t, r, 70, "cp-0", NodeUpdated)
	if r.Status.Phase != Succeeded || r.History[len(r.History)-1].Kind != KindRevert {
		t.Errorf("revert ends %s, history %+v", r.Status.Phase, r.History)
	}
}

// TestExpireTryWithNothingToRevert: every node was unchanged; the revert has
// only the document to put back, and ends with it.
func TestExpireTryWithNothingToRevert(t *testing.T) {
	r := started(t, spec(func(s *Spec) { s.Try = time.Second }))
	for i, n := range cps {
		turn(t, r, 10*i, n, NodeUnchanged)
	}
	if _, err := r.ExpireTry(by("cp-0", 60)); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Status.Turn(); ok || r.Status.Phase != Reverting || len(r.Status.Nodes) != 0 {
		t.Fatalf("revert of nothing: %+v", r.Status)
	}
	if _, err := r.MarkDocumentRestored(by("cp-0", 61), "kubeadm-config was changed since; it was left alone"); err != nil {
		t.Fatal(err)
	}
	if r.Status.Phase != Succeeded || r.Status.Message != "kubeadm-config was changed since; it was left alone" {
		t.Errorf("%s %q", r.Status.Phase, r.Status.Message)
	}
}

// TestUndoOfTheDocumentAlone: a rollout whose first node rolled itself back,
// or whose nodes were all unchanged, changed no node, but kubeadm-config
// still holds its document: the undo takes that back, with no node to go
// through, and ends once the document is put back.
func TestUndoOfTheDocumentAlone(t *testing.T) {
	rolledBack := started(t, spec())
	turn(t, rolledBack, 10, "cp-0", NodeRolledBack)
	unchanged := started(t, spec())
	for i, n := range cps {
		turn(t, unchanged, 10*i, n, NodeUnchanged)
	}
	for name, r := range map[string]*Record{"rolled back at once": rolledBack, "no node changed": unchanged} {
		t.Run(name, func(t *testing.T) {
			if err := r.Undo(by("bob", 100), false); err != nil {
				t.Fatal(err)
			}
			s := r.Status
			if s.ID != 2 || s.Kind != KindUndo || s.Phase != Progressing || len(s.Nodes) != 0 || s.Target.Hash != Hash(docV1) {
				t.Fatalf("undo: %+v", s)
			}
			if _, ok := s.Turn(); ok {
				t.Fatal("an undo of no node handed out a turn")
			}
			if changed, err := r.MarkDocumentRestored(by("bob", 101), ""); err != nil || !changed || r.Status.Phase != Succeeded {
				t.Fatalf("restored: %v %v %s", changed, err, r.Status.Phase)
			}
			if _, err := FromConfigMap(toConfigMap(t, r)); err != nil {
				t.Fatalf("the record does not read back: %v", err)
			}
		})
	}
}
