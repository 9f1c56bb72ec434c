package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// record builds a rollout over cps whose nodes are in the phases given, as
// the transitions would leave them, in phase.
func record(t *testing.T, phase Phase, nodes ...NodePhase) *Record {
	t.Helper()
	r := started(t, spec())
	for i, p := range nodes {
		n := &r.Status.Nodes[i]
		n.Phase = p
		if p != NodePending {
			n.Starts = 1
		}
	}
	r.Status.Phase = phase
	return r
}

func TestTurn(t *testing.T) {
	P, I, U, S, B, F := NodePending, NodeInProgress, NodeUpdated, NodeUnchanged, NodeRolledBack, NodeRollbackFailed
	for _, tc := range []struct {
		name  string
		rec   *Record
		want  string
		whyOf string // why it is nobody's turn, as BeginNode says
	}{
		{"the first node", record(t, Progressing, P, P, P), "cp-0", ""},
		{"after one updated", record(t, Progressing, U, P, P), "cp-1", ""},
		{"after one unchanged", record(t, Progressing, S, U, P), "cp-2", ""},
		{"one in progress", record(t, Progressing, U, I, P), "", "node cp-1 is InProgress"},
		{"paused", record(t, Paused, U, P, P), "", "rollout 1 is Paused"},
		{"after a rollback", record(t, Failed, B, P, P), "", "rollout 1 is Failed"},
		{"after a failed rollback", record(t, Failed, U, F, P), "", "rollout 1 is Failed"},
		{"all done", record(t, Progressing, U, U, U), "", "every node of rollout 1 is done"},
		{"succeeded", record(t, Succeeded, U, U, U), "", "rollout 1 is Succeeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.rec.Status.Turn()
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("turn %q %v, want %q", got, ok, tc.want)
			}
			if _, err := tc.rec.Status.turn(); tc.whyOf != "" && (err == nil || err.Error() != tc.whyOf) {
				t.Errorf("why: %v, want %s", err, tc.whyOf)
			}
		})
	}
	var none *Status
	if got, ok := none.Turn(); ok || got != "" {
		t.Error("a turn without a rollout")
	}
}

func TestBeginNode(t *testing.T) {
	r := started(t, spec())
	if err := r.BeginNode(by("agent-a", 7), 1, "cp-0", []string{"kube-apiserver", "kube-scheduler"}, "backup-1"); err != nil {
		t.Fatal(err)
	}
	want := Node{Name: "cp-0", Phase: NodeInProgress, Components: []string{"kube-apiserver", "kube-scheduler"}, Agent: "agent-a",
		StartedAt: ts(7), Starts: 1, Backup: "backup-1"}
	if d := diff(want, r.Status.Nodes[0]); d != "" {
		t.Errorf("entry (-want +got):\n%s", d)
	}
	if r.Status.Phase != Progressing {
		t.Errorf("phase %s", r.Status.Phase)
	}
	if got, ok := r.Status.Lookup("cp-0"); !ok || diff(want, got) != "" {
		t.Errorf("lookup: %v %+v", ok, got)
	}
	if _, ok := r.Status.Lookup("cp-9"); ok {
		t.Error("found a node the rollout does not include")
	}
}

func TestBeginNodeRefusals(t *testing.T) {
	P, I, U, B := NodePending, NodeInProgress, NodeUpdated, NodeRolledBack
	inProgress := record(t, Progressing, U, I, P)
	inProgress.Status.Nodes[1].Agent, inProgress.Status.Nodes[1].StartedAt = "agent-b", ts(3)
	for _, tc := range []struct {
		name string
		rec  *Record
		id   int64
		node string
		code exitcode.Code
		want string
	}{
		{"no rollout", &Record{}, 1, "cp-0", exitcode.NotFound, "no rollout is recorded"},
		{"another rollout", record(t, Progressing), 9, "cp-0", exitcode.Conflict,
			"rollout 9 is no longer the current one (rollout 1 is); nothing was changed for node cp-0"},
		{"a node not in it", record(t, Progressing), 1, "cp-9", exitcode.Conflict, "node cp-9 is not part of rollout 1 (its nodes: cp-0, cp-1, cp-2)"},
		{"not its turn yet", record(t, Progressing), 1, "cp-1", exitcode.Conflict, "it is not node cp-1's turn in rollout 1: node cp-0 goes first"},
		{"another in progress", inProgress, 1, "cp-2", exitcode.Conflict, "it is not node cp-2's turn in rollout 1: node cp-1 is InProgress"},
		{"itself in progress", inProgress, 1, "cp-1", exitcode.Conflict,
			"node cp-1 is already in progress in rollout 1 (started by agent-b at 2026-11-30T12:00:03Z); resume it instead of starting it again"},
		{"done already", record(t, Progressing, U, P, P), 1, "cp-0", exitcode.Conflict, "it is not node cp-0's turn in rollout 1: node cp-1 goes first"},
		{"paused", record(t, Paused, U, P, P), 1, "cp-1", exitcode.Conflict, "it is not node cp-1's turn in rollout 1: rollout 1 is Paused"},
		{"after a rollback", record(t, Failed, B, P, P), 1, "cp-1", exitcode.Conflict, "it is not node cp-1's turn in rollout 1: rollout 1 is Failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := clone(tc.rec)
			wantRefused(t, tc.rec.BeginNode(by("agent", 9), tc.id, tc.node, nil, ""), tc.code, tc.want)
			if d := diff(before, tc.rec); d != "" {
				t.Errorf("a refused begin changed the record (-want +got):\n%s", d)
			}
		})
	}
}

func TestResumeNode(t *testing.T) {
	r := started(t, spec())
	if err := r.BeginNode(by("agent-a", 1), 1, "cp-0", []string{"kube-apiserver"}, "b"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := r.ResumeNode(by("agent-a2", 5), 1, "cp-0"); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.Status.Nodes[0]; n.Starts != 1 || n.Resumes != 2 || n.Agent != "agent-a2" || !n.StartedAt.Equal(ts(1)) || n.Backup != "b" {
		t.Errorf("resumed entry %+v", n)
	}
	before := clone(r)
	wantRefused(t, r.ResumeNode(by("agent-b", 6), 1, "cp-1"), exitcode.Conflict,
		"node cp-1 is Pending in rollout 1, not in progress: there is nothing to resume")
	wantRefused(t, r.ResumeNode(by("agent-a", 6), 2, "cp-0"), exitcode.Conflict,
		"rollout 2 is no longer the current one (rollout 1 is); nothing was changed for node cp-0")
	if d := diff(before, r); d != "" {
		t.Errorf("a refused resume changed the record (-want +got):\n%s", d)
	}
}

func TestFinishNode(t *testing.T) {
	long := strings.Repeat("x", 2000)
	for _, tc := range []struct {
		name        string
		spec        Spec
		done        []NodePhase // the nodes before, done in turn
		node        string
		outcome     Outcome
		wantPhase   Phase
		wantMessage string
		wantNodes   []NodePhase
		wantHistory bool
	}{
		{"updated, more to go", spec(), nil, "cp-0", Outcome{Phase: NodeUpdated},
			Progressing, "", []NodePhase{NodeUpdated, NodePending, NodePending}, false},
		{"the canary", spec(func(s *Spec) { s.Canary = 2 }), []NodePhase{NodeUnchanged}, "cp-1", Outcome{Phase: NodeUpdated},
			Paused, "paused after 2 of 3 nodes (canary); resume to go on", []NodePhase{NodeUnchanged, NodeUpdated, NodePending}, false},
		{"the last node", spec(), []NodePhase{NodeUpdated, NodeUnchanged}, "cp-2", Outcome{Phase: NodeUnchanged},
			Succeeded, "", []NodePhase{NodeUpdated, NodeUnchanged, NodeUnchanged}, true},
		{"the last node on trial", spec(func(s *Spec) { s.Try = time.Minute }), []NodePhase{NodeUpdated, NodeUpdated}, "cp-2", Outcome{Phase: NodeUpdated},
			AwaitingConfirm, "every node is done; confirm by 2026-11-30T12:02:00Z, or it is reverted", []NodePhase{NodeUpdated, NodeUpdated, NodeUpdated}, false},
		{"rolled back", spec(), []NodePhase{NodeUpdated}, "cp-1", Outcome{Phase: NodeRolledBack, Message: "kube-apiserver did not become healthy"},
			Failed, "node cp-1 failed and was rolled back: kube-apiserver did not become healthy", []NodePhase{NodeUpdated, NodeRolledBack, NodePending}, true},
		{"rollback failed", spec(), nil, "cp-0", Outcome{Phase: NodeRollbackFailed, Message: "etcd: boom"},
			Failed, "node cp-0 failed and so did its rollback, a component of it may be down: etcd: boom", []NodePhase{NodeRollbackFailed, NodePending, NodePending}, true},
		{"rolled back without a reason", spec(), nil, "cp-0", Outcome{Phase: NodeRolledBack},
			Failed, "node cp-0 failed and was rolled back", []NodePhase{NodeRolledBack, NodePending, NodePending}, true},
		{"a long message is cut", spec(), nil, "cp-0", Outcome{Phase: NodeRolledBack, Message: long},
			Failed, ("node cp-0 failed and was rolled back: " + long)[:MaxMessageBytes-3] + "...", []NodePhase{NodeRolledBack, NodePending, NodePending}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := started(t, tc.spec)
			for i, p := range tc.done {
				turn(t, r, 10*i, cps[i], p)
			}
			if err := r.BeginNode(by("agent", 58), 1, tc.node, nil, ""); err != nil {
				t.Fatal(err)
			}
			tc.outcome.Components = []string{"kube-apiserver"}
			if err := r.FinishNode(by("agent", 60), 1, tc.node, tc.outcome); err != nil {
				t.Fatal(err)
			}
			s := r.Status
			if s.Phase != tc.wantPhase || s.Message != tc.wantMessage {
				t.Errorf("rollout %s %q\nwant %s %q", s.Phase, s.Message, tc.wantPhase, tc.wantMessage)
			}
			if d := diff(tc.wantNodes, phases(s)); d != "" {
				t.Errorf("nodes (-want +got):\n%s", d)
			}
			n, _ := s.Lookup(tc.node)
			if !n.FinishedAt.Equal(ts(60)) || n.Components[0] != "kube-apiserver" || len(n.Message) > MaxMessageBytes {
				t.Errorf("entry %+v", n)
			}
			var want []HistoryEntry
			if tc.wantHistory {
				want = []HistoryEntry{{ID: 1, Kind: KindRollout, TargetHash: Hash(docV2), By: "alice", StartedAt: base, FinishedAt: ts(60),
					Outcome: tc.wantPhase, Message: tc.wantMessage}}
			}
			if d := diff(want, r.History); d != "" {
				t.Errorf("history (-want +got):\n%s", d)
			}
		})
	}
}

// Only the agent that began or resumed a node's turn reports its outcome:
// not another node's agent, nor an agent taken over since.
func TestFinishNodeByAnotherAgent(t *testing.T) {
	r := started(t, spec())
	if err := r.BeginNode(by("agent-cp-0", 1), 1, "cp-0", nil, ""); err != nil {
		t.Fatal(err)
	}
	before := clone(r)
	wantRefused(t, r.FinishNode(by("agent-cp-1", 2), 1, "cp-0", Outcome{Phase: NodeUpdated}), exitcode.Conflict,
		"node cp-0 is in progress in rollout 1 for agent-cp-0, not agent-cp-1: only the agent that began or resumed a node's turn reports its outcome")
	if d := diff(before, r); d != "" {
		t.Errorf("a refused finish changed the record (-want +got):\n%s", d)
	}
	if err := r.ResumeNode(by("agent-cp-0-restarted", 3), 1, "cp-0"); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, r.FinishNode(by("agent-cp-0", 4), 1, "cp-0", Outcome{Phase: NodeUpdated}), exitcode.Conflict,
		"node cp-0 is in progress in rollout 1 for agent-cp-0-restarted, not agent-cp-0: only the agent that began or resumed a node's turn reports its outcome")
	if err := r.FinishNode(by("agent-cp-0-restarted", 5), 1, "cp-0", Outcome{Phase: NodeUpdated}); err != nil {
		t.Errorf("the agent that resumed the node: %v", err)
	}
}

func TestFinishNodeRefusals(t *testing.T) {
	r := started(t, spec())
	turn(t, r, 0, "cp-0", NodeUpdated)
	before := clone(r)
	for _, tc := range []struct {
		name string
		node string
		o    Outcome
		code exitcode.Code
		want string
	}{
		{"done already", "cp-0", Outcome{Phase: NodeRolledBack}, exitcode.Conflict,
			"node cp-0 is Updated in rollout 1, not in progress; its outcome RolledBack was not recorded"},
		{"never started", "cp-1", Outcome{Phase: NodeUpdated}, exitcode.Conflict,
			"node cp-1 is Pending in rollout 1, not in progress; its outcome Updated was not recorded"},
		{"not an outcome", "cp-1", Outcome{Phase: NodeInProgress}, exitcode.Usage,
			`a node's outcome is one of Updated, Unchanged, RolledBack, RollbackFailed, not "InProgress"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefused(t, r.FinishNode(by("agent", 9), 1, tc.node, tc.o), tc.code, tc.want)
		})
	}
	if d := diff(before, r); d != "" {
		t.Errorf("a refused finish changed the record (-want +got):\n%s", d)
	}
}

// TestPausedDuringALastNode: a pause stops turns, not a node in progress;
// the last node's outcome still ends the rollout.
func TestPausedDuringALastNode(t *testing.T) {
	r := started(t, spec())
	turn(t, r, 0, "cp-0", NodeUpdated)
	turn(t, r, 10, "cp-1", NodeUpdated)
	if err := r.BeginNode(by("agent", 20), 1, "cp-2", nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Pause(by("bob", 21)); err != nil {
		t.Fatal(err)
	}
	if err := r.FinishNode(by("agent", 22), 1, "cp-2", Outcome{Phase: NodeUpdated}); err != nil || r.Status.Phase != Succeeded {
		t.Fatalf("%v %s", err, r.Status.Phase)
	}
}
