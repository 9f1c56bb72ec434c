package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
)

// stateNode gives the test agent a node running kube-apiserver,
// kube-controller-manager and kube-scheduler of v1.37.2, and a kubeadm
// stand-in that reports version and renders each of them with the image
// tag tag, kube-apiserver with flag on its command line. It returns the
// stand-in's path.
func stateNode(t *testing.T, a *Agent, version, tag, flag string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the kubeadm stand-in is a shell script")
	}
	out := t.TempDir()
	manifest := func(c controlplane.Component, tag, flag string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %[1]s\n  namespace: kube-system\nspec:\n  containers:\n  - name: %[1]s\n    image: registry.k8s.io/%[1]s:%[2]s\n    command: [%[1]s, %[3]s]\n",
			c.PodName(), tag, flag)
	}
	write := func(path, data string, mode os.FileMode) {
		if err := os.WriteFile(path, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range controlplane.Components() {
		write(filepath.Join(a.cfg.ManifestsDir, c.File()), manifest(c, "v1.37.2", "--v=0"), 0o600)
		f := "--v=0"
		if c == controlplane.APIServer {
			f = flag
		}
		write(filepath.Join(out, c.File()), manifest(c, tag, f), 0o600)
	}
	kubeadm := filepath.Join(out, "kubeadm")
	write(kubeadm, fmt.Sprintf(`#!/bin/sh
out=%q
echo "$*" >>"$out/calls"
case "$1 $3" in
"version "*) echo %s ;;
"init control-plane") cp "$out/kube-$4.yaml" "$KUBEADM_INIT_DRYRUN_DIR/" ;;
*) echo "unexpected: $*" >&2; exit 1 ;;
esac
`, out, version), 0o755)
	a.cfg.Kubeadm, a.cfg.Upgrades.Kubeadms.Default = kubeadm, kubeadm
	a.cfg.NodeConfig = clusterconfig.NodeConfig{Name: "cp-0", AdvertiseAddress: "192.0.2.10", BindPort: 6443, ImagePullPolicy: "IfNotPresent"}
	return kubeadm
}

// Review A3b: the node's state is compared with what a kubeadm of the
// document's own minor release renders. A kubeadm of another minor
// release (the new release's, installed before the upgrade, as kubeadm's
// procedure has it) renders its release's defaults: the agent gives no
// verdict then (Unknown, naming that kubeadm, its release and the
// document's), and never says the node differs for them. A kubeadm of
// the same minor release still compares, a changed image tag included.
func TestStateRendersOnlyWithTheDocumentsRelease(t *testing.T) {
	doc := []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n")
	for _, tc := range []struct {
		name              string
		version, tag      string
		flag              string
		wantDiffers       []string
		wantInSync        bool
		wantError         string // KUBEADM for the stand-in's path
		wantStatus        corev1.ConditionStatus
		wantRenderedCalls int
	}{
		{"kubeadm 1.38 on a v1.37.2 document", "v1.38.0", "v1.37.2", "--flag-of-1.38=x", nil, false,
			"the node's kubeadm KUBEADM is v1.38.0, of another minor release than kubernetesVersion v1.37.2: it renders its own release's manifests, not what the node should run; no verdict until the agent has a kubeadm of the document's release",
			corev1.ConditionUnknown, 0},
		{"kubeadm 1.37 of another patch release, in sync", "v1.37.9", "v1.37.2", "--v=0", nil, true, "", corev1.ConditionFalse, 3},
		{"kubeadm 1.37, a flag differs", "v1.37.2", "v1.37.2", "--v=2", []string{"kube-apiserver"}, false, "", corev1.ConditionTrue, 3},
		{"kubeadm 1.37, the image tags differ", "v1.37.2", "v1.37.3", "--v=0",
			[]string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}, false, "", corev1.ConditionTrue, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, client, _ := testAgent(t, nil, doc)
			kubeadm := stateNode(t, a, tc.version, tc.tag, tc.flag)
			a.view.Config, a.configSeen = currentConfig(t, client), true
			st := a.state.find(context.Background(), a.env())
			got := strings.ReplaceAll(st.Error, kubeadm, "KUBEADM")
			if diff := cmp.Diff(tc.wantError, got); diff != "" {
				t.Errorf("the state's error (-want +got)\n%s", diff)
			}
			if st.InSync != tc.wantInSync || !cmp.Equal(tc.wantDiffers, st.Differs) {
				t.Errorf("in sync %v, differs %v; want %v, %v", st.InSync, st.Differs, tc.wantInSync, tc.wantDiffers)
			}
			if c := nodestate.OutOfDate("cp-0", &st, nil, nil); c.Status != tc.wantStatus {
				t.Errorf("the condition is %s (%s: %s), want %s", c.Status, c.Reason, c.Message, tc.wantStatus)
			}
			calls, _ := os.ReadFile(filepath.Join(filepath.Dir(kubeadm), "calls"))
			if n := strings.Count(string(calls), "init phase"); n != tc.wantRenderedCalls {
				t.Errorf("kubeadm rendered %d times, want %d:\n%s", n, tc.wantRenderedCalls, calls)
			}
		})
	}
}

// A writer that changes kubeadm-config every second does not have the
// agent run kubeadm as often: a find that only the document's change asks
// for waits for renderGap since the last; the node's own change (its
// turn ended) is found at once.
func TestStateRendersAtMostOncePerGapForDocumentChanges(t *testing.T) {
	doc := []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n")
	a, client, _ := testAgent(t, nil, doc)
	hold(t, a)
	kubeadm := stateNode(t, a, "v1.37.2", "v1.37.2", "--v=0")
	a.view.Config, a.configSeen = currentConfig(t, client), true
	renders := func() int {
		calls, _ := os.ReadFile(filepath.Join(filepath.Dir(kubeadm), "calls"))
		return strings.Count(string(calls), "init phase")
	}
	written := func(rv string) {
		cm := a.view.Config.DeepCopy()
		cm.ResourceVersion = rv
		a.view.Config = cm
	}
	a.state.do(context.Background(), a.env())
	first := renders()
	if first == 0 {
		t.Fatal("the first pass rendered nothing")
	}
	written("1001")
	if again := a.state.do(context.Background(), a.env()); again <= 0 || again > renderGap || renders() != first {
		t.Errorf("a document change right after a find: %d renders (want %d), again in %v", renders(), first, again)
	}
	a.state.changed()
	a.state.do(context.Background(), a.env())
	if renders() != 2*first {
		t.Errorf("the node changed: %d renders, want %d", renders(), 2*first)
	}
	written("1002")
	a.state.at = a.state.at.Add(-renderGap)
	a.state.do(context.Background(), a.env())
	if renders() != 3*first {
		t.Errorf("a document change renderGap after the last find: %d renders, want %d", renders(), 3*first)
	}
}
