package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// The rollout's operator side against a real API server, through the built
// plugin and the real kubectl: what it refuses, what of two racing starts
// wins, how a wait ends. The agents' side is a stand-in here; the tests with
// real agents on a local control plane are TestRolloutOn... .

// TestRolloutPreflightRefusals: a start that cannot go names why and every
// node concerned, exits 4, and writes nothing: no record, and with
// patch --rollout no change to kubeadm-config.
func TestRolloutPreflightRefusals(t *testing.T) {
	e := newEnv(t)
	cp := e.fakeControlPlane(3)
	n0, n1, n2 := cp.nodes[0], cp.nodes[1], cp.nodes[2]
	rv := e.configMapRV()
	refused := func(args []string, subs ...string) {
		t.Helper()
		r := e.plugin(args...)
		wantEnded(t, r, 4) // what the preflight waited for, then why it refused
		wantStderr(t, r, subs...)
		e.wantNoRecord()
		if got := e.configMapRV(); got != rv {
			t.Fatalf("%v wrote kubeadm-config: resourceVersion %s -> %s", args, rv, got)
		}
	}

	refused([]string{"rollout", "start", "--nodes", n0 + ",cp-nope"},
		"node cp-nope is not a control-plane node (the control-plane nodes: "+n0+", "+n1+", "+n2+"); nothing was started")

	cp.removeAgent(n1)
	refused([]string{"rollout", "start"}, "preflight failed, nothing was started: node "+n1+": no agent (no Lease kubeadmcfg-agent-"+n1+")")
	// The node left out of the rollout counts too: it carries the control
	// plane while the others restart.
	refused([]string{"rollout", "start", "--nodes", n0}, "node "+n1+": no agent")
	refused([]string{"patch", "--no-backup", "--set", "clusterName=refused", "--rollout"},
		"nothing was written, the rollout could not start: preflight failed, nothing was started: node "+n1+": no agent")

	// Renewed 2m30s ago by this clock: the server's Date, whole seconds,
	// may be a second behind, and a round 2m would then read 119s. Its
	// Lease lasts 5s: the preflight watches it that long, unchanged, before
	// it takes the agent for lost (the clock of one API server is not
	// enough), and refuses then, with the node not Ready meanwhile.
	cp.setAgent(n1, func(l *coordinationv1.Lease) {
		seconds := int32(5)
		l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &metav1.MicroTime{Time: time.Now().Add(-150 * time.Second)}, &seconds
	})
	cp.setPodsReady(n2, false)
	// The watch lasts at least the Lease's 5s; the seconds it says are
	// those it took, which a loaded machine makes 6.
	refused([]string{"rollout", "start"}, "node "+n1+": its agent is lost (last seen 2m", "its Lease did not change in the ",
		"node "+n2+": kube-apiserver is not Ready, kube-controller-manager is not Ready, kube-scheduler is not Ready")
	// A node only not Ready yet is waited for, within --timeout, which ends
	// the wait with the refusal.
	r := e.plugin("rollout", "start", "--stale-after", "5m", "--timeout", "3s")
	wantEnded(t, r, 4)
	wantStderr(t, r, "preflight: waiting up to 3s for node "+n2+": kube-apiserver is not Ready",
		"error: preflight failed after waiting 3s, nothing was started: node "+n2+": kube-apiserver is not Ready")
	e.wantNoRecord()
	// A longer --stale-after takes the agent for alive.
	cp.setPodsReady(n2, true)
	wantExit(t, e.plugin("rollout", "start", "--stale-after", "5m"), 0)
}

// TestRolloutConcurrentStarts: eight starts at once, against one record
// that does not exist yet: exactly one creates it and wins (exit 0); every
// other exits 4 naming the winner. Counted by exit codes and by the Events,
// not by the record, which any winner would leave alike.
func TestRolloutConcurrentStarts(t *testing.T) {
	e := newEnv(t)
	e.fakeControlPlane(2)
	const starts = 8
	results := make([]result, starts)
	var wg sync.WaitGroup
	for i := range starts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.plugin("rollout", "start", "--identity", "starter-"+string(rune('a'+i)))
		}()
	}
	wg.Wait()
	won, refused := 0, 0
	for _, r := range results {
		switch r.code {
		case 0:
			won++
		case 4:
			refused++
			wantStderr(t, r, "another rollout is active: rollout 1 (rollout) is Progressing, started by starter-")
		default:
			t.Errorf("want exit 0 or 4, got %s", r)
		}
	}
	if won != 1 || refused != starts-1 {
		t.Fatalf("%d starts won and %d were refused, want 1 and %d", won, refused, starts-1)
	}
	r, _ := e.record()
	if r.Status.ID != 1 || len(r.History) != 0 {
		t.Fatalf("record: rollout %d, history %v", r.Status.ID, r.History)
	}
	if got := e.rolloutEvents(); strings.Join(got, ",") != "RolloutStarted" {
		t.Fatalf("events %v, want one RolloutStarted", got)
	}
}

// TestRolloutControlAndStatus: pause, resume, confirm and history on a
// rollout no agent moves; status as JSON and as a table; status -w that
// stops following first exits 7.
func TestRolloutControlAndStatus(t *testing.T) {
	e := newEnv(t)
	cp := e.fakeControlPlane(2)
	wantExit(t, e.plugin("rollout", "status"), 5)
	r := e.plugin("rollout", "start", "--nodes", cp.nodes[1]+","+cp.nodes[0], "--identity", "alice")
	wantExit(t, r, 0)
	if !strings.HasPrefix(r.stdout, "rollout 1 started: sha256:") || !strings.Contains(r.stdout, "over "+cp.nodes[1]+", "+cp.nodes[0]) {
		t.Fatalf("start said %s", r)
	}
	st := e.rolloutStatus()
	if st.Rollout.Phase != rollout.Progressing || st.Rollout.StartedBy != "alice" || len(st.Nodes) != 2 ||
		st.Nodes[0].Name != cp.nodes[1] || st.Nodes[0].Agent.Liveness != nodestate.AgentAlive || st.Rollout.Target.Hash != st.LiveHash {
		t.Fatalf("status: %+v", st)
	}
	if r, _ := e.record(); string(r.Target) != e.document() {
		t.Fatalf("the record does not pin the live document byte for byte:\n%q\n%q", r.Target, e.document())
	}
	r = e.plugin("rollout", "status")
	wantExit(t, r, 0)
	for _, want := range []string{"rollout 1 (rollout) Progressing: target sha256:", "started by alice", "NODE", cp.nodes[1] + "  Pending"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status table lacks %q:\n%s", want, r.stdout)
		}
	}

	for _, step := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"rollout", "pause"}, 0, "rollout 1 paused (Paused)"},
		{[]string{"rollout", "pause"}, 0, "rollout 1 was already paused (Paused)"},
		{[]string{"rollout", "start"}, 4, "another rollout is active: rollout 1 (rollout) is Paused"},
		{[]string{"rollout", "resume"}, 0, "rollout 1 resumed (Progressing)"},
		{[]string{"rollout", "confirm"}, 4, "rollout 1 (rollout) is not on trial: there is nothing to confirm"},
		{[]string{"rollout", "undo"}, 4, "rollout 1 is Progressing; pause it first, then undo it"},
	} {
		r := e.plugin(step.args...)
		wantExit(t, r, step.code)
		if !strings.Contains(r.stdout+r.stderr, step.out) {
			t.Fatalf("%v: want %q, got %s", step.args, step.out, r)
		}
	}
	if got := strings.Join(e.rolloutEvents(), ","); got != "RolloutPaused,RolloutResumed,RolloutStarted" {
		t.Errorf("events %s: want one per transition made", got)
	}
	r = e.plugin("rollout", "history")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "Progressing") || !strings.HasPrefix(r.stdout, "ID  KIND") {
		t.Errorf("history: %s", r)
	}

	// Nothing moves the rollout: the follow stops at its --timeout.
	r = e.plugin("rollout", "status", "-w", "--timeout", "3s")
	wantEnded(t, r, 7)
	wantStderr(t, r, "stopped waiting before the rollout ended (rollout 1, Progressing, 0 of 2 nodes done)",
		"follow it with 'kubectl kubeadmcfg rollout status -w'")
}

// TestRolloutWaitExitCodes: start --wait follows the record with a watch and
// exits as the rollout ends: 8 when a node rolled itself back (the record
// says Failed, naming it and why), 9 when its rollback failed, 0 when every
// node is done. A stand-in moves the record as the agents would.
func TestRolloutWaitExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome rollout.NodePhase
		code    int
		stderr  string
	}{
		{"rolled back", rollout.NodeRolledBack, 8, "failed and was rolled back: kube-apiserver did not become healthy; the nodes after"},
		{"rollback failed", rollout.NodeRollbackFailed, 9, "failed and so did its rollback, a component of it may be down: kube-apiserver did not become healthy"},
		{"updated", rollout.NodeUpdated, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			cp := e.fakeControlPlane(2)
			p := e.startPlugin(nil, "rollout", "start", "--wait", "--nodes", cp.nodes[0]+","+cp.nodes[1])
			p.waitFor("rollout 1 started")
			e.standIn(cp.nodes[0], tc.outcome, "kube-apiserver did not become healthy")
			if tc.code == 0 {
				e.standIn(cp.nodes[1], tc.outcome, "")
			}
			r := p.wait()
			wantEnded(t, r, tc.code)
			if tc.code != 0 {
				wantStderr(t, r, "rollout 1 failed: node "+cp.nodes[0], tc.stderr)
				rec, _ := e.record()
				if rec.Status.Phase != rollout.Failed || !strings.Contains(rec.Status.Message, "node "+cp.nodes[0]) ||
					!strings.Contains(rec.Status.Message, "kube-apiserver did not become healthy") {
					t.Fatalf("the record says %s: %q", rec.Status.Phase, rec.Status.Message)
				}
				return
			}
			if !strings.Contains(r.stdout, "rollout 1 Succeeded: every node runs sha256:") ||
				!strings.Contains(r.stderr, "rollout 1: node "+cp.nodes[1]+" Updated (kube-apiserver)") {
				t.Fatalf("start --wait said %s", r)
			}
		})
	}
}

// TestRolloutUndoAfterAFailedFirstNode: patch --rollout, and the first node
// rolls itself back; the undo puts the document that was there before the
// patch back, byte for byte, and ends with no node to take back (none
// changed). Undone again, the patched document comes back. A document
// changed since the rollout is not overwritten without --force.
func TestRolloutUndoAfterAFailedFirstNode(t *testing.T) {
	e := newEnv(t)
	cp := e.fakeControlPlane(2)
	before := e.document()
	r := e.plugin("patch", "--no-backup", "--set", "apiServer.extraArgs.audit-log-maxage=7", "--rollout")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "kubeadm-config patched") || !strings.Contains(r.stdout, "rollout 1 started: sha256:") ||
		!strings.Contains(r.stdout, "(patch, resourceVersion "+e.configMapRV()+")") {
		t.Fatalf("patch --rollout said %s", r)
	}
	patched := e.document()
	if rec, _ := e.record(); string(rec.Target) != patched || string(rec.Previous) != before {
		t.Fatalf("the record does not pin the bytes written and replaced")
	}
	e.standIn(cp.nodes[0], rollout.NodeRolledBack, "kube-apiserver did not become healthy")

	// Someone changes kubeadm-config meanwhile: the undo is refused.
	wantExit(t, e.plugin("patch", "--no-backup", "--set", "clusterName=changed-since"), 0)
	changed, rv := e.document(), e.configMapRV()
	r = e.plugin("rollout", "undo")
	wantExit(t, r, 4)
	wantStderr(t, r, "no longer holds the target of rollout 1", "use --force to put the previous document back anyway")
	if e.document() != changed || e.configMapRV() != rv {
		t.Fatal("a refused undo wrote kubeadm-config")
	}
	if rec, _ := e.record(); rec.Status.ID != 1 {
		t.Fatalf("a refused undo wrote the record: rollout %d", rec.Status.ID)
	}

	r = e.plugin("rollout", "undo", "--force", "--wait", "--no-backup")
	wantEnded(t, r, 0)
	if !strings.Contains(r.stdout, "rollout 2 (undo) started: undoes rollout 1, back to sha256:") ||
		!strings.Contains(r.stdout, "no node (the document alone)") || !strings.Contains(r.stdout, "rollout 2 Succeeded") {
		t.Fatalf("undo said %s", r)
	}
	if got := e.document(); got != before {
		t.Fatalf("kubeadm-config after the undo:\n%s\nwant the document from before the patch:\n%s", got, before)
	}
	rec, _ := e.record()
	if rec.Status.Kind != rollout.KindUndo || !rec.Status.DocumentRestored || rec.History[len(rec.History)-1].Outcome != rollout.Succeeded {
		t.Fatalf("record after the undo: %+v", rec.Status)
	}
	// The undo of the undo brings the patched document back.
	wantExit(t, e.plugin("rollout", "undo", "--no-backup"), 0)
	if got := e.document(); got != patched {
		t.Fatalf("kubeadm-config after undoing the undo:\n%s\nwant\n%s", got, patched)
	}
}

// TestRolloutBadInput: nothing to undo, a record edited by hand into
// garbage, and bad flags: one clear line, a documented exit code, and
// nothing written.
func TestRolloutBadInput(t *testing.T) {
	e := newEnv(t)
	cp := e.fakeControlPlane(1)
	r := e.plugin("rollout", "undo")
	wantExit(t, r, 4)
	wantStderr(t, r, "nothing to undo: no rollout is recorded in configmap "+e.ns+"/kubeadmcfg-rollout")

	// The first rollout of the live document knows no previous one.
	wantExit(t, e.plugin("rollout", "start"), 0)
	wantExit(t, e.plugin("rollout", "pause"), 0)
	r = e.plugin("rollout", "undo")
	wantExit(t, r, 4)
	wantStderr(t, r, "nothing to undo: no previous document is recorded for rollout 1")
	r = e.plugin("rollout", "start", "--try", "1m")
	wantExit(t, r, 4)

	// Bad flags, refused before any call.
	for _, args := range [][]string{
		{"rollout", "start", "--canary", "-1"},
		{"rollout", "start", "--nodes", "Not_A_Node"},
		{"rollout", "start", "--nodes", cp.nodes[0] + "," + cp.nodes[0]},
		{"rollout", "start", "--try", "-5s"},
		{"rollout", "status", "--timeout", "-1s"},
		{"patch", "--set", "clusterName=x", "--wait"},
		{"restore", "--latest", "--to-file", "/nonexistent/f", "--rollout"},
		{"rollout", "start", "extra"},
		{"rollout"},
	} {
		wantExit(t, e.plugin(args...), 2)
	}

	// A record edited by hand into garbage: every verb says so, and
	// nothing is written, neither the record nor kubeadm-config.
	_, cm := e.record()
	cm.Data["status"] = "id: [1\nphase: Sideways\n"
	cm, err := s.admin.CoreV1().ConfigMaps(e.ns).Update(context.Background(), cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := e.configMapRV()
	for _, args := range [][]string{{"rollout", "status"}, {"rollout", "start"}, {"rollout", "pause"}, {"rollout", "resume"},
		{"rollout", "undo", "--force"}, {"rollout", "history"}, {"rollout", "status", "-w"},
		{"patch", "--no-backup", "--set", "clusterName=x", "--rollout"}} {
		r := e.plugin(args...)
		wantExit(t, r, 3)
		wantStderr(t, r, "the rollout record "+e.ns+"/kubeadmcfg-rollout is damaged: data.status: ", "; fix or delete it")
	}
	after, err := s.admin.CoreV1().ConfigMaps(e.ns).Get(context.Background(), rollout.DefaultConfigMap, metav1.GetOptions{})
	if err != nil || after.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("the damaged record was written: %v", err)
	}
	if e.configMapRV() != rv {
		t.Fatal("kubeadm-config was written")
	}
}
