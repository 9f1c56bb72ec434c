package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

func TestPauseAndResume(t *testing.T) {
	U, P := NodeUpdated, NodePending
	revert := started(t, spec(func(s *Spec) { s.Try = time.Second }))
	for i, n := range cps {
		turn(t, revert, 10*i, n, U)
	}
	if _, err := revert.ExpireTry(by("cp-0", 60)); err != nil {
		t.Fatal(err)
	}
	pausedRevert := clone(revert)
	pausedRevert.Status.Phase = Paused

	for _, tc := range []struct {
		name        string
		rec         *Record
		op          func(*Record, Clock) (bool, error)
		wantChanged bool
		wantPhase   Phase
		code        exitcode.Code
		want        string
	}{
		{"pause a rollout in progress", record(t, Progressing, U, P, P), (*Record).Pause, true, Paused, 0, ""},
		{"pause a revert", clone(revert), (*Record).Pause, true, Paused, 0, ""},
		{"pause twice", record(t, Paused, U, P, P), (*Record).Pause, false, Paused, 0, ""},
		{"pause a finished one", record(t, Succeeded, U, U, U), (*Record).Pause, false, Succeeded, exitcode.Conflict,
			"rollout 1 is Succeeded; only a rollout in progress can be paused"},
		{"pause nothing", &Record{}, (*Record).Pause, false, "", exitcode.NotFound, "no rollout is recorded"},
		{"resume", record(t, Paused, U, P, P), (*Record).Resume, true, Progressing, 0, ""},
		{"resume a revert", pausedRevert, (*Record).Resume, true, Reverting, 0, ""},
		{"resume a rollout in progress", record(t, Progressing, U, P, P), (*Record).Resume, false, Progressing, 0, ""},
		{"resume a failed one", record(t, Failed, NodeRolledBack, P, P), (*Record).Resume, false, Failed, exitcode.Conflict,
			"rollout 1 is Failed; only a paused rollout can be resumed"},
		{"resume nothing", &Record{}, (*Record).Resume, false, "", exitcode.NotFound, "no rollout is recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := clone(tc.rec)
			changed, err := tc.op(tc.rec, by("bob", 100))
			if tc.code != 0 {
				wantRefused(t, err, tc.code, tc.want)
			} else if err != nil {
				t.Fatal(err)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed %v, want %v", changed, tc.wantChanged)
			}
			if !changed {
				if d := diff(before, tc.rec); d != "" {
					t.Errorf("unchanged, yet (-want +got):\n%s", d)
				}
				return
			}
			if tc.rec.Status.Phase != tc.wantPhase {
				t.Errorf("phase %s, want %s", tc.rec.Status.Phase, tc.wantPhase)
			}
		})
	}
}

// TestResumeClearsTheCanary: after the canary's pause, the later nodes go
// on without pausing again.
func TestResumeClearsTheCanary(t *testing.T) {
	r := started(t, spec(func(s *Spec) { s.Nodes, s.Canary = []string{"a", "b", "c", "d"}, 1 }))
	turn(t, r, 0, "a", NodeUpdated)
	if r.Status.Phase != Paused {
		t.Fatalf("canary: %s", r.Status.Phase)
	}
	if _, err := r.Resume(by("bob", 5)); err != nil || r.Status.Canary != 0 || r.Status.Message != "resumed by bob" {
		t.Fatalf("resume: %v %+v", err, r.Status)
	}
	for i, n := range []string{"b", "c", "d"} {
		if r.Status.Phase != Progressing {
			t.Fatalf("paused again before %s", n)
		}
		turn(t, r, 10*(i+1), n, NodeUpdated)
	}
	if r.Status.Phase != Succeeded {
		t.Errorf("ends %s", r.Status.Phase)
	}
}

func TestConfirm(t *testing.T) {
	awaiting := func() *Record {
		r := started(t, spec(func(s *Spec) { s.Try = time.Minute }))
		for i, n := range cps {
			turn(t, r, 10*i, n, NodeUpdated)
		}
		return r
	}
	r := awaiting()
	if changed, err := r.Confirm(by("carol", 40)); err != nil || !changed {
		t.Fatal(changed, err)
	}
	if tr := r.Status.Try; r.Status.Phase != Succeeded || tr.ConfirmedBy != "carol" || !tr.ConfirmedAt.Equal(ts(40)) ||
		r.History[0].Outcome != Succeeded || r.History[0].Message != "confirmed by carol" {
		t.Errorf("confirmed: %s %+v %+v", r.Status.Phase, r.Status.Try, r.History)
	}
	// Confirmed twice: the second changes nothing, and writes no history.
	if changed, err := r.Confirm(by("dave", 41)); err != nil || changed || len(r.History) != 1 {
		t.Errorf("second confirm: %v %v %d", changed, err, len(r.History))
	}
	// Confirmed after its deadline, before any agent reverted it: kept. The
	// agents revert only what is still awaiting confirmation.
	late := awaiting()
	if changed, err := late.Confirm(by("carol", 1000)); err != nil || !changed {
		t.Errorf("late confirm: %v %v", changed, err)
	}
	if changed, err := late.ExpireTry(by("cp-0", 1001)); err == nil || changed {
		t.Errorf("expired after a confirm: %v %v", changed, err)
	}

	progressing := started(t, spec(func(s *Spec) { s.Try = time.Minute }))
	for _, tc := range []struct {
		name string
		rec  *Record
		code exitcode.Code
		want string
	}{
		{"not on trial", record(t, Succeeded, NodeUpdated, NodeUpdated, NodeUpdated), exitcode.Conflict,
			"rollout 1 (rollout) is not on trial: there is nothing to confirm"},
		{"not every node done", progressing, exitcode.Conflict,
			"rollout 1 is Progressing, not awaiting confirmation; it can be confirmed once every node is done"},
		{"nothing recorded", &Record{}, exitcode.NotFound, "no rollout is recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := clone(tc.rec)
			_, err := tc.rec.Confirm(by("carol", 50))
			wantRefused(t, err, tc.code, tc.want)
			if d := diff(before, tc.rec); d != "" {
				t.Errorf("a refused confirm changed the record (-want +got):\n%s", d)
			}
		})
	}
}

func TestMarkDocumentRestored(t *testing.T) {
	r := started(t, spec())
	turn(t, r, 0, "cp-0", NodeUpdated)
	turn(t, r, 10, "cp-1", NodeRolledBack)
	_, err := r.MarkDocumentRestored(by("bob", 20), "")
	wantRefused(t, err, exitcode.Conflict, "rollout 1 carries a new document: only an undo or a revert puts kubeadm-config back")
	_, err = (&Record{}).MarkDocumentRestored(by("bob", 20), "")
	wantRefused(t, err, exitcode.NotFound, "no rollout is recorded")

	if err := r.Undo(by("bob", 30), false); err != nil {
		t.Fatal(err)
	}
	// Marked before the nodes are done: the undo goes on, and ends with its
	// last node.
	if changed, err := r.MarkDocumentRestored(by("bob", 31), ""); err != nil || !changed || !r.Status.DocumentRestored || r.Status.Phase != Progressing {
		t.Fatalf("mark: %v %v %+v", changed, err, r.Status)
	}
	if changed, err := r.MarkDocumentRestored(by("cp-0", 32), "again"); err != nil || changed || r.Status.Message != "undoes rollout 1" {
		t.Fatalf("marked twice: %v %v %q", changed, err, r.Status.Message)
	}
	turn(t, r, 40, "cp-0", NodeUpdated)
	if r.Status.Phase != Succeeded || len(r.History) != 2 {
		t.Errorf("undo ends %s, history %d", r.Status.Phase, len(r.History))
	}
}

// TestHistoryKeepsTheLastTen: every rollout is written once, when it ends;
// the oldest give way.
func TestHistoryKeepsTheLastTen(t *testing.T) {
	r := &Record{}
	for i := range 13 {
		if err := r.Start(by("alice", 100*i), Spec{Target: docV2, Nodes: []string{"cp-0"}}); err != nil {
			t.Fatal(err)
		}
		turn(t, r, 100*i+1, "cp-0", NodeUpdated)
	}
	if len(r.History) != HistoryLength {
		t.Fatalf("%d entries", len(r.History))
	}
	for i, h := range r.History {
		if h.ID != int64(i+4) || h.Outcome != Succeeded {
			t.Errorf("entry %d: id %d %s", i, h.ID, h.Outcome)
		}
	}
	// Ids go on from the history when the status is gone.
	r.Status, r.Target = nil, nil
	if err := r.Start(by("alice", 2000), Spec{Target: docV2, Nodes: []string{"cp-0"}, Message: strings.Repeat("é", 600)}); err != nil || r.Status.ID != 14 {
		t.Errorf("next id %d: %v", r.Status.ID, err)
	}
	if m := r.Status.Message; len(m) != MaxMessageBytes-1 || !strings.HasSuffix(m, "é...") {
		t.Errorf("message of %d bytes kept", len(m))
	}
}
