package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/kubeadmupgrade"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// The outcome recorded says no more than the step's error does: "back on"
// only for a node put back and checked, "changed nothing" for a step that
// never reached kubeadm's control-plane phase.
func TestStepOutcomeSaysWhatWasChecked(t *testing.T) {
	req := kubeadmupgrade.Request{Kind: kubeadmupgrade.Apply, Version: "v1.37.2", From: "v1.36.3"}
	cause := errors.New("kubeadm upgrade apply phase preflight exited 1")
	for _, tc := range []struct {
		err          error
		outcome      string
		want, refuse string
	}{
		{nil, upgradestate.NodeDone, "runs v1.37.2", "failed"},
		{&kubeadmupgrade.PhaseError{Phase: "preflight", Err: cause, Back: true, Unchanged: true}, upgradestate.NodeRolledBack, "changed nothing", "back on"},
		{&kubeadmupgrade.PhaseError{Phase: "control-plane", Err: cause, Back: true}, upgradestate.NodeRolledBack, "back on v1.36.3", "changed nothing"},
		{&kubeadmupgrade.PhaseError{Phase: "kubelet-config", Err: cause}, upgradestate.NodeFailed, "phase kubelet-config failed", "back on"},
		{&kubeadmupgrade.PutBackError{Failure: &kubeadmupgrade.PhaseError{Phase: "control-plane", Err: cause}, Err: errors.New("no backup")},
			upgradestate.NodeRollbackFailed, "putting the node back on v1.36.3 failed: no backup", "is back on"},
	} {
		outcome, reason := stepOutcome("cp-0", "upgrading-control-plane-cp-0", req, tc.err)
		if outcome != tc.outcome || !strings.Contains(reason, tc.want) || strings.Contains(reason, tc.refuse) {
			t.Errorf("%v: got %s %q, want %s saying %q and not %q", tc.err, outcome, reason, tc.outcome, tc.want, tc.refuse)
		}
	}
}
