package operator

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// These tests take one path each through Upgrades on a fake clientset;
// internal/e2e runs the same verbs against a real API server.

// changeUpgrade applies change to the stored record, as an agent or
// another verb would.
func changeUpgrade(t *testing.T, o *Upgrades, change func(rec *upgrade.Record)) {
	t.Helper()
	if _, err := o.write(context.Background(), upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
		change(rec)
		return true, nil
	}), nil); err != nil {
		t.Fatal(err)
	}
}

func eventReasons(t *testing.T, cs *fake.Clientset) []string {
	t.Helper()
	events, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

// TestApplyStartsTheAgentsUpgrade: one write records the upgrade from
// kubeadm-config's version in the plan's start state, the plan
// instantiated for the control-plane nodes, and the agents' part with every
// node before its first step; an Event says so. A second start is refused.
func TestApplyStartsTheAgentsUpgrade(t *testing.T) {
	ctx := context.Background()
	o, cs := upgradeReady("cp-1", "cp-0", "cp-2").operator(t)
	ch, err := o.Apply(ctx, ApplySpec{Version: "v1.37.2", Plan: kubeadmPlan(t), Reason: "quarterly"})
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := o.Read(ctx)
	if err != nil || !ch.Changed {
		t.Fatalf("changed %v, %v", ch.Changed, err)
	}
	if rec.State != upgrade.Started || rec.FromVersion != "v1.36.3" || rec.ToVersion != "v1.37.2" || rec.Reason != "quarterly" ||
		rec.PlanOf().Name != "kubeadm" || joinNames(rec.PlanOf().ControlPlaneNodes) != "cp-0, cp-1, cp-2" {
		t.Fatalf("record %+v, plan %s over %v", rec, rec.PlanOf().Name, rec.PlanOf().ControlPlaneNodes)
	}
	want := &upgrade.Agents{Version: "v1.37.2", By: "alice", StartedAt: "2026-11-30T12:00:05Z", Nodes: []upgrade.NodeProgress{{Node: "cp-0"}, {Node: "cp-1"}, {Node: "cp-2"}}}
	if diff := cmp.Diff(want, rec.Agents); diff != "" {
		t.Errorf("agents (-want +got)\n%s", diff)
	}
	if turn := rec.TurnOf("cp-0", upgrade.AgentRunnerPrefix("cp-0")+"1"); turn.Kind != upgrade.TurnStep || !turn.Apply || turn.Step != "upgrading-control-plane-cp-0" {
		t.Errorf("the first node's turn: %+v", turn)
	}
	wantEvents := []string{"UpgradeApplyStarted: upgrade from v1.36.3 to v1.37.2 started by alice, carried out by the agents of cp-0, cp-1, cp-2 (plan kubeadm)"}
	if diff := cmp.Diff(wantEvents, eventReasons(t, cs)); diff != "" {
		t.Errorf("events (-want +got)\n%s", diff)
	}
	_, err = o.Apply(ctx, ApplySpec{Version: "v1.37.2", Plan: kubeadmPlan(t)})
	wantErr(t, err, exitcode.Conflict, "preflight failed, nothing was started: an upgrade from v1.36.3 to v1.37.2 is in state upgrade-started; finish or abort it first")
}

// TestApplyRefusesARolloutStartedAfterThePreflight: the rollout record
// reads inactive in the preflight and active at the start's write (a
// rollout start in between): the start is refused, exit 4, and no upgrade
// is written.
func TestApplyRefusesARolloutStartedAfterThePreflight(t *testing.T) {
	ctx := context.Background()
	o, cs := upgradeReady("cp-0", "cp-1").operator(t)
	active := rollouttest.ConfigMap(t, rollouttest.Started(t, rollouttest.Spec()))
	reads := 0
	cs.PrependReactor("get", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() != rollout.DefaultConfigMap {
			return false, nil, nil
		}
		reads++
		if reads == 1 {
			return false, nil, nil // none recorded: the preflight passes
		}
		return true, active.DeepCopy(), nil
	})
	_, err := o.Apply(ctx, ApplySpec{Version: "v1.37.2", Plan: kubeadmPlan(t)})
	wantErr(t, err, exitcode.Conflict, "preflight failed, nothing was started: rollout 1 (rollout) is Progressing, started by alice: "+
		"the agents carry out one kind of work at a time; let it end first (it started after the preflight)")
	if reads < 2 {
		t.Errorf("the rollout record was read %d times, want once in the preflight and again in the write", reads)
	}
	if rec, _, err := o.Read(ctx); rec != nil || err != nil {
		t.Errorf("an upgrade was written: %+v, %v", rec, err)
	}
	for _, a := range cs.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" {
			t.Errorf("a refused start did %s %s", v, a.GetResource().Resource)
		}
	}
}

// TestApplyTheSeedSystemsPlan: the starlingx plan's masters are the first
// two nodes of the order given, and its steps with no node's work are
// left to the agents to pass.
func TestApplyTheSeedSystemsPlan(t *testing.T) {
	ctx := context.Background()
	o, _ := upgradeReady("controller-0", "controller-1").operator(t)
	p, err := upgrade.Builtin("starlingx")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Apply(ctx, ApplySpec{Version: "v1.37.2", Plan: p, Nodes: []string{"controller-1", "controller-0"}}); err != nil {
		t.Fatal(err)
	}
	rec, _, _ := o.Read(ctx)
	first, second := rec.PlanOf().StepOf(upgrade.UpgradingFirstMaster), rec.PlanOf().StepOf(upgrade.UpgradingSecondMaster)
	if first.Node != "controller-1" || second.Node != "controller-0" || joinNames(rec.PlanOf().WorkNodes()) != "controller-1, controller-0" {
		t.Fatalf("masters %s, %s; work nodes %v", first.Node, second.Node, rec.PlanOf().WorkNodes())
	}
	if turn := rec.TurnOf("controller-1", "agent/controller-1/1"); turn.Kind != upgrade.TurnPass || turn.Step != upgrade.DownloadingImages {
		t.Errorf("the first node's turn: %+v", turn)
	}
}

// TestResume: refused when nothing failed (and nothing is written), and
// when the upgrade is not the agents'; accepted after a step failed, once
// per call, each asking its agent to run the step again.
func TestResume(t *testing.T) {
	ctx := context.Background()
	o, cs := upgradeReady("cp-0", "cp-1").operator(t)
	_, err := o.Resume(ctx)
	wantErr(t, err, exitcode.NotFound, "no upgrade is recorded in configmap kube-system/kubeadmcfg-upgrade")
	if _, err := o.Apply(ctx, ApplySpec{Version: "v1.37.2", Plan: kubeadmPlan(t)}); err != nil {
		t.Fatal(err)
	}
	_, err = o.Resume(ctx)
	wantErr(t, err, exitcode.Conflict, "the upgrade is in upgrade-started, and no step or host failed: there is nothing to resume")
	changeUpgrade(t, o, func(rec *upgrade.Record) {
		stepFails(t, rec, "cp-0", upgrade.NodeFailed, "phase upgrade/kubelet-config failed")
	})
	for want := 1; want <= 2; want++ {
		ch, err := o.Resume(ctx)
		if err != nil || ch.Record.Agents.Resume != want {
			t.Fatalf("resume %d: %+v %v", want, ch, err)
		}
		if turn := ch.Record.TurnOf("cp-0", "agent/cp-0/1"); turn.Kind != upgrade.TurnStep || !turn.Retry {
			t.Errorf("after the resume, cp-0's turn: %+v", turn)
		}
	}
	got := eventReasons(t, cs)
	if len(got) != 3 || got[1] != "UpgradeResumed: upgrade to v1.37.2 resumed by alice (resume 1): the agent of cp-0 runs upgrading-control-plane-cp-0 again" {
		t.Errorf("events %q", got)
	}

	// Driven by hand: the agents have no step to run again.
	w := upgradeReady("cp-0")
	byHand, err := upgrade.Start(nil, nil, upgrade.Clock{Now: rollouttest.Base, By: "bob"}, "v1.36.3", "v1.36.4", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := byHand.Set(upgrade.Clock{Now: rollouttest.Base, By: "bob"}, upgrade.DownloadingImagesFailed, "", true, "by hand"); err != nil {
		t.Fatal(err)
	}
	w.objects = append(w.objects, upgradeRecord(t, byHand))
	o, _ = w.operator(t)
	_, err = o.Resume(ctx)
	wantErr(t, err, exitcode.Conflict, "the upgrade from v1.36.3 to v1.36.4 is not carried out by the agents (upgrade-apply): run its failed step again with upgrade-run")
}

// TestResumeWarnsOfALostAgent: the step runs again only once its agent is
// back; the resume says so.
func TestResumeWarnsOfALostAgent(t *testing.T) {
	ctx := context.Background()
	w := upgradeReady("cp-0", "cp-1")
	o, cs := w.operator(t)
	if _, err := o.Apply(ctx, ApplySpec{Version: "v1.37.2", Plan: kubeadmPlan(t)}); err != nil {
		t.Fatal(err)
	}
	changeUpgrade(t, o, func(rec *upgrade.Record) {
		stepFails(t, rec, "cp-0", upgrade.NodeFailed, "x")
	})
	if err := cs.CoordinationV1().Leases(ns).Delete(ctx, "kubeadmcfg-agent-cp-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ch, err := o.Resume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"node cp-0: no agent (no Lease kubeadmcfg-agent-cp-0); upgrading-control-plane-cp-0 runs again once its agent is back"}
	if diff := cmp.Diff(want, ch.Warnings); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// TestFailAndAbortStopTheAgents: upgrade-fail and the plan's abort work on
// an upgrade the agents carry out, as on one driven by hand, and once the
// upgrade is failed or aborting no agent has a turn; after a fail, a
// resume gives the failed step's agent its turn back.
func TestFailAndAbortStopTheAgents(t *testing.T) {
	ctx := context.Background()
	nodes := []string{"cp-0", "cp-1", "cp-2"}
	o, _ := upgradeReady(nodes...).operator(t)
	if _, err := o.Apply(ctx, ApplySpec{Version: "v1.37.2", Plan: kubeadmPlan(t)}); err != nil {
		t.Fatal(err)
	}
	noTurns := func(rec *upgrade.Record, when string) {
		t.Helper()
		for _, n := range nodes {
			if turn := rec.TurnOf(n, upgrade.AgentRunnerPrefix(n)+"2"); turn.Kind != upgrade.TurnNone {
				t.Errorf("%s: %s has a turn: %+v", when, n, turn)
			}
		}
	}
	// cp-0's agent is in its step when an operator fails it.
	changeUpgrade(t, o, func(rec *upgrade.Record) { stepBegins(t, rec, "cp-0", "control-plane") })
	changeUpgrade(t, o, func(rec *upgrade.Record) {
		if _, err := rec.Fail(upgrade.Clock{Now: rollouttest.Base, By: "bob"}, "forced to failed by bob"); err != nil {
			t.Fatal(err)
		}
	})
	rec, _, _ := o.Read(ctx)
	if rec.State != "upgrading-control-plane-cp-0-failed" || len(rec.Runners) != 0 || len(rec.Lost) != 1 {
		t.Fatalf("after the fail: %s, runners %v, lost %v", rec.State, rec.Runners, rec.Lost)
	}
	noTurns(rec, "failed")
	// The agent's late report is refused: the step was taken from it.
	if _, err := rec.EndRun(upgrade.Clock{Now: rollouttest.Base, By: "agent"}, upgrade.AgentRunnerPrefix("cp-0")+"1", true, ""); exitcode.FromError(err) != exitcode.Conflict {
		t.Errorf("the agent's late success: %v", err)
	}
	ch, err := o.Resume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if turn := ch.Record.TurnOf("cp-0", upgrade.AgentRunnerPrefix("cp-0")+"2"); turn.Kind != upgrade.TurnStep || !turn.Retry {
		t.Errorf("after the resume: %+v", turn)
	}
	changeUpgrade(t, o, func(rec *upgrade.Record) {
		if _, err := rec.Set(upgrade.Clock{Now: rollouttest.Base, By: "bob"}, upgrade.Aborting, "", false, "abandoned"); err != nil {
			t.Fatal(err)
		}
	})
	rec, _, _ = o.Read(ctx)
	noTurns(rec, "aborting")
}

// stepBegins has node's agent begin its turn's step, as the agent does:
// the runner and the first phase in one write.
func stepBegins(t *testing.T, rec *upgrade.Record, node, phase string) (step, host string) {
	t.Helper()
	self := upgrade.AgentRunnerPrefix(node) + "1"
	turn := rec.TurnOf(node, self)
	c := upgrade.Clock{Now: rollouttest.TS(10), By: self}
	switch turn.Kind {
	case upgrade.TurnStep:
		step = string(turn.Step)
	case upgrade.TurnKubelet:
		step, host = string(turn.Host), node
	default:
		t.Fatalf("%s has no step to run: %+v", node, turn)
	}
	if _, err := rec.BeginRun(c, upgrade.Run{ID: self, Step: step, Host: host, Command: "kubeadm"}); err != nil {
		t.Fatal(err)
	}
	rec.Agents.BeginPhase(c, node, step, phase)
	return step, host
}

// stepFails has node's agent run its turn's step and fail it with outcome
// (NodeRolledBack, NodeRollbackFailed, NodeFailed) and message, in one
// write, as the agent records a failure.
func stepFails(t *testing.T, rec *upgrade.Record, node, outcome, message string) {
	t.Helper()
	step, _ := stepBegins(t, rec, node, "control-plane")
	c := upgrade.Clock{Now: rollouttest.TS(20), By: "agent"}
	reason := upgrade.PhaseFailure(node, step, "control-plane", "exit status 1", message)
	if _, err := rec.EndRun(c, upgrade.AgentRunnerPrefix(node)+"1", false, reason); err != nil {
		t.Fatal(err)
	}
	rec.Agents.EndNode(node, outcome, reason)
}

// stepDone has node's agent run its turn's step to its end.
func stepDone(t *testing.T, rec *upgrade.Record, node string) {
	t.Helper()
	stepBegins(t, rec, node, "control-plane")
	c := upgrade.Clock{Now: rollouttest.TS(20), By: "agent"}
	if _, err := rec.EndRun(c, upgrade.AgentRunnerPrefix(node)+"1", true, ""); err != nil {
		t.Fatal(err)
	}
	rec.Agents.EndNode(node, upgrade.NodeDone, "")
}

// enterKubelets has the first node's agent move the upgrade into the
// kubelets' step, and complete has the last node's end it.
func enterKubelets(t *testing.T, rec *upgrade.Record) {
	t.Helper()
	turn := rec.TurnOf(rec.PlanOf().WorkNodes()[0], "agent")
	if turn.Kind != upgrade.TurnEnter {
		t.Fatalf("not the kubelets' turn: %+v", turn)
	}
	if _, err := rec.Set(upgrade.Clock{Now: rollouttest.TS(30), By: "agent"}, turn.Step, "", false, ""); err != nil {
		t.Fatal(err)
	}
}

func complete(t *testing.T, rec *upgrade.Record) {
	t.Helper()
	nodes := rec.PlanOf().WorkNodes()
	if turn := rec.TurnOf(nodes[len(nodes)-1], "agent"); turn.Kind != upgrade.TurnComplete {
		t.Fatalf("not complete yet: %+v", turn)
	}
	if _, err := rec.Set(upgrade.Clock{Now: rollouttest.TS(40), By: "agent"}, upgrade.Complete, "", false, "every node"); err != nil {
		t.Fatal(err)
	}
}

// agentsRecord is an upgrade to v1.37.2 the agents carry out over nodes
// with the kubeadm plan, as Apply writes it.
func agentsRecord(t *testing.T, nodes ...string) *upgrade.Record {
	t.Helper()
	p, err := kubeadmPlan(t).Instantiate(nodes)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AssignNodes(nodes); err != nil {
		t.Fatal(err)
	}
	c := upgrade.Clock{Now: rollouttest.TS(5), By: "alice"}
	rec, err := upgrade.Start(nil, p, c, "v1.36.3", "v1.37.2", "")
	if err != nil {
		t.Fatal(err)
	}
	rec.Agents = upgrade.NewAgents(c, "v1.37.2", p)
	return rec
}
