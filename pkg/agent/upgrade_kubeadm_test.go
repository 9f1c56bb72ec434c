package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// TestKubeadmPhaseRunAgainInTheSameSecond: kubeadm names the directory
// each run of a phase makes in /etc/kubernetes/tmp by the second it starts
// in (kubeadm-kubelet-config-2006-01-02-15-04-05), and fails when it
// exists. A phase the agent runs again at once (upgrade-resume right after
// the failure) must not start in the second its last run was in. The
// stand-in kubeadm makes its directory as kubeadm does; three runs in a row
// leave at least two in one second unless the agent waits.
func TestKubeadmPhaseRunAgainInTheSameSecond(t *testing.T) {
	a, client, _ := testAgent(t, nil, rollouttest.DocV1)
	a.cfg.Upgrade = engine.New(client, engine.Target{Namespace: "kube-system", Name: upgradestate.DefaultConfigMap}, engine.Options{})
	bin, tmp := t.TempDir(), t.TempDir()
	a.cfg.KubeadmTemplate = filepath.Join(bin, "{version}", "kubeadm")
	if err := os.Mkdir(filepath.Join(bin, "v1.37.2"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nmkdir \"" + tmp + "/kubeadm-kubelet-config-$(date +%Y-%m-%d-%H-%M-%S)\" || exit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "v1.37.2", "kubeadm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if out, err := a.upgrades.kubeadm(context.Background(), "v1.37.2", "agent/cp-0/1", "upgrade", "node", "phase", "kubelet-config"); err != nil {
			t.Fatalf("run %d: %v: %s", i+1, err, out)
		}
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "kubeadm-kubelet-config-*")); len(dirs) != 3 {
		t.Fatalf("want a directory of each of the 3 runs, got %v", dirs)
	}
}
