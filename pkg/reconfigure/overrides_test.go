package reconfigure

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// Each refusal has its own override, on the Request: a change made on
// purpose during an upgrade must still not change versions by accident.
func TestRunOverrides(t *testing.T) {
	newerTag := func(n *testNode) {
		n.rendered(controlplane.APIServer.File(), n.manifest(controlplane.APIServer, "v1.37.3", "--v=0"))
	}
	inProgress := func(n *testNode) { n.create(upgradeRecord(t, "starlingx", upgrade.UpgradingFirstMaster)) }
	for _, tc := range []struct {
		name   string
		setUp  []func(n *testNode)
		req    func(r *call)
		stage  Stage // "" for no error
		reason string
	}{
		{"a version change, allowed", []func(*testNode){newerTag}, func(r *call) { r.AllowVersionChange = true }, "", ""},
		{"kubeadm of another release, allowed", []func(*testNode){func(n *testNode) {
			n.writeFile(n.out+"/version", "v1.38.0\n", 0o600)
		}}, func(r *call) { r.AllowVersionChange = true }, "", ""},
		{"an image change, allowed for a comparison", []func(*testNode){newerTag}, func(r *call) { r.AllowImageChange = true }, "", ""},
		{"an image change allowed does not allow kubeadm of another release", []func(*testNode){newerTag, func(n *testNode) {
			n.writeFile(n.out+"/version", "v1.38.0\n", 0o600)
		}}, func(r *call) { r.AllowImageChange = true }, StageVersion, "kubeadm v1.38.0 is of another minor release than kubernetesVersion v1.37.2"},
		{"an upgrade in progress, allowed", []func(*testNode){inProgress}, func(r *call) { r.AllowDuringUpgrade = true }, "", ""},
		{"an upgrade in progress does not allow a version change", []func(*testNode){inProgress, newerTag},
			func(r *call) { r.AllowDuringUpgrade = true }, StageVersion, "kube-apiserver: image tag v1.37.2 -> v1.37.3"},
		{"a version change does not allow an upgrade in progress", []func(*testNode){inProgress, newerTag},
			func(r *call) { r.AllowVersionChange = true }, StageUpgrade, "an upgrade from v1.37.2 to v1.38.0 is in progress"},
		{"the record in another ConfigMap", []func(*testNode){func(n *testNode) {
			cm := upgradeRecord(t, "kubeadm", "upgrading-control-plane-cp-1")
			cm.Name = "my-upgrade"
			n.create(cm)
		}}, func(r *call) { r.UpgradeConfigMap = "my-upgrade" }, StageUpgrade, "(state upgrading-control-plane-cp-1 in configmap kube-system/my-upgrade)"},
		{"a record that cannot be read", []func(*testNode){func(n *testNode) {
			cm := upgradeRecord(t, "kubeadm", "upgrading-control-plane-cp-1")
			cm.Annotations[upgrade.KeyHosts] = "["
			n.create(cm)
		}}, func(*call) {}, StageUpgrade, "the upgrade record in configmap kube-system/kubeadmcfg-upgrade cannot be read: annotation kubeadmcfg.io/hosts"},
		{"a record that cannot be read, not read", []func(*testNode){func(n *testNode) {
			cm := upgradeRecord(t, "kubeadm", "upgrading-control-plane-cp-1")
			cm.Annotations[upgrade.KeyHosts] = "["
			n.create(cm)
		}}, func(r *call) { r.AllowDuringUpgrade = true }, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t, document)
			for _, s := range tc.setUp {
				s(n)
			}
			rep, err := runc(context.Background(), n.request(func(r *call) { r.DryRun = true }, tc.req))
			if tc.stage == "" {
				if err != nil || rep == nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var stage *StageError
			if !errors.As(err, &stage) || stage.Stage != tc.stage || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("got %v; want stage %s: ...%s...", err, tc.stage, tc.reason)
			}
		})
	}
}

// Going back to a backup is often done with the API down: the upgrade
// record cannot be read then, and the run goes on with a warning, as it
// does without the live ConfigMap to compare the backup with.
func TestRunFromABackupWithTheAPIDown(t *testing.T) {
	n := newTestNode(t, document)
	live, err := n.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.store.Save(live, "ClusterConfiguration", "https://192.0.2.10:6443", "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	n.client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	})
	var warnings []string
	rep, err := runc(context.Background(), n.request(func(r *call) {
		r.Source = Source{Backup: b.Name}
		r.Progress = func(e Event) {
			if e.Kind == EventWarning {
				warnings = append(warnings, e.Message)
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 2 || !strings.HasPrefix(warnings[1], "cannot read the upgrade record in configmap kube-system/kubeadmcfg-upgrade (cannot reach the API server") {
		t.Errorf("warnings: %q", warnings)
	}
	if rep.LastKnownGood != b.Name {
		t.Errorf("last known good %q, want %q", rep.LastKnownGood, b.Name)
	}
	// A live document read a moment ago is no reason to go on blind.
	n2 := newTestNode(t, document)
	n2.client.PrependReactor("get", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == "kubeadm-config" {
			return false, nil, nil
		}
		return true, nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	})
	if _, err := runc(context.Background(), n2.request()); !errors.Is(err, engine.ErrUnreachable) {
		t.Errorf("live document, record unreadable: %v", err)
	}
}
