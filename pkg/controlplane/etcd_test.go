package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testdata/etcd/rendered*.yaml are what kubeadm 1.37.2 renders with
// `kubeadm init phase etcd local --dry-run` for node cp-1 (192.0.2.11),
// with etcd.local.extraArgs snapshot-count 12345 for
// rendered-snapshot-count.yaml; running-joined-member.yaml is rendered.yaml
// as a member that joined runs it, with the cluster's --initial-cluster and
// --initial-cluster-state=existing, as `kubeadm join` writes them.
func TestCompareEtcd(t *testing.T) {
	read := func(name string) *Manifest {
		t.Helper()
		m, err := ReadManifest(filepath.Join("testdata", "etcd", name))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	joined, rendered := read("running-joined-member.yaml"), read("rendered.yaml")
	if joined.SameAs(rendered) {
		t.Fatal("the test needs a running manifest that differs in its initial cluster")
	}
	image := read("rendered.yaml")
	image.Pod.Spec.Containers[0].Image = "registry.k8s.io/etcd:3.7.1-0"
	volume := read("rendered.yaml")
	volume.Pod.Spec.Volumes[0].HostPath.Path = "/srv/etcd-certs"
	for _, tc := range []struct {
		name              string
		running, rendered *Manifest
		want              string
	}{
		{"a member that joined, as kubeadm renders it", joined, rendered, ""},
		{"the same", rendered, read("rendered.yaml"), ""},
		{"a flag changed", joined, read("rendered-snapshot-count.yaml"), "adds --snapshot-count=12345, removes --snapshot-count=10000"},
		{"the image", joined, image, "image registry.k8s.io/etcd:3.7.1-0 instead of registry.k8s.io/etcd:3.7.0-0"},
		{"another field", joined, volume, "changes other fields of the manifest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CompareEtcd(tc.running, tc.rendered); got != tc.want {
				t.Errorf("CompareEtcd = %q, want %q", got, tc.want)
			}
		})
	}
	// The comparison changes neither manifest.
	if !strings.Contains(string(joined.Raw), "--initial-cluster-state=existing") ||
		len(joined.Pod.Spec.Containers[0].Command) != len(rendered.Pod.Spec.Containers[0].Command)+1 {
		t.Error("CompareEtcd changed its arguments")
	}
}

func TestReadEtcd(t *testing.T) {
	dir := t.TempDir()
	if m, err := ReadEtcd(dir); m != nil || err != nil {
		t.Errorf("no etcd manifest: %v, %v", m, err)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "etcd", "rendered.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etcd.yaml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if m, err := ReadEtcd(dir); err != nil || m.Pod.Name != "etcd" {
		t.Errorf("etcd manifest: %v, %v", m, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etcd.yaml"), []byte("kind: ["), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadEtcd(dir); err == nil {
		t.Error("a broken etcd manifest is read")
	}
	if Etcd.PodName() != "etcd" || Etcd.File() != "etcd.yaml" || strings.Join(Etcd.phase(), " ") != "init phase etcd local" {
		t.Errorf("etcd is %s, %s, rendered by %v", Etcd.PodName(), Etcd.File(), Etcd.phase())
	}
}

// A member that joined keeps its initial cluster: kubeadm renders the
// manifest of a first member, and the running one's flags stand. The result
// is, byte for byte, what `kubeadm join` wrote (running-joined-member.yaml
// is rendered.yaml with them), so nothing is seen to change; a real change
// is kept.
func TestKeepInitialCluster(t *testing.T) {
	read := func(name string) *Manifest {
		t.Helper()
		m, err := ReadManifest(filepath.Join("testdata", "etcd", name))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	joined, rendered := read("running-joined-member.yaml"), read("rendered.yaml")

	got, err := KeepInitialCluster(joined, rendered)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Raw) != string(joined.Raw) || !got.SameAs(joined) {
		t.Errorf("a joined member as rendered (-want +got):\n%s", cmp.Diff(string(joined.Raw), string(got.Raw)))
	}

	changed, err := KeepInitialCluster(joined, read("rendered-snapshot-count.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if d := CompareEtcd(joined, changed); d != "adds --snapshot-count=12345, removes --snapshot-count=10000" || changed.SameAs(joined) {
		t.Errorf("a changed flag: %q", d)
	}
	if v, _ := flagValue(changed, "--initial-cluster-state="); v != "existing" {
		t.Errorf("--initial-cluster-state=%q, want the running existing", v)
	}

	// The first member (init's manifest, no state) going the other way:
	// the rendered state is dropped, not kept.
	back, err := KeepInitialCluster(rendered, joined)
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Raw) != string(rendered.Raw) {
		t.Errorf("the first member (-want +got):\n%s", cmp.Diff(string(rendered.Raw), string(back.Raw)))
	}

	// A manifest whose command is not one item a line cannot be edited.
	flow, err := ParseManifest([]byte(strings.Replace(string(rendered.Raw), "  - command:\n", "  - command: [etcd, --initial-cluster=cp-1=https://192.0.2.11:2380]\n    args:\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := KeepInitialCluster(joined, flow); err == nil {
		t.Error("a flow-style command was edited")
	}
}
