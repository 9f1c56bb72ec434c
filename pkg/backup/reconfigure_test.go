package backup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const manifest = `apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver
  namespace: kube-system
spec:
  containers:
  - command:
    - kube-apiserver
    - --audit-log-maxage=30
    name: kube-apiserver
`

func reconfigureMeta() Meta {
	m := meta()
	m.Reason = ReasonReconfigure
	return m
}

func TestManifestBackupRoundTrip(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	b, err := s.Write(doc(t), reconfigureMeta())
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.WriteManifest([]byte(manifest), ManifestMeta{Node: "cp-1.example.com", Component: "kube-apiserver",
		Path: "/etc/kubernetes/manifests/kube-apiserver.yaml", ConfigBackup: b.Name})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(w.Name, strings.TrimSuffix(b.Name, ".yaml")+".") {
		t.Fatalf("the manifest backup %s is not named after its run's backup %s", w.Name, b.Name)
	}
	r, err := s.ReadManifest(w.Name)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(manifest, string(r.Manifest)); diff != "" {
		t.Fatalf("manifest (-want +got):\n%s", diff)
	}
	if r.Node != "cp-1.example.com" || r.Component != "kube-apiserver" || r.ConfigBackup != b.Name || !r.ChecksumOK() {
		t.Fatalf("metadata: %+v", r.ManifestMeta)
	}
	// The file is the manifest, after comments: it can be copied back into
	// the manifests directory as it is.
	data, _ := os.ReadFile(w.Path)
	var withHeader, plain map[string]any
	if err := yaml.Unmarshal(data, &withHeader); err != nil {
		t.Fatal(err)
	}
	_ = yaml.Unmarshal([]byte(manifest), &plain)
	if diff := cmp.Diff(plain, withHeader); diff != "" {
		t.Fatalf("the backup file is not the manifest (-want +got):\n%s", diff)
	}
	// A changed byte shows.
	os.WriteFile(w.Path, []byte(strings.Replace(string(data), "maxage=30", "maxage=31", 1)), 0o600)
	if r, _ := s.ReadManifest(w.Name); r.ChecksumOK() {
		t.Fatal("a tampered manifest backup passes its checksum")
	}
	// Manifest backups are no ClusterConfiguration backups.
	names, _ := s.List()
	if diff := cmp.Diff([]string{b.Name}, names); diff != "" {
		t.Fatalf("List (-want +got):\n%s", diff)
	}
	if got, _ := s.Manifests(b.Name); len(got) != 1 || got[0] != w.Name {
		t.Fatalf("Manifests(%s) = %v", b.Name, got)
	}
}

func TestManifestBackupRefusals(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	if _, err := s.WriteManifest([]byte(manifest), ManifestMeta{Node: "n", Component: "kube-apiserver", ConfigBackup: "x.yaml"}); err == nil {
		t.Fatal("a manifest backup without a ClusterConfiguration backup")
	}
	b, _ := s.Write(doc(t), reconfigureMeta())
	if _, err := s.WriteManifest([]byte(manifest), ManifestMeta{Node: "../n", Component: "kube-apiserver", ConfigBackup: b.Name}); err == nil {
		t.Fatal("a node name with a slash")
	}
	if _, err := s.ReadManifest("../x.manifest"); exitcode.FromError(err) != exitcode.Usage {
		t.Fatalf("path traversal: %v", err)
	}
}

func TestLastGood(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	if _, err := s.LastGood("kube-system", "kubeadm-config", "cp-1"); exitcode.FromError(err) != exitcode.NotFound {
		t.Fatalf("none yet: %v", err)
	}
	first, _ := s.Write(doc(t), reconfigureMeta())
	second, _ := s.Write(doc(t), reconfigureMeta())
	if err := s.MarkLastGood(first, "cp-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkLastGood(second, "cp-2"); err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{"cp-1": first.Name, "cp-2": second.Name} {
		got, err := s.LastGood("kube-system", "kubeadm-config", node)
		if err != nil || got.Name != want {
			t.Fatalf("%s: %v, %v, want %s", node, got, err, want)
		}
	}
	if _, err := s.LastGood("kube-system", "other", "cp-1"); exitcode.FromError(err) != exitcode.NotFound {
		t.Fatalf("another ConfigMap's: %v", err)
	}
	// Marking again moves it.
	if err := s.MarkLastGood(second, "cp-1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LastGood("kube-system", "kubeadm-config", "cp-1"); got.Name != second.Name {
		t.Fatalf("not moved: %s", got.Name)
	}
	marks, _ := s.LastGoods()
	if len(marks) != 2 {
		t.Fatalf("LastGoods: %+v", marks)
	}
	// A backup file replaced by another is not the last known good.
	data, _ := os.ReadFile(second.Path)
	os.WriteFile(second.Path, []byte(strings.Replace(string(data), "RSA-2048", "RSA-4096", 1)), 0o600)
	if _, err := s.LastGood("kube-system", "kubeadm-config", "cp-1"); exitcode.FromError(err) != exitcode.Invalid {
		t.Fatalf("tampered: %v", err)
	}
	if err := s.MarkLastGood(first, "a--b"); exitcode.FromError(err) != exitcode.Usage {
		t.Fatalf("an ambiguous node name: %v", err)
	}
}

// Pruning keeps every node's last known good however old, and takes a
// run's manifest backups with its ClusterConfiguration backup.
func TestPruneKeepsLastGoodAndTakesManifests(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	var all []*Backup
	for range 5 {
		b, err := s.Write(doc(t), reconfigureMeta())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.WriteManifest([]byte(manifest), ManifestMeta{Node: "cp-1", Component: "kube-apiserver", ConfigBackup: b.Name}); err != nil {
			t.Fatal(err)
		}
		all = append(all, b)
	}
	if err := s.MarkLastGood(all[0], "cp-1"); err != nil {
		t.Fatal(err)
	}
	removed, err := s.Prune(2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{all[1].Name, all[2].Name}, removed); diff != "" {
		t.Fatalf("removed (-want +got):\n%s", diff)
	}
	left, _ := s.List()
	if diff := cmp.Diff([]string{all[0].Name, all[3].Name, all[4].Name}, left); diff != "" {
		t.Fatalf("left (-want +got):\n%s", diff)
	}
	for i, b := range all {
		got, _ := s.Manifests(b.Name)
		if want := i != 1 && i != 2; (len(got) == 1) != want {
			t.Errorf("backup %d: manifests %v, want kept: %v", i, got, want)
		}
	}
	if _, err := s.LastGood("kube-system", "kubeadm-config", "cp-1"); err != nil {
		t.Fatalf("the last known good was pruned: %v", err)
	}
}

// restore --latest passes over what reconfigure applied: that is the live
// document, not one a write replaced.
func TestLatestSkipsReconfigureBackups(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	replaced := meta()
	replaced.Reason = ReasonBeforePatch
	want, _ := s.Write(doc(t), replaced)
	if _, err := s.Write(doc(t), reconfigureMeta()); err != nil {
		t.Fatal(err)
	}
	got, err := s.Latest(Owner{Namespace: "kube-system", ConfigMap: "kubeadm-config", UID: "u-1"})
	if err != nil || got.Name != want.Name {
		t.Fatalf("Latest = %v, %v; want %s", got, err, want.Name)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, want.Name)); err != nil {
		t.Fatal(err)
	}
}
