package reconfigure

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// externalEtcd is document with an external etcd: kubeadm renders no etcd
// manifest for it.
const externalEtcd = document + "etcd:\n  external:\n    endpoints:\n    - https://192.0.2.20:2379\n"

// The node's etcd member is a component of the run on a node that runs
// one of a local etcd: planned last, with the running member's initial
// cluster (kubeadm renders a first member's, a member that joined runs the
// cluster's), and part of the last known good. An external etcd, or a node
// without a member, is left alone and the report says so. Changing the
// member goes through its guards first (etcdGuard); this test stops at
// the first of them, the client certificate, to show that nothing changed
// before it: the member's change itself is the e2e suite's
// (TestEtcdReconfigure).
func TestRunPlansTheEtcdMember(t *testing.T) {
	joined := "cp-1=https://192.0.2.12:2380,cp-0=https://192.0.2.11:2380"
	alone := "cp-0=https://192.0.2.11:2380"
	for _, tc := range []struct {
		name              string
		doc               string
		running, rendered string // the etcd manifests, "" for none
		components        []controlplane.Component
		plan              []string // the components planned, "name*" when it changes
		leftAlone         string
		recorded          bool
		warnings          []string
		rendersEtcd       bool
		wantCode          exitcode.Code // of a run that is not a dry run
	}{
		{name: "a member that joined, as rendered: unchanged", doc: document,
			running: etcdMf(joined, "existing", "10000"), rendered: etcdMf(alone, "", "10000"),
			plan:     []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"},
			recorded: true, rendersEtcd: true},
		{name: "an etcd setting changed: the member changes, its initial cluster kept", doc: document,
			running: etcdMf(joined, "existing", "10000"), rendered: etcdMf(alone, "", "12345"),
			plan:        []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd*"},
			rendersEtcd: true, wantCode: exitcode.NotFound},
		{name: "etcd alone, asked for", doc: document, components: []controlplane.Component{controlplane.Etcd},
			running: etcdMf(joined, "existing", "10000"), rendered: etcdMf(alone, "", "10000"),
			plan: []string{"etcd"}, rendersEtcd: true},
		{name: "the other components asked for, on a node with a member: not the whole node", doc: document,
			components: controlplane.Components(),
			running:    etcdMf(joined, "existing", "10000"), rendered: etcdMf(alone, "", "12345"),
			plan: []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}},
		{name: "external etcd, whatever runs: left alone", doc: externalEtcd,
			running: etcdMf(alone, "", "10000"), rendered: etcdMf(alone, "", "12345"),
			plan:      []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"},
			leftAlone: "etcd is external (etcd.external)",
			recorded:  true},
		{name: "external etcd, etcd asked for: left alone", doc: externalEtcd, components: []controlplane.Component{controlplane.Etcd},
			running:   etcdMf(alone, "", "10000"),
			leftAlone: "etcd is external (etcd.external)"},
		{name: "no etcd manifest on the node: left alone", doc: document,
			rendered:  etcdMf(alone, "", "12345"),
			plan:      []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"},
			leftAlone: "no local etcd member on this node (no DIR/etcd.yaml)", recorded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t, tc.doc)
			if tc.running != "" {
				n.running("etcd.yaml", n.port2(tc.running))
			}
			if tc.rendered != "" {
				n.rendered("etcd.yaml", n.port2(tc.rendered))
			}
			mirror := n.mirrorPod
			mirror("etcd")
			dry, err := runc(context.Background(), n.request(func(r *call) { r.DryRun, r.Components = true, tc.components }))
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for _, ch := range dry.Plan.Changes {
				name := ch.Component.PodName()
				if ch.Changed() {
					name += "*"
				}
				plan = append(plan, name)
				if ch.Component == controlplane.Etcd {
					// Whatever kubeadm rendered, the member's initial
					// cluster is the running one's.
					if got := strings.Join(ch.Rendered.Pod.Spec.Containers[0].Command, " "); !strings.Contains(got, "--initial-cluster="+joined+" --initial-cluster-state=existing") {
						t.Errorf("the planned etcd command line lacks the running initial cluster: %s", got)
					}
				}
			}
			if diff := cmp.Diff(tc.plan, plan); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if got := strings.ReplaceAll(dry.Etcd.LeftAlone, n.dir, "DIR"); got != tc.leftAlone {
				t.Errorf("left alone: %q, want %q", got, tc.leftAlone)
			}

			before := n.readDir()
			rep, err := runc(context.Background(), n.request(func(r *call) {
				r.Components, r.CertificatesDir = tc.components, filepath.Join(n.out, "pki")
			}))
			if tc.wantCode != exitcode.OK {
				var stage *StageError
				if exitcode.FromError(err) != tc.wantCode || !errors.As(err, &stage) || stage.Stage != StageEtcd || rep != nil {
					t.Fatalf("want exit %d at the etcd stage and no report, got %d: %v", tc.wantCode, exitcode.FromError(err), err)
				}
				if !strings.Contains(err.Error(), "no etcd client certificate in "+filepath.Join(n.out, "pki")) {
					t.Errorf("the error does not name the certificates directory: %v", err)
				}
				if diff := cmp.Diff(before, n.readDir()); diff != "" {
					t.Errorf("the manifests changed (-before +after):\n%s", diff)
				}
				if names, _ := n.store.List(); len(names) != 0 {
					t.Errorf("backups were written: %v", names)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if recorded := rep.LastKnownGood != ""; recorded != tc.recorded {
				t.Errorf("recorded as the last known good: %v, want %v", recorded, tc.recorded)
			}
			var warnings []string
			for _, w := range rep.Warnings {
				warnings = append(warnings, exitcode.Message(w))
			}
			if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if rendered := strings.Contains(n.calls(), "init phase etcd local"); rendered != tc.rendersEtcd {
				t.Errorf("etcd rendered: %v, want %v; kubeadm ran:\n%s", rendered, tc.rendersEtcd, n.calls())
			}
			if diff := cmp.Diff(before, n.readDir()); diff != "" {
				t.Errorf("the manifests changed (-before +after):\n%s", diff)
			}
		})
	}
}

// An etcd manifest kubeadm renders with no --initial-cluster to keep the
// running one's in is refused before anything changes: written as it is,
// it would be a manifest for a new cluster.
func TestRunRefusesAnEtcdManifestWithoutInitialCluster(t *testing.T) {
	n := newTestNode(t, document)
	n.running("etcd.yaml", n.port2(etcdMf("cp-1=https://192.0.2.12:2380,cp-0=https://192.0.2.11:2380", "existing", "10000")))
	n.rendered("etcd.yaml", strings.Replace(n.port2(etcdMf("X", "", "10000")), "    - --initial-cluster=X\n", "", 1))
	_, err := runc(context.Background(), n.request(func(r *call) { r.DryRun = true }))
	var stage *StageError
	if !errors.As(err, &stage) || stage.Stage != StageRender || !strings.Contains(err.Error(), "0 --initial-cluster lines") {
		t.Errorf("want a render error about --initial-cluster, got %v", err)
	}
}

// etcdMf is an etcd manifest, its probe port left as PORT.
func etcdMf(initialCluster, state, snapshotCount string) string {
	return (&testNode{port: "PORT"}).etcdManifest(initialCluster, state, snapshotCount)
}

// port2 puts the node's probe port into a manifest made by etcdMf.
func (n *testNode) port2(m string) string { return strings.ReplaceAll(m, "PORT", n.port) }

// readDir reads every file of the manifests directory.
func (n *testNode) readDir() map[string]string {
	n.t.Helper()
	entries, err := os.ReadDir(n.dir)
	if err != nil {
		n.t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || slices.Contains([]string{".kubeadmcfg-reconfigure.lock"}, e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(n.dir, e.Name()))
		if err != nil {
			n.t.Fatal(err)
		}
		out[e.Name()] = string(data)
	}
	return out
}
