package reconfigure

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// Review R1: a render that changes a component's version, or a kubeadm of
// another minor release than kubernetesVersion, is kubeadm upgrade's work,
// not a reconfiguration: refused with exit 4 before anything changes, on a
// dry run too, so that its exit code says what the run would do.
func TestRunRefusesVersionChanges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setUp   func(n *testNode)
		dryRun  bool
		wantErr string // "" for none
	}{
		{"a rendered image tag", func(n *testNode) {
			n.rendered(controlplane.APIServer.File(), n.manifest(controlplane.APIServer, "v1.37.3", "--v=0"))
		}, false, "the rendered manifests change versions (kube-apiserver: image tag v1.37.2 -> v1.37.3): upgrade the node with kubeadm instead"},
		{"a rendered image tag, on a dry run", func(n *testNode) {
			n.rendered(controlplane.APIServer.File(), n.manifest(controlplane.APIServer, "v1.37.3", "--v=2"))
		}, true, "the rendered manifests change versions (kube-apiserver: image tag v1.37.2 -> v1.37.3): upgrade the node with kubeadm instead"},
		{"every component named", func(n *testNode) {
			n.rendered(controlplane.APIServer.File(), n.manifest(controlplane.APIServer, "v1.38.0", "--v=0"))
			n.rendered(controlplane.Scheduler.File(), n.manifest(controlplane.Scheduler, "v1.38.0", "--v=0"))
		}, true, "the rendered manifests change versions (kube-apiserver: image tag v1.37.2 -> v1.38.0, kube-scheduler: image tag v1.37.2 -> v1.38.0): upgrade the node with kubeadm instead"},
		{"another registry, the same tag", func(n *testNode) {
			m := strings.Replace(n.manifest(controlplane.APIServer, "v1.37.2", "--v=0"), "registry.k8s.io/", "mirror.example.org/k8s/", 1)
			n.rendered(controlplane.APIServer.File(), m)
		}, true, ""},
		{"kubeadm of another minor release", func(n *testNode) {
			n.writeFile(n.out+"/version", "v1.38.0\n", 0o600)
		}, false, "kubeadm v1.38.0 is of another minor release than kubernetesVersion v1.37.2, and renders its own release's flags: use the kubeadm of the cluster's release"},
		{"kubeadm of another minor release, on a dry run", func(n *testNode) {
			n.writeFile(n.out+"/version", "v1.38.1\n", 0o600)
		}, true, "kubeadm v1.38.1 is of another minor release than kubernetesVersion v1.37.2, and renders its own release's flags: use the kubeadm of the cluster's release"},
		{"kubeadm of another patch release", func(n *testNode) {
			n.writeFile(n.out+"/version", "v1.37.9\n", 0o600)
		}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t, document)
			tc.setUp(n)
			rep, err := runc(context.Background(), n.request(func(r *call) { r.DryRun, r.Wait = tc.dryRun, 30*time.Second }))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if code := exitcode.FromError(err); code != exitcode.Conflict || err == nil || err.Error() != tc.wantErr {
				t.Fatalf("got exit %d: %v\nwant exit 4: %s", code, err, tc.wantErr)
			}
			if rep != nil {
				t.Errorf("a refused run reports %+v", rep)
			}
			n.wantManifests()
		})
	}
}

// Review R1: while the upgrade record says an upgrade is under way, a
// reconfiguration could undo its work or mix releases on the node: refused
// with exit 4. An upgrade is under way from its start until its complete
// state, a failed step or an abort included; once complete (its later steps
// too) or aborted, or when none is recorded, it is not.
func TestRunRefusesDuringAnUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plan  string
		state upgrade.State // "" records none; "-" leaves the ConfigMap out
		want  bool
	}{
		{"no record ConfigMap", "", "-", false},
		{"no upgrade recorded", "", "", false},
		{"started", "starlingx", upgrade.Started, true},
		{"a step in progress", "starlingx", upgrade.UpgradingFirstMaster, true},
		{"a failed step", "starlingx", upgrade.UpgradingFirstMasterFailed, true},
		{"a step done", "starlingx", upgrade.UpgradedNetworking, true},
		{"aborting", "starlingx", upgrade.Aborting, true},
		{"a failed abort", "starlingx", upgrade.AbortingFailed, true},
		{"a node of the kubeadm plan", "kubeadm", "upgrading-control-plane-cp-0", true},
		{"complete", "starlingx", upgrade.Complete, false},
		{"a step after complete", "starlingx", upgrade.PostUpdatingApps, false},
		{"a step after complete failed", "starlingx", upgrade.PostUpdatingAppsFailed, false},
		{"aborted", "starlingx", upgrade.Aborted, false},
		{"complete, kubeadm plan", "kubeadm", upgrade.Complete, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t, document)
			if tc.state != "-" {
				n.create(upgradeRecord(t, tc.plan, tc.state))
			}
			_, err := runc(context.Background(), n.request(func(r *call) { r.DryRun = true }))
			if !tc.want {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			want := "an upgrade from v1.37.2 to v1.38.0 is in progress (state " + string(tc.state) +
				" in configmap kube-system/kubeadmcfg-upgrade): reconfiguring a node now could undo its work or mix releases; finish or abort the upgrade first"
			if code := exitcode.FromError(err); code != exitcode.Conflict || err == nil || err.Error() != want {
				t.Fatalf("got exit %d: %v\nwant exit 4: %s", code, err, want)
			}
			if strings.Contains(n.calls(), "init") {
				t.Errorf("kubeadm rendered for a refused run:\n%s", n.calls())
			}
		})
	}
}

// upgradeRecord is the upgrade state ConfigMap with an upgrade from v1.37.2
// to v1.38.0 of plan in state ("" for a ConfigMap without one).
func upgradeRecord(t *testing.T, plan string, state upgrade.State) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: upgrade.DefaultConfigMap,
		Annotations: map[string]string{}}}
	if state == "" {
		return cm
	}
	p, err := upgrade.Builtin(plan)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = p.Instantiate([]string{"cp-0", "cp-1"}); err != nil {
		t.Fatal(err)
	}
	clock := upgrade.Clock{Now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), By: "test"}
	rec, err := upgrade.Start(nil, p, clock, "v1.37.2", "v1.38.0", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Set(clock, state, "", true, ""); err != nil {
		t.Fatal(err)
	}
	if err := rec.Encode(cm.Annotations); err != nil {
		t.Fatal(err)
	}
	return cm
}

// Review R2: under the minimum wait, no kube-apiserver restart could be
// confirmed healthy, and a healthy change would be rolled back: a usage
// error (exit 2), before anything is locked or read.
func TestRunRefusesAShortWait(t *testing.T) {
	n := newTestNode(t, document)
	_, err := runc(context.Background(), n.request(func(r *call) { r.Wait = 5 * time.Second }))
	want := "a wait of 5s per component is under the 30s minimum: a restarting kube-apiserver may take the kubelet's 30s grace period just to stop"
	if code := exitcode.FromError(err); code != exitcode.Usage || err == nil || err.Error() != want {
		t.Fatalf("got exit %d: %v\nwant exit 2: %s", code, err, want)
	}
	if n.calls() != "" {
		t.Errorf("kubeadm ran:\n%s", n.calls())
	}
	// A dry run waits for nothing.
	if _, err := runc(context.Background(), n.request(func(r *call) { r.Wait, r.DryRun = 0, true })); err != nil {
		t.Errorf("dry run: %v", err)
	}
}
