package upgrade

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

func agentsUpgrade(t *testing.T, nodes ...string) *upgradestate.Record {
	t.Helper()
	p, err := upgradestate.Builtin("kubeadm")
	if err != nil {
		t.Fatal(err)
	}
	if p, err = p.Instantiate(nodes); err != nil {
		t.Fatal(err)
	}
	if err := p.AssignNodes(nodes); err != nil {
		t.Fatal(err)
	}
	c := upgradestate.Clock{Now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC), By: "alice"}
	rec, err := upgradestate.Start(nil, p, c, "v1.36.3", "v1.37.2", "upgrade-apply")
	if err != nil {
		t.Fatal(err)
	}
	rec.Agents = upgradestate.NewAgents(c, "v1.37.2", p)
	return rec
}

// copyOf is a deep copy of rec, as each copy of the record a watch reads.
func copyOf(t *testing.T, rec *upgradestate.Record) *upgradestate.Record {
	t.Helper()
	a := map[string]string{}
	if err := rec.Encode(a); err != nil {
		t.Fatal(err)
	}
	out, _, err := upgradestate.Decode(a)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUpgradeProgress: one line when first seen, then one per change of
// the state or of a node's step, phase or outcome; a change of nothing
// else (a phase's stamp) prints nothing.
func TestUpgradeProgress(t *testing.T) {
	var out bytes.Buffer
	progress := upgradeProgress(&out)
	rec := agentsUpgrade(t, "cp-0", "cp-1")
	progress(copyOf(t, rec))
	c := upgradestate.Clock{Now: time.Date(2026, 12, 2, 9, 0, 5, 0, time.UTC), By: "agent"}
	if _, err := rec.Set(c, "upgrading-control-plane-cp-0", "", false, ""); err != nil {
		t.Fatal(err)
	}
	rec.Agents.BeginPhase(c, "cp-0", "upgrading-control-plane-cp-0", "preflight")
	progress(copyOf(t, rec))
	rec.Agents.Node("cp-0").PhaseSince = "2026-12-02T09:00:06Z"
	progress(copyOf(t, rec))
	rec.Agents.BeginPhase(c, "cp-0", "upgrading-control-plane-cp-0", "control-plane")
	progress(copyOf(t, rec))
	if _, err := rec.Set(c, "upgrading-control-plane-cp-0-failed", "", false, "phase control-plane failed"); err != nil {
		t.Fatal(err)
	}
	rec.Agents.EndNode("cp-0", upgradestate.NodeRolledBack, "phase control-plane failed")
	progress(copyOf(t, rec))
	want := []string{
		"upgrade to v1.37.2: upgrade-started, 0 of 2 control planes and 0 of 2 kubelets done",
		"upgrade to v1.37.2: upgrading-control-plane-cp-0",
		"upgrade to v1.37.2: node cp-0 upgrading-control-plane-cp-0, phase preflight: Running",
		"upgrade to v1.37.2: node cp-0 upgrading-control-plane-cp-0, phase control-plane: Running",
		"upgrade to v1.37.2: upgrading-control-plane-cp-0-failed",
		"upgrade to v1.37.2: node cp-0 upgrading-control-plane-cp-0, phase control-plane: RolledBack",
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSpace(out.String()), "\n")); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// TestFollowSaysControlPlane: a complete upgrade, and the help of the
// command that waits for it, claim the control-plane nodes only: the
// agents never touch a worker.
func TestFollowSaysControlPlane(t *testing.T) {
	rec := agentsUpgrade(t, "cp-0")
	if _, err := rec.Set(upgradestate.Clock{Now: time.Date(2026, 12, 2, 9, 5, 0, 0, time.UTC), By: "agent"}, upgradestate.Complete, "", true, ""); err != nil {
		t.Fatal(err)
	}
	if got, want := completeLine(rec), "upgrade to v1.37.2 upgrade-complete: every control-plane node runs v1.37.2"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, help := range []string{applyLong, resumeLong} {
		if strings.Contains(help, "every node runs") {
			t.Errorf("the help claims every node:\n%s", help)
		}
	}
}

// TestStatusJSONOfAnUpgradeByHandIsUnchanged: upgrade-status -o json of an
// upgrade driven by hand prints what it printed before upgrade-apply
// existed, key for key; one the agents carry out adds the agents.
func TestStatusJSONOfAnUpgradeByHandIsUnchanged(t *testing.T) {
	c := upgradestate.Clock{Now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC), By: "bob"}
	byHand, err := upgradestate.Start(nil, nil, c, "v1.36.3", "v1.37.2", "")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(byHand.Status())
	after, _ := json.Marshal(statusView{Status: byHand.Status()})
	if string(before) != string(after) {
		t.Errorf("upgrade-status -o json changed:\n%s\n%s", before, after)
	}
	rec := agentsUpgrade(t, "cp-0")
	view := statusView{Status: rec.Status(), NodeAgents: []nodestate.Agent{{Node: "cp-0", Liveness: nodestate.AgentAlive}}}
	got, _ := json.Marshal(view)
	for _, key := range []string{`"agents":{"version":"v1.37.2"`, `"nodeAgents":[{"node":"cp-0","liveness":"alive"}]`, `"state":"upgrade-started"`} {
		if !strings.Contains(string(got), key) {
			t.Errorf("no %s in %s", key, got)
		}
	}
}

// TestUpgradeHint: the cobra layer adds the command that goes on from how
// a wait ended; the domain error says what happened.
func TestUpgradeHint(t *testing.T) {
	rolledBack := &operator.UpgradeFailedError{Version: "v1.37.2", Node: "cp-0", Step: "s", Outcome: upgradestate.NodeRolledBack, Abort: "upgrade-aborting"}
	notPutBack := &operator.UpgradeFailedError{Version: "v1.37.2", Node: "cp-1", Step: "s", Outcome: upgradestate.NodeFailed}
	stopped := exitcode.New(exitcode.OutcomeUnknown, fmt.Errorf("%w (upgrade to v1.37.2)", operator.ErrStoppedWaitingForUpgrade))
	for _, tc := range []struct {
		err  error
		code exitcode.Code
		hint string
	}{
		{exitcode.New(rolledBack.Code(), rolledBack), exitcode.RolledBack,
			"; fix the cause, then run the step again with 'kubectl kubeadmcfg upgrade-resume --wait', or end the upgrade with 'kubectl kubeadmcfg upgrade-set upgrade-aborting'"},
		{exitcode.New(notPutBack.Code(), notPutBack), exitcode.RollbackFailed,
			"; fix the cause on the node, then run the failed step again with 'kubectl kubeadmcfg upgrade-resume --wait'"},
		{stopped, exitcode.OutcomeUnknown, "; follow it with 'kubectl kubeadmcfg upgrade-status --watch'"},
	} {
		got := upgradeHint(tc.err)
		if exitcode.FromError(got) != tc.code || got.Error() != tc.err.Error()+tc.hint {
			t.Errorf("got exit %d %q, want exit %d and the hint %q", exitcode.FromError(got), got, tc.code, tc.hint)
		}
	}
	if upgradeHint(nil) != nil {
		t.Error("a hint without an error")
	}
}
