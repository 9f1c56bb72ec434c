package backup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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

// TestClustersSharingADirectoryNeverCross: 50 backups of cluster B never
// prune cluster A's, and --latest of each cluster finds its own.
func TestClustersSharingADirectoryNeverCross(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	a, b := meta(), meta()
	a.UID, b.UID = "uid-a", "uid-b"
	b.Server = "https://10.0.0.2:6443"
	hook := func(m Meta) *Hook { return &Hook{Store: s, Keep: 3, Server: m.Server, Reason: m.Reason} }
	save := func(m Meta) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.ConfigMap, UID: types.UID(m.UID),
			ResourceVersion: m.ResourceVersion}, Data: map[string]string{"ClusterConfiguration": string(doc(t))}}
		if _, err := hook(m).Save(cm, "ClusterConfiguration", nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		save(a)
	}
	for range 50 {
		save(b)
	}
	count := map[string]int{}
	names, _ := s.List()
	for _, n := range names {
		m, err := s.readMeta(n)
		if err != nil {
			t.Fatal(err)
		}
		count[m.UID]++
	}
	if diff := cmp.Diff(map[string]int{"uid-a": 2, "uid-b": 3}, count); diff != "" {
		t.Fatalf("backups per cluster (-want +got):\n%s", diff)
	}
	for _, m := range []Meta{a, b} {
		latest, err := s.Latest(m.Owner())
		if err != nil {
			t.Fatal(err)
		}
		if latest.UID != m.UID || latest.Server != m.Server {
			t.Fatalf("latest of %s is %s of %s", m.UID, latest.UID, latest.Server)
		}
	}
	// Without a cluster to ask (restore --to-file), which one is meant
	// cannot be told.
	if _, err := s.Latest(Owner{Namespace: a.Namespace, ConfigMap: a.ConfigMap}); exitcode.FromError(err) != exitcode.Usage {
		t.Fatalf("latest of two clusters without a uid: %v", err)
	}
	// backup prune keeps N of each.
	removed, err := s.Prune(1)
	if err != nil || len(removed) != 3 {
		t.Fatalf("prune removed %v (%v), want one of A's and two of B's", removed, err)
	}
}

// TestLeftoverTempFilesAreRemoved: a writer killed between creating its
// temporary file and linking it leaves a dot-file; the next listing removes
// it once it is a minute old, and never a fresh one (a write under way).
func TestLeftoverTempFilesAreRemoved(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	old := filepath.Join(s.Dir, ".tmp-x.yaml-123")
	fresh := filepath.Join(s.Dir, ".tmp-y.yaml-456")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Error("the leftover temporary file is still there")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Error("a fresh temporary file was removed")
	}
}

// TestUnsafeDirectoriesAreRefused: a backup directory others can write, and
// a path to it through a directory others can write, are refused (exit 2);
// a symlink above it that only this user controls is fine.
func TestUnsafeDirectoriesAreRefused(t *testing.T) {
	base := t.TempDir()
	shared := filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Store{Dir: shared}).Write(doc(t), meta()); exitcode.FromError(err) != exitcode.Usage ||
		!strings.Contains(err.Error(), "other users can write into it") {
		t.Fatalf("world-writable directory: %v", err)
	}
	// shared/link -> a directory of ours: anyone could replace the link.
	mine := filepath.Join(base, "mine")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mine, filepath.Join(shared, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Store{Dir: filepath.Join(shared, "link", "backups")}).Write(doc(t), meta()); exitcode.FromError(err) != exitcode.Usage ||
		!strings.Contains(err.Error(), "shared is writable by other users and not sticky") {
		t.Fatalf("symlink in a world-writable directory: %v", err)
	}
	// base/ours -> mine: only this user can replace it.
	if err := os.Symlink(mine, filepath.Join(base, "ours")); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Store{Dir: filepath.Join(base, "ours", "backups")}).Write(doc(t), meta()); err != nil {
		t.Fatalf("symlink only this user controls: %v", err)
	}
}
