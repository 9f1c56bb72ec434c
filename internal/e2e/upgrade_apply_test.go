package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// upgrade-apply's operator side against a real API server, through the
// built plugin and the real kubectl: what its preflight refuses, what its
// start writes, upgrade-status and upgrade-resume, and how --wait ends. The
// agents are stand-ins that move the record as the design says they do;
// the tests with real agents and the real kubeadm are the harness's.

// readyState is what an agent ready for an upgrade to v1.37.2 publishes.
var readyState = nodestate.State{KubeadmVersions: []string{"v1.36.3", "v1.37.2"}, Etcd: &nodestate.EtcdHealth{Member: "m", Healthy: true}}

// upgradeReady is a test's cluster at v1.36.3 (its kubeadm-config and
// every kubelet) with n control-plane nodes whose agents are alive, find
// kubeadm v1.37.2 and a healthy etcd member.
func upgradeReady(t *testing.T, n int) (*env, *fakeNodes) {
	t.Helper()
	e := newEnvWith(t, map[string]string{"ClusterConfiguration": strings.Replace(s.seedDoc, "kubernetesVersion: v1.37.2", "kubernetesVersion: v1.36.3", 1)})
	if !strings.Contains(e.document(), "kubernetesVersion: v1.36.3") {
		t.Fatalf("the seed document has no kubernetesVersion v1.37.2 to replace:\n%s", s.seedDoc)
	}
	cp := e.fakeControlPlane(n)
	for _, node := range cp.nodes {
		cp.setKubelet(node, "v1.36.3")
		cp.publish(node, readyState)
	}
	return e, cp
}

// setKubelet has node report kubelet as its kubelet's version, as the
// kubelet does in the Node's status.
func (cp *fakeNodes) setKubelet(node, kubelet string) {
	t := cp.e.t
	ctx := context.Background()
	n, err := s.admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.NodeInfo.KubeletVersion = kubelet
	if _, err := s.admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// upgradeRecord reads the upgrade record; nil when there is none.
func (e *env) upgradeRecord() *upgrade.Record {
	e.t.Helper()
	cm, err := s.admin.CoreV1().ConfigMaps(e.ns).Get(context.Background(), upgrade.DefaultConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	rec, _, err := upgrade.FromConfigMap(cm)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// changeUpgrade applies change to the upgrade record with compare-and-swap.
func (e *env) changeUpgrade(change func(rec *upgrade.Record)) {
	e.t.Helper()
	cms := s.admin.CoreV1().ConfigMaps(e.ns)
	for {
		cm, err := cms.Get(context.Background(), upgrade.DefaultConfigMap, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		if _, err := upgrade.Apply(cm, upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
			change(rec)
			return true, nil
		})); err != nil {
			e.t.Fatal(err)
		}
		_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		return
	}
}

// agentTurn has node's agent take its turn as the design says agents do,
// each a compare-and-swap write of the record: a step (or its kubelet)
// begun in phase ("": control-plane, or kubelet for a kubelet), then ended with outcome (upgrade.NodeDone, or a failure
// with message, recorded with the -failed state in one write); moving the
// upgrade into the kubelets' step; completing it. It returns the kind of
// turn taken (TurnNone: the node had none).
func (e *env) agentTurn(node, phase, outcome, message string) upgrade.TurnKind {
	e.t.Helper()
	self := upgrade.AgentRunnerPrefix(node) + "stand-in"
	clock := func() upgrade.Clock { return upgrade.Clock{Now: time.Now(), By: self} }
	var turn upgrade.Turn
	var step, host string
	e.changeUpgrade(func(rec *upgrade.Record) {
		turn = rec.TurnOf(node, self)
		var err error
		switch turn.Kind {
		case upgrade.TurnStep, upgrade.TurnKubelet:
			step = string(turn.Step)
			if phase == "" {
				phase = "control-plane"
			}
			if turn.Kind == upgrade.TurnKubelet {
				step, host = string(turn.Host), node
				if phase == "control-plane" {
					phase = "kubelet"
				}
			}
			if _, err = rec.BeginRun(clock(), upgrade.Run{ID: self, Step: step, Host: host, Command: "kubeadm"}); err == nil {
				rec.Agents.BeginPhase(clock(), node, step, phase)
			}
		case upgrade.TurnEnter:
			_, err = rec.Set(clock(), turn.Step, "", false, "")
		case upgrade.TurnComplete:
			_, err = rec.Set(clock(), rec.PlanOf().Complete, "", false, "every node runs "+rec.ToVersion)
		}
		if err != nil {
			e.t.Fatalf("%s's turn %+v: %v", node, turn, err)
		}
	})
	if turn.Kind != upgrade.TurnStep && turn.Kind != upgrade.TurnKubelet {
		return turn.Kind
	}
	e.changeUpgrade(func(rec *upgrade.Record) {
		reason := ""
		if outcome != upgrade.NodeDone {
			reason = upgrade.PhaseFailure(node, step, phase, "exit status 1", message)
		}
		if _, err := rec.EndRun(clock(), self, outcome == upgrade.NodeDone, reason); err != nil {
			e.t.Fatalf("%s: end %s: %v", node, step, err)
		}
		rec.Agents.EndNode(node, outcome, reason)
	})
	return turn.Kind
}

// agentsFinish has the agents take every turn to the end, each step Done.
func (e *env) agentsFinish(nodes []string) {
	e.t.Helper()
	for range 50 {
		acted := false
		for _, n := range nodes {
			if e.agentTurn(n, "", upgrade.NodeDone, "") != upgrade.TurnNone {
				acted = true
				break
			}
		}
		if !acted {
			return
		}
	}
	e.t.Fatal("the stand-in agents never stopped")
}

// wantNoUpgrade fails the test when an upgrade record was written.
func (e *env) wantNoUpgrade() {
	e.t.Helper()
	if rec := e.upgradeRecord(); rec != nil {
		e.t.Fatalf("an upgrade was recorded: %s to %s in %s", rec.FromVersion, rec.ToVersion, rec.State)
	}
}

// TestUpgradeApplyPreflightRefusals: each refusal exits 4, names its
// node or rule, and writes nothing.
func TestUpgradeApplyPreflightRefusals(t *testing.T) {
	e, cp := upgradeReady(t, 3)
	n0, n1, n2 := cp.nodes[0], cp.nodes[1], cp.nodes[2]
	refused := func(version string, subs ...string) {
		t.Helper()
		r := e.plugin("upgrade-apply", version)
		wantEnded(t, r, 4) // what the preflight waited for, then why it refused
		wantStderr(t, r, append([]string{"error: preflight failed, nothing was started: "}, subs...)...)
		e.wantNoUpgrade()
	}

	cp.publish(n1, nodestate.State{KubeadmVersions: []string{"v1.36.3"}, Etcd: readyState.Etcd})
	refused("v1.37.2", "node "+n1+": no kubeadm v1.37.2 (its agent finds v1.36.3)")
	cp.publish(n1, readyState)

	refused("v1.38.0", "v1.38.0 is 2 minor versions ahead of kubeadm-config's kubernetesVersion v1.36.3: kubeadm upgrades one minor version at a time (to v1.37 first)")

	// Renewed 2m30s ago by this clock, its Lease lasting 2s: watched that
	// long, unchanged, the agent is lost (see TestRolloutPreflightRefusals).
	cp.setAgent(n2, func(l *coordinationv1.Lease) {
		seconds := int32(2)
		l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &metav1.MicroTime{Time: time.Now().Add(-150 * time.Second)}, &seconds
	})
	refused("v1.37.2", "preflight: waiting for node "+n2+": its agent looks lost by the API server's clock: watching its Lease for up to 2s",
		"node "+n2+": its agent is lost (last seen 2m", "its Lease did not change in the 2s watched)")
	cp.setAgent(n2, func(l *coordinationv1.Lease) {
		l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &metav1.MicroTime{Time: time.Now()}, nil
	})

	cp.publish(n0, nodestate.State{KubeadmVersions: readyState.KubeadmVersions, Etcd: &nodestate.EtcdHealth{Member: n0, Error: "etcdserver: request timed out"}})
	refused("v1.37.2", "node "+n0+": its etcd member "+n0+" is not healthy: etcdserver: request timed out")
	cp.publish(n0, readyState)

	cp.setKubelet(n2, "v1.33.4")
	refused("v1.37.2", "the kubelet of node "+n2+" is v1.33.4, more than 3 minor versions older than v1.37.2, which kubeadm refuses: upgrade it first")
	cp.setKubelet(n2, "v1.36.3")

	wantExit(t, e.plugin("rollout", "start"), 0)
	refused("v1.37.2", "rollout 1 (rollout) is Progressing, started by ")
}

// TestUpgradeApplyConcurrentStarts: four starts at once, against no record:
// exactly one creates it and wins; every other exits 4 naming the upgrade
// in progress, whether its preflight saw the winner's write or its own
// write lost the compare-and-swap. Counted by exit codes and Events.
func TestUpgradeApplyConcurrentStarts(t *testing.T) {
	e, _ := upgradeReady(t, 2)
	const starts = 4
	results := make([]result, starts)
	var wg sync.WaitGroup
	for i := range starts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.plugin("upgrade-apply", "v1.37.2", "--identity", "starter-"+string(rune('a'+i)))
		}()
	}
	wg.Wait()
	won := 0
	for _, r := range results {
		switch r.code {
		case 0:
			won++
		case 4:
			wantStderr(t, r, "an upgrade from v1.36.3 to v1.37.2 is in state upgrade-started; finish or abort it first")
		default:
			t.Errorf("want exit 0 or 4, got %s", r)
		}
	}
	events, err := s.admin.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + upgrade.DefaultConfigMap})
	if won != 1 || err != nil || len(events.Items) != 1 {
		t.Fatalf("%d starts won, %d Events (%v); want one of each", won, len(events.Items), err)
	}
}

// upgradeStatusJSON is what upgrade-apply's part of upgrade-status -o json
// holds.
type upgradeStatusJSON struct {
	State      string            `json:"state"`
	Agents     *upgrade.Agents   `json:"agents"`
	NodeAgents []nodestate.Agent `json:"nodeAgents"`
}

// TestUpgradeApplyStatusAndResume: a start that passes writes the record as
// the design says (the agents' part, the plan over the control-plane
// nodes, an Event); upgrade-status shows each node and its agent;
// upgrade-resume refuses while nothing failed, and after upgrade-fail asks
// the failed step's agent to run it again; the plan's abort stops the
// agents.
func TestUpgradeApplyStatusAndResume(t *testing.T) {
	e, cp := upgradeReady(t, 3)
	n0, n1, n2 := cp.nodes[0], cp.nodes[1], cp.nodes[2]
	r := e.plugin("upgrade-apply", "v1.37.2", "--identity", "alice")
	wantExit(t, r, 0)
	if want := "upgrade started: v1.36.3 -> v1.37.2, state upgrade-started, plan kubeadm; carried out by the agents of " + n0 + ", " + n1 + ", " + n2 + "\n"; r.stdout != want {
		t.Fatalf("upgrade-apply said %q, want %q", r.stdout, want)
	}
	rec := e.upgradeRecord()
	if rec.State != upgrade.Started || rec.FromVersion != "v1.36.3" || rec.ToVersion != "v1.37.2" || rec.PlanOf().Name != "kubeadm" ||
		strings.Join(rec.PlanOf().ControlPlaneNodes, ",") != strings.Join(cp.nodes, ",") {
		t.Fatalf("record: %s %s -> %s, plan %s over %v", rec.State, rec.FromVersion, rec.ToVersion, rec.PlanOf().Name, rec.PlanOf().ControlPlaneNodes)
	}
	if a := rec.Agents; a == nil || a.Version != "v1.37.2" || a.By != "alice" || a.Resume != 0 || len(a.Nodes) != 3 || a.Nodes[0].Node != n0 || a.Nodes[0].Outcome != "" {
		t.Fatalf("the agents' part: %+v", rec.Agents)
	}
	if turn := rec.TurnOf(n0, upgrade.AgentRunnerPrefix(n0)+"1"); turn.Kind != upgrade.TurnStep || !turn.Apply {
		t.Fatalf("the first node's agent has no turn to run kubeadm upgrade apply: %+v", turn)
	}
	events, err := s.admin.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + upgrade.DefaultConfigMap})
	if err != nil || len(events.Items) != 1 || events.Items[0].Reason != "UpgradeApplyStarted" {
		t.Fatalf("events %+v %v", events, err)
	}
	r = e.plugin("upgrade-apply", "v1.37.2")
	wantExit(t, r, 4)
	wantStderr(t, r, "an upgrade from v1.36.3 to v1.37.2 is in state upgrade-started; finish or abort it first")

	// The first node's agent begins its step.
	e.changeUpgrade(func(rec *upgrade.Record) {
		self := upgrade.AgentRunnerPrefix(n0) + "1"
		c := upgrade.Clock{Now: time.Now(), By: self}
		if _, err := rec.BeginRun(c, upgrade.Run{ID: self, Step: "upgrading-control-plane-" + n0, Command: "kubeadm upgrade apply phase preflight"}); err != nil {
			t.Fatal(err)
		}
		rec.Agents.BeginPhase(c, n0, "upgrading-control-plane-"+n0, "preflight")
	})
	cp.removeAgent(n2)
	r = e.plugin("upgrade-status")
	wantExit(t, r, 0)
	for _, want := range []string{
		"NODE", "STEP", "PHASE", "SINCE", "OUTCOME", "AGENT",
		n0 + "  upgrading-control-plane-" + n0 + "  preflight  ",
		"Running  alive (",
		n2 + "  -",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("upgrade-status lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(r.stdout), "none") {
		t.Errorf("the last node's agent is not shown as none:\n%s", r.stdout)
	}
	r = e.plugin("upgrade-status", "-o", "json")
	wantExit(t, r, 0)
	var st upgradeStatusJSON
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatal(err)
	}
	if st.Agents == nil || st.Agents.Nodes[0].Phase != "preflight" || st.Agents.Nodes[0].Outcome != upgrade.NodeRunning || len(st.NodeAgents) != 3 ||
		st.NodeAgents[0].Liveness != nodestate.AgentAlive || st.NodeAgents[0].State == nil || st.NodeAgents[2].Liveness != nodestate.AgentNone {
		t.Fatalf("upgrade-status -o json: %s", r.stdout)
	}
	cp.renew(n2, time.Now())

	r = e.plugin("upgrade-resume")
	wantExit(t, r, 4)
	wantStderr(t, r, "the upgrade is in upgrading-control-plane-"+n0+", and no step or host failed: there is nothing to resume")
	if rec := e.upgradeRecord(); rec.Agents.Resume != 0 {
		t.Fatalf("a refused resume wrote %d", rec.Agents.Resume)
	}

	// upgrade-fail works on it; no agent then has a turn, until a resume
	// gives the failed step's agent its turn back.
	wantExit(t, e.plugin("upgrade-fail", "--reason", "kubeadm hung"), 0)
	rec = e.upgradeRecord()
	for _, n := range cp.nodes {
		if turn := rec.TurnOf(n, upgrade.AgentRunnerPrefix(n)+"2"); turn.Kind != upgrade.TurnNone {
			t.Errorf("failed: %s has a turn: %+v", n, turn)
		}
	}
	r = e.plugin("upgrade-resume")
	wantExit(t, r, 0)
	if want := "upgrade to v1.37.2 resumed (resume 1): the agent of " + n0 + " runs upgrading-control-plane-" + n0 + " again\n"; r.stdout != want {
		t.Fatalf("upgrade-resume said %q, want %q", r.stdout, want)
	}
	rec = e.upgradeRecord()
	if turn := rec.TurnOf(n0, upgrade.AgentRunnerPrefix(n0)+"2"); rec.Agents.Resume != 1 || turn.Kind != upgrade.TurnStep || !turn.Retry {
		t.Fatalf("after the resume: resume %d, %s's turn %+v", rec.Agents.Resume, n0, turn)
	}

	// The plan's abort: no agent takes a step any more.
	wantExit(t, e.plugin("upgrade-set", "upgrade-aborting"), 0)
	rec = e.upgradeRecord()
	for _, n := range cp.nodes {
		if turn := rec.TurnOf(n, upgrade.AgentRunnerPrefix(n)+"2"); turn.Kind != upgrade.TurnNone {
			t.Errorf("aborting: %s has a turn: %+v", n, turn)
		}
	}
}

// TestUpgradeApplyWaitExitCodes: upgrade-apply --wait follows the record
// and exits as the upgrade ends, moved here by stand-in agents as the real
// ones would move it: 0 complete, 8 a node back on its previous version,
// 9 a node not put back (named, with its phase and why), 4 aborted, 7 the
// wait ended first. After a failure, upgrade-resume --wait follows the
// step run again to the end.
func TestUpgradeApplyWaitExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		// move moves the record once the upgrade started.
		move   func(e *env, nodes []string)
		args   []string
		code   int
		stdout string
		stderr []string
	}{
		{name: "complete", move: func(e *env, nodes []string) { e.agentsFinish(nodes) }, code: 0,
			stdout: "upgrade to v1.37.2 upgrade-complete: every control-plane node runs v1.37.2",
			stderr: []string{"upgrade to v1.37.2: upgrade-started, 0 of 2 control planes and 0 of 2 kubelets done", "upgrade to v1.37.2: upgrading-kubelets",
				" upgrading-kubelet, phase kubelet: Done", "upgrade to v1.37.2: upgrade-complete"}},
		{name: "rolled back", move: func(e *env, nodes []string) {
			e.agentTurn(nodes[0], "control-plane", upgrade.NodeRolledBack, "[upgrade/staticpods] the kube-apiserver did not come up")
		}, code: 8, stderr: []string{"the upgrade to v1.37.2 failed at node ", ", phase control-plane), the node is back on its previous version: ",
			"last output: [upgrade/staticpods] the kube-apiserver did not come up; the nodes after it are untouched: ",
			"fix the cause, then run the step again with 'kubectl kubeadmcfg upgrade-resume --wait', or end the upgrade with 'kubectl kubeadmcfg upgrade-set upgrade-aborting'"}},
		{name: "rollback failed", move: func(e *env, nodes []string) {
			e.agentTurn(nodes[0], "control-plane", upgrade.NodeRollbackFailed, "etcd did not come back")
		}, code: 9, stderr: []string{"not put back on its previous version, or not wholly", "etcd did not come back"}},
		{name: "failed past the point of no return", move: func(e *env, nodes []string) {
			e.agentTurn(nodes[0], "control-plane", upgrade.NodeDone, "")
			e.agentTurn(nodes[1], "kubelet-config", upgrade.NodeFailed, "write /var/lib/kubelet/config.yaml: no space left on device")
		}, code: 9, stderr: []string{", phase kubelet-config), past the point where kubeadm-config says v1.37.2, so it was not put back (recovery is forward): ",
			"no space left on device", "then run the failed step again with 'kubectl kubeadmcfg upgrade-resume --wait'"}},
		{name: "aborted", move: func(e *env, nodes []string) {
			wantExit(e.t, e.plugin("upgrade-set", "upgrade-aborting", "--reason", "not today"), 0)
		}, code: 4, stderr: []string{"the upgrade to v1.37.2 was aborted: it is in upgrade-aborting (not today)"}},
		{name: "the wait ends first", move: func(*env, []string) {}, args: []string{"--timeout", "3s"}, code: 7,
			stderr: []string{"stopped waiting before the upgrade ended (upgrade to v1.37.2, upgrade-started, 0 of 2 control planes and 0 of 2 kubelets done): context deadline exceeded",
				"follow it with 'kubectl kubeadmcfg upgrade-status --watch'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, cp := upgradeReady(t, 2)
			p := e.startPlugin(nil, append([]string{"upgrade-apply", "v1.37.2", "--wait"}, tc.args...)...)
			p.waitFor("upgrade started: ")
			tc.move(e, cp.nodes)
			r := p.wait()
			wantEnded(t, r, tc.code)
			wantStderr(t, r, tc.stderr...)
			if !strings.Contains(r.stdout, tc.stdout) {
				t.Fatalf("stdout lacks %q: %s", tc.stdout, r)
			}
			if tc.code != 8 && tc.code != 9 {
				return
			}
			if !strings.Contains(r.stderr, "failed at node "+cp.nodes[0]) && !strings.Contains(r.stderr, "failed at node "+cp.nodes[1]) {
				t.Fatalf("the failed node is not named: %s", r)
			}
			// Resumed, the step's agent runs it again and the upgrade goes
			// on to its end.
			p = e.startPlugin(nil, "upgrade-resume", "--wait")
			p.waitFor("upgrade to v1.37.2 resumed (resume 1)")
			e.agentsFinish(cp.nodes)
			r = p.wait()
			wantEnded(t, r, 0)
			if !strings.Contains(r.stdout, "upgrade to v1.37.2 upgrade-complete: every control-plane node runs v1.37.2") {
				t.Fatalf("upgrade-resume --wait said %s", r)
			}
		})
	}
}
