package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/kubeadmupgrade"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
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

// The first node resumed after kubeadm-config came to say the target
// while its manifests were put back (a write whose answer was lost)
// starts again at the control-plane phase, not at the phase it stopped in
// after it, which would roll the target's addons out over the older
// control plane.
func TestAFirstNodePutBackPastThePointOfNoReturnResumesAtTheControlPlane(t *testing.T) {
	manifests := t.TempDir()
	for _, c := range controlplane.Components() {
		m := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %[1]s\n  namespace: kube-system\nspec:\n  containers:\n  - name: %[1]s\n    image: registry.k8s.io/%[1]s:v1.36.3\n", c.PodName())
		if err := os.WriteFile(filepath.Join(manifests, c.File()), []byte(m), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"},
		Data: map[string]string{engine.DefaultKey: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n"}})
	e := &env{cfg: &Config{Node: reconfigure.Node{
		Config:     engine.New(client, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey}, engine.Options{}),
		NodeConfig: clusterconfig.NodeConfig{Name: "cp-0"}, ManifestsDir: manifests,
	}}}
	rec := &upgradestate.Record{FromVersion: "v1.36.3", ToVersion: "v1.37.2",
		Agents: &upgradestate.Agents{Nodes: []upgradestate.NodeProgress{{Node: "cp-0", Phase: "kubelet-config"}}}}
	req, err := (&upgrades{}).request(context.Background(), e, rec, upgradestate.Turn{Kind: upgradestate.TurnStep, Apply: true, Retry: true})
	if err != nil {
		t.Fatal(err)
	}
	if req.Kind != kubeadmupgrade.Apply || !req.NoReturn || req.StartPhase != kubeadmupgrade.ControlPlane {
		t.Errorf("got %s from %q (NoReturn %v), want apply from %s past the point of no return", req.Kind, req.StartPhase, req.NoReturn, kubeadmupgrade.ControlPlane)
	}
}

// A put-back that was not tried, and an etcd member kept on its newer
// release, are said as such: never "back" for what is not.
func TestStepOutcomeSaysWhatWasNotPutBack(t *testing.T) {
	req := kubeadmupgrade.Request{Kind: kubeadmupgrade.Apply, Version: "v1.37.2", From: "v1.36.3"}
	cause := errors.New("the write's answer was lost")
	outcome, reason := stepOutcome("cp-0", "upgrading-control-plane-cp-0", req, &kubeadmupgrade.PutBackError{Untried: true,
		Failure: &kubeadmupgrade.PhaseError{Phase: "upload-config", Err: cause}, Err: errors.New("kubeadm-config could not be read")})
	if outcome != upgradestate.NodeRollbackFailed || !strings.Contains(reason, "not put back on v1.36.3: kubeadm-config could not be read") || strings.Contains(reason, "is back") {
		t.Errorf("untried: got %s %q", outcome, reason)
	}
	outcome, reason = stepOutcome("cp-0", "upgrading-control-plane-cp-0", req, &kubeadmupgrade.PhaseError{Phase: "upload-config", Err: cause, Back: true,
		EtcdKept: "its etcd member stays on etcd 3.7, not put back to 3.6"})
	if outcome != upgradestate.NodeRollbackFailed || !strings.Contains(reason, "back on v1.36.3, but its etcd member stays on etcd 3.7") {
		t.Errorf("etcd kept: got %s %q", outcome, reason)
	}
}
