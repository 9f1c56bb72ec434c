package upgrade

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// agentsUpgrade is an upgrade to v1.37.2 the agents carry out over nodes
// with the built-in plan name.
func agentsUpgrade(t *testing.T, name string, nodes ...string) (*Record, *Agents) {
	t.Helper()
	p, err := Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = p.Instantiate(nodes); err != nil {
		t.Fatal(err)
	}
	if err := p.AssignNodes(nodes); err != nil {
		t.Fatal(err)
	}
	rec, err := Start(nil, p, at(0), "v1.36.3", "v1.37.2", "upgrade-apply")
	if err != nil {
		t.Fatal(err)
	}
	rec.Agents = NewAgents(at(0), "v1.37.2", p)
	return rec, rec.Agents
}

// play has each node's agent take its turn, as the agents would, until no
// node has one; fail says which node's step (or kubelet) fails. It returns
// what each agent did, in order.
func play(t *testing.T, rec *Record, a *Agents, nodes []string, fail map[string]bool) []string {
	t.Helper()
	var did []string
	for range 100 {
		acted := false
		for _, n := range nodes {
			self := AgentRunnerPrefix(n) + "1"
			turn := rec.TurnOf(n, self)
			if turn.Kind == TurnNone {
				continue
			}
			acted = true
			c := at(int64(len(did) + 1))
			c.By = self
			switch turn.Kind {
			case TurnStep, TurnKubelet:
				step, host := string(turn.Step), ""
				if turn.Kind == TurnKubelet {
					step, host = string(turn.Host), n
				}
				if _, err := rec.BeginRun(c, Run{ID: self, Step: step, Host: host, Leases: leases}); err != nil {
					t.Fatalf("%s: begin %s: %v", n, step, err)
				}
				a.BeginPhase(c, n, step, "all")
				ok := !fail[n+"/"+step]
				if _, err := rec.EndRun(c, self, ok, ""); err != nil {
					t.Fatalf("%s: end %s: %v", n, step, err)
				}
				outcome := NodeDone
				if !ok {
					outcome = NodeFailed
				}
				a.EndNode(n, outcome, "")
				verb := map[bool]string{true: "apply", false: "node"}[turn.Apply]
				if turn.Kind == TurnKubelet {
					verb = "kubelet"
				}
				did = append(did, fmt.Sprintf("%s %s %s %s", n, verb, step, outcome))
			case TurnEnter:
				if _, err := rec.Set(c, turn.Step, "", false, "agents"); err != nil {
					t.Fatalf("%s: enter %s: %v", n, turn.Step, err)
				}
				did = append(did, fmt.Sprintf("%s enter %s", n, turn.Step))
			case TurnPass:
				st := rec.plan().StepOf(turn.Step)
				if _, err := rec.Set(c, st.Name, "", false, "agents"); err != nil {
					t.Fatal(err)
				}
				if _, err := rec.Set(c, st.Reaches, "", false, "no kubeadm work"); err != nil {
					t.Fatal(err)
				}
				did = append(did, fmt.Sprintf("%s pass %s", n, turn.Step))
			case TurnComplete:
				if _, err := rec.Set(c, rec.plan().Complete, "", false, "every node"); err != nil {
					t.Fatal(err)
				}
				did = append(did, n+" complete")
			}
			break // one act at a time, then everyone looks again
		}
		if !acted {
			return did
		}
	}
	t.Fatalf("the agents never stopped: %v", did)
	return nil
}

// The agents carry a kubeadm upgrade out in the plan's order, one node at a
// time: apply on the first node, node on the others, then each kubelet,
// then the last node completes it.
func TestTurnOfFollowsThePlan(t *testing.T) {
	nodes := []string{"cp-0", "cp-1", "cp-2"}
	rec, a := agentsUpgrade(t, "kubeadm", nodes...)
	want := []string{
		"cp-0 apply upgrading-control-plane-cp-0 Done",
		"cp-1 node upgrading-control-plane-cp-1 Done",
		"cp-2 node upgrading-control-plane-cp-2 Done",
		"cp-0 enter upgrading-kubelets",
		"cp-0 kubelet upgrading-kubelet Done",
		"cp-1 kubelet upgrading-kubelet Done",
		"cp-2 kubelet upgrading-kubelet Done",
		"cp-2 complete",
	}
	if diff := cmp.Diff(want, play(t, rec, a, nodes, nil)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if rec.State != Complete {
		t.Errorf("state %s", rec.State)
	}
}

// The seed system's plan with two controllers: the steps that are no
// node's kubeadm work are recorded as passed by the first node's agent,
// the optional ones skipped.
func TestTurnOfFollowsTheSeedSystemsPlan(t *testing.T) {
	nodes := []string{"controller-0", "controller-1"}
	rec, a := agentsUpgrade(t, "starlingx", nodes...)
	want := []string{
		"controller-0 pass downloading-images",
		"controller-0 pass upgrading-networking",
		"controller-0 pass upgrading-storage",
		"controller-0 apply upgrading-first-master Done",
		"controller-1 node upgrading-second-master Done",
		"controller-0 enter upgrading-kubelets",
		"controller-0 kubelet upgrading-kubelet Done",
		"controller-1 kubelet upgrading-kubelet Done",
		"controller-1 complete",
	}
	if diff := cmp.Diff(want, play(t, rec, a, nodes, nil)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	// One controller: the second master is skipped.
	rec, a = agentsUpgrade(t, "starlingx", "controller-0")
	if got := play(t, rec, a, []string{"controller-0"}, nil); !slices.Contains(got, "controller-0 apply upgrading-first-master Done") ||
		slices.ContainsFunc(got, func(s string) bool { return s == "controller-0 node upgrading-second-master Done" }) || rec.State != Complete {
		t.Errorf("one controller: %v, %s", got, rec.State)
	}
}

// A failed step stops the upgrade: the nodes after it are untouched, and
// nothing goes on until upgrade-resume, after which the failed step is run
// again, once.
func TestTurnOfStopsAtAFailureUntilResumed(t *testing.T) {
	nodes := []string{"cp-0", "cp-1", "cp-2"}
	rec, a := agentsUpgrade(t, "kubeadm", nodes...)
	fail := map[string]bool{"cp-1/upgrading-control-plane-cp-1": true}
	got := play(t, rec, a, nodes, fail)
	want := []string{"cp-0 apply upgrading-control-plane-cp-0 Done", "cp-1 node upgrading-control-plane-cp-1 Failed"}
	if diff := cmp.Diff(want, got); diff != "" || rec.State != "upgrading-control-plane-cp-1-failed" {
		t.Fatalf("%s (-want +got)\n%s", rec.State, diff)
	}
	if err := rec.Resumed(); err != nil {
		t.Fatal(err)
	}
	delete(fail, "cp-1/upgrading-control-plane-cp-1")
	fail["cp-2/upgrading-kubelet"] = true
	got = play(t, rec, a, nodes, fail)
	want = []string{
		"cp-1 node upgrading-control-plane-cp-1 Done",
		"cp-2 node upgrading-control-plane-cp-2 Done",
		"cp-0 enter upgrading-kubelets",
		"cp-0 kubelet upgrading-kubelet Done",
		"cp-1 kubelet upgrading-kubelet Done",
		"cp-2 kubelet upgrading-kubelet Failed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	if err := rec.Resumed(); err != nil {
		t.Fatal(err)
	}
	delete(fail, "cp-2/upgrading-kubelet")
	if got := play(t, rec, a, nodes, fail); !cmp.Equal(got, []string{"cp-2 kubelet upgrading-kubelet Done", "cp-2 complete"}) {
		t.Fatalf("after the second resume: %v", got)
	}
}

// A step left in progress by an agent of the node that died is its
// node's next agent's to take over; a step run by hand is not.
func TestTurnOfTakesOverAnEarlierAgentsStep(t *testing.T) {
	rec, _ := agentsUpgrade(t, "kubeadm", "cp-0", "cp-1")
	if _, err := rec.BeginRun(at(1), Run{ID: "agent/cp-0/1", Step: "upgrading-control-plane-cp-0", Leases: leases}); err != nil {
		t.Fatal(err)
	}
	turn := rec.TurnOf("cp-0", "agent/cp-0/2")
	if turn.Kind != TurnStep || turn.Lost == nil || turn.Lost.ID != "agent/cp-0/1" || !turn.Apply {
		t.Errorf("restarted agent: %+v", turn)
	}
	if turn := rec.TurnOf("cp-0", "agent/cp-0/1"); turn.Kind != TurnNone {
		t.Errorf("the agent running it: %+v", turn)
	}
	if turn := rec.TurnOf("cp-1", "agent/cp-1/1"); turn.Kind != TurnNone {
		t.Errorf("another node: %+v", turn)
	}
	rec, _ = agentsUpgrade(t, "kubeadm", "cp-0", "cp-1")
	if _, err := rec.BeginRun(at(1), Run{ID: "alice/1", Step: "upgrading-control-plane-cp-0", Leases: leases}); err != nil {
		t.Fatal(err)
	}
	if turn := rec.TurnOf("cp-0", "agent/cp-0/2"); turn.Kind != TurnNone {
		t.Errorf("a run by hand: %+v", turn)
	}
}

// A run of the node's agent that is no longer under way although the
// record says it is (its end could not be recorded) is handed back to the
// same agent as lost, in a control-plane step and in a kubelet's, so that
// it records the outcome instead of leaving the step in progress for ever;
// the run under way is left alone.
func TestTurnOfHandsBackARunNoLongerUnderWay(t *testing.T) {
	rec, _ := agentsUpgrade(t, "kubeadm", "cp-0", "cp-1")
	self := "agent/cp-0/1"
	if _, err := rec.BeginRun(at(1), Run{ID: self, Step: "upgrading-control-plane-cp-0", Leases: leases}); err != nil {
		t.Fatal(err)
	}
	if turn := rec.TurnOf("cp-0", ""); turn.Kind != TurnStep || turn.Lost == nil || turn.Lost.ID != self {
		t.Errorf("control plane, no run under way: %+v", turn)
	}
	if turn := rec.TurnOf("cp-0", self); turn.Kind != TurnNone {
		t.Errorf("control plane, its run under way: %+v", turn)
	}
	if turn := rec.TurnOf("cp-1", ""); turn.Kind != TurnNone {
		t.Errorf("another node: %+v", turn)
	}

	rec, a := agentsUpgrade(t, "kubeadm", "cp-0", "cp-1")
	play(t, rec, a, []string{"cp-0", "cp-1"}, map[string]bool{"cp-0/upgrading-kubelet": true})
	if err := rec.Resumed(); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.BeginRun(at(50), Run{ID: self, Step: string(HostUpgradingKubelet), Host: "cp-0", Leases: leases}); err != nil {
		t.Fatal(err)
	}
	a.BeginPhase(at(50), "cp-0", string(HostUpgradingKubelet), "kubelet")
	if turn := rec.TurnOf("cp-0", ""); turn.Kind != TurnKubelet || turn.Lost == nil || turn.Lost.ID != self {
		t.Errorf("kubelet, no run under way: %+v", turn)
	}
	if turn := rec.TurnOf("cp-0", self); turn.Kind != TurnNone {
		t.Errorf("kubelet, its run under way: %+v", turn)
	}
}

// An upgrade driven by hand is never the agents', nor one over or aborting.
func TestTurnOfOnlyForTheAgentsUpgrade(t *testing.T) {
	rec, _ := agentsUpgrade(t, "kubeadm", "cp-0")
	byHand := *rec
	byHand.Agents = nil
	if turn := byHand.TurnOf("cp-0", "agent/cp-0/1"); turn.Kind != TurnNone {
		t.Errorf("driven by hand: %+v", turn)
	}
	if _, err := rec.Set(at(1), Aborting, "", false, "operator"); err != nil {
		t.Fatal(err)
	}
	if turn := rec.TurnOf("cp-0", "agent/cp-0/1"); turn.Kind != TurnNone {
		t.Errorf("aborting: %+v", turn)
	}
}

// Where each node is travels with the record, in its own annotation, and a
// new upgrade started by hand does not carry the agents' over.
func TestAgentsRoundTrip(t *testing.T) {
	rec, a := agentsUpgrade(t, "kubeadm", "cp-0", "cp-1")
	a.BeginPhase(at(5), "cp-0", "upgrading-control-plane-cp-0", "control-plane")
	a.EndNode("cp-0", NodeFailed, PhaseFailure("cp-0", "upgrading-control-plane-cp-0", "control-plane", "exit status 1", "[upgrade/staticpods] timed out"))
	ann := map[string]string{}
	if err := rec.Encode(ann); err != nil {
		t.Fatal(err)
	}
	back, _, err := Decode(ann)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec.Agents, back.Agents); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if got := back.Agents.Progress("cp-0").Message; got != "node cp-0: upgrading-control-plane-cp-0: phase control-plane failed: exit status 1; last output: [upgrade/staticpods] timed out" {
		t.Errorf("message %q", got)
	}
	if _, err := back.Set(at(6), Aborting, "", false, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := back.Set(at(7), Aborted, "", false, "x"); err != nil {
		t.Fatal(err)
	}
	next, err := Start(back, nil, at(8), "v1.37.2", "v1.37.3", "by hand")
	if err != nil || next.Agents != nil {
		t.Fatalf("a new upgrade by hand: %v, %+v", err, next.Agents)
	}
	if err := next.Encode(ann); err != nil {
		t.Fatal(err)
	}
	if _, ok := ann[KeyApply]; ok {
		t.Error("the agents' annotation stayed on an upgrade by hand")
	}
}

// A later agent takes its node's step over from the earlier one it
// replaces: not while the earlier one's kubeadm still runs, and the
// earlier runner is kept as lost.
func TestTakeOver(t *testing.T) {
	rec, _ := agentsUpgrade(t, "kubeadm", "cp-0", "cp-1")
	step := "upgrading-control-plane-cp-0"
	if _, err := rec.BeginRun(at(1), Run{ID: "agent/cp-0/1", Step: step, Leases: leases}); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.RecordProcess("agent/cp-0/1", Process{PID: 41, StartTicks: 7, BootID: "b", PIDNamespace: "p"}); err != nil {
		t.Fatal(err)
	}
	running := func(Process) CommandState { return CommandRunning }
	try := *rec
	try.Runners, try.Lost = slices.Clone(rec.Runners), slices.Clone(rec.Lost)
	if _, err := try.TakeOver(at(2), "agent/cp-0/1", Run{ID: "agent/cp-0/2", Step: step, Leases: leases, Check: running}); err == nil {
		t.Fatal("taken over while the earlier kubeadm runs")
	}
	ended := func(Process) CommandState { return CommandEnded }
	rn, err := rec.TakeOver(at(2), "agent/cp-0/1", Run{ID: "agent/cp-0/2", Step: step, Leases: leases, Check: ended})
	if err != nil || rn.ID != "agent/cp-0/2" || rec.State != State(step) || len(rec.Runners) != 1 || rec.Runners[0].ID != "agent/cp-0/2" {
		t.Fatalf("take over: %v %+v %+v", err, rn, rec.Runners)
	}
	if _, err := rec.TakeOver(at(3), "agent/cp-0/1", Run{ID: "agent/cp-0/3", Step: step, Leases: leases}); err == nil {
		t.Error("a second take-over of a runner already lost")
	}
}
