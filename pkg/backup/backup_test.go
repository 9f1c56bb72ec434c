package backup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

func doc(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("../../testdata/documents/v1beta4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func meta() Meta {
	return Meta{Server: "https://127.0.0.1:6443", Namespace: "kube-system", ConfigMap: "kubeadm-config",
		UID: "u-1", ResourceVersion: "812", KubernetesVersion: "v1.37.2", APIVersion: clusterconfig.V1beta4, PluginVersion: "test",
		Reason: ReasonManual}
}

func TestWriteReadRoundTrip(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "b")}
	w, err := s.Write(doc(t), meta())
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Read(w.Name)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(doc(t)), string(r.Document)); diff != "" {
		t.Fatalf("document (-want +got):\n%s", diff)
	}
	if r.ResourceVersion != "812" || r.UID != "u-1" || !r.Time.Equal(w.Time) || !r.ChecksumOK() {
		t.Fatalf("metadata: %+v", r.Meta)
	}
	if problems := r.Verify(clusterconfig.ValidateOptions{}); len(problems) != 0 {
		t.Fatalf("verify: %q", problems)
	}
	fi, _ := os.Stat(w.Path)
	di, _ := os.Stat(s.Dir)
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Fatalf("modes %v %v", fi.Mode(), di.Mode())
	}
}

func TestNamesSortByTimeAndNeverCollide(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	var written []string
	for range 50 {
		b, err := s.Write(doc(t), meta())
		if err != nil {
			t.Fatal(err)
		}
		written = append(written, b.Name)
	}
	names, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(written, names); diff != "" {
		t.Fatalf("list order differs from write order (-want +got):\n%s", diff)
	}
}

func TestPruneKeepsNewestAndOnlyRemovesOwnFiles(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	for range 5 {
		if _, err := s.Write(doc(t), meta()); err != nil {
			t.Fatal(err)
		}
	}
	foreign := "19990101T000000.000000000Z-kubeadm-config-rv1-deadbeef.yaml"
	if err := os.WriteFile(filepath.Join(s.Dir, foreign), []byte("someone else's file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	names, _ := s.List()
	removed, err := s.Prune(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 3 {
		t.Fatalf("removed %v", removed)
	}
	left, _ := s.List()
	if diff := cmp.Diff([]string{foreign, names[4], names[5]}, left); diff != "" {
		t.Fatalf("left (-want +got):\n%s", diff)
	}
}

func TestRefusals(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Store{Dir: link}).Write(doc(t), meta()); exitcode.FromError(err) != exitcode.Usage {
		t.Fatalf("symlinked directory: %v", err)
	}
	s := &Store{Dir: real}
	if _, err := s.Read("../etc/passwd"); exitcode.FromError(err) != exitcode.Usage {
		t.Fatalf("path traversal: %v", err)
	}
	if _, err := s.Read("20261129T191916.091292302Z-kubeadm-config-rv1-00000000.yaml"); exitcode.FromError(err) != exitcode.NotFound {
		t.Fatalf("missing: %v", err)
	}
	b, err := s.Write(doc(t), meta())
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(b.Path)
	os.WriteFile(b.Path, []byte(strings.Replace(string(data), "RSA-2048", "RSA-4096", 1)), 0o600)
	r, err := s.Read(b.Name)
	if err != nil {
		t.Fatal(err)
	}
	if problems := r.Verify(clusterconfig.ValidateOptions{}); len(problems) != 1 || !strings.HasPrefix(problems[0], "checksum mismatch") {
		t.Fatalf("tampered document: %q", problems)
	}
}
