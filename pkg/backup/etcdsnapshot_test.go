package backup

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// fakeSnapshot is shaped as etcd streams a snapshot: a database of whole
// 4 KiB pages, then the sha256 of it.
func fakeSnapshot(t *testing.T, pages int) []byte {
	t.Helper()
	db := make([]byte, pages*4096)
	if _, err := rand.Read(db); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(db)
	return append(db, sum[:]...)
}

func snapMeta(node string, rev int64) EtcdSnapshotMeta {
	return EtcdSnapshotMeta{Node: node, Member: node, MemberID: "00000000000000aa", ClusterID: "cdf818194e3a8c32",
		Revision: rev, EtcdVersion: "3.7.0", Reason: ReasonBeforeEtcdChange}
}

// entries lists every file in dir, temporary ones included.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestEtcdSnapshotRoundTrip(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "b")}
	data := fakeSnapshot(t, 3)
	// Small reads, as a stream delivers them: the trailer straddles them.
	w, err := s.WriteEtcdSnapshot(iotest.OneByteReader(bytes.NewReader(data)), snapMeta("cp-1", 812), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(w.Name, ".db") || !strings.Contains(w.Name, "-etcd-cdf818194e3a8c32-cp-1-rev812-") {
		t.Fatalf("name %s", w.Name)
	}
	got, err := os.ReadFile(w.Path)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the file is not what etcd sent (%v)", err)
	}
	for _, path := range []string{w.Path, w.Path + ".json"} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", path, fi, err)
		}
	}
	r, err := s.ReadEtcdSnapshot(w.Name)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := snapMeta("cp-1", 812)
	want.Time, want.Size, want.SHA256, want.PluginVersion = w.Time, int64(len(data)), hex.EncodeToString(sum[:]), w.PluginVersion
	if diff := cmp.Diff(want, r.EtcdSnapshotMeta); diff != "" {
		t.Fatalf("record (-want +got):\n%s", diff)
	}
	if problems, err := s.VerifyEtcdSnapshot(r); err != nil || len(problems) != 0 {
		t.Fatalf("verify: %v %q", err, problems)
	}
	names, _ := s.EtcdSnapshots()
	backups, _ := s.List()
	if diff := cmp.Diff([]string{w.Name}, names); diff != "" || len(backups) != 0 {
		t.Fatalf("snapshots (-want +got):\n%s\nbackups %v", diff, backups)
	}
}

// A stream that does not end as etcd ends a snapshot is no snapshot:
// nothing of it is kept, not even a temporary file.
func TestEtcdSnapshotRefusals(t *testing.T) {
	data := fakeSnapshot(t, 2)
	for _, tc := range []struct {
		name string
		r    io.Reader
		max  int64
		want string
	}{
		{"cut short", bytes.NewReader(data[:len(data)-1]), 1 << 20, "does not end in the sha256 etcd appends to it"},
		{"cut at a page", bytes.NewReader(data[:4096]), 1 << 20, "does not end in the sha256 etcd appends to it"},
		{"damaged", bytes.NewReader(append([]byte{data[0] ^ 1}, data[1:]...)), 1 << 20, "does not end in the sha256 etcd appends to it"},
		{"larger than the member's database", bytes.NewReader(data), int64(len(data)) - 1, "larger than 8223 bytes"},
		{"a failing stream", io.MultiReader(bytes.NewReader(data[:100]), iotest.ErrReader(io.ErrUnexpectedEOF)), 1 << 20, "receive the etcd snapshot: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Store{Dir: t.TempDir()}
			_, err := s.WriteEtcdSnapshot(tc.r, snapMeta("cp-0", 1), tc.max)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %q, got %v", tc.want, err)
			}
			if left := entries(t, s.Dir); len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
		})
	}
	s := &Store{Dir: t.TempDir()}
	if _, err := s.WriteEtcdSnapshot(bytes.NewReader(data), snapMeta("CP_0", 1), 1<<20); err == nil || !strings.Contains(err.Error(), `cannot name an etcd snapshot of node "CP_0"`) {
		t.Fatalf("bad node name: %v", err)
	}
}

func TestVerifyEtcdSnapshotFindsDamage(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	data := fakeSnapshot(t, 2)
	w, err := s.WriteEtcdSnapshot(bytes.NewReader(data), snapMeta("cp-0", 5), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte{}, data...)
	flipped[4096] ^= 1
	for _, tc := range []struct {
		name    string
		content []byte
		want    []string
	}{
		{"a flipped bit", flipped, []string{"checksum mismatch", "the file does not end in the sha256 of its database"}},
		{"truncated", data[:4096], []string{"size mismatch: the record says 8224 bytes, the file has 4096", "checksum mismatch", "the file does not end in the sha256 of its database"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(w.Path, tc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := s.ReadEtcdSnapshot(w.Name)
			if err != nil {
				t.Fatal(err)
			}
			problems, err := s.VerifyEtcdSnapshot(r)
			if err != nil || len(problems) != len(tc.want) {
				t.Fatalf("problems %q %v, want %q", problems, err, tc.want)
			}
			for i, p := range problems {
				if !strings.HasPrefix(p, tc.want[i]) {
					t.Errorf("problem %q, want %q", p, tc.want[i])
				}
			}
		})
	}
	t.Run("no record", func(t *testing.T) {
		if err := os.Remove(w.Path + ".json"); err != nil {
			t.Fatal(err)
		}
		_, err := s.ReadEtcdSnapshot(w.Name)
		if exitcode.FromError(err) != exitcode.Invalid || !strings.Contains(err.Error(), "has no record") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("writable by others", func(t *testing.T) {
		if err := os.Chmod(w.Path, 0o666); err != nil {
			t.Fatal(err)
		}
		_, err := s.ReadEtcdSnapshot(w.Name)
		if exitcode.FromError(err) != exitcode.Invalid || !strings.Contains(err.Error(), "other users can write etcd snapshot") {
			t.Fatalf("got %v", err)
		}
	})
}

// Pruning counts each node's snapshots apart, orders them by revision
// whatever the clock said, and removes only what its record says is the
// store's, with its record; ClusterConfiguration backups are another count.
func TestPruneEtcdSnapshots(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	data := fakeSnapshot(t, 1)
	byRev := map[int64]string{}
	for _, rev := range []int64{30, 10, 50, 20, 40} { // written out of revision order
		w, err := s.WriteEtcdSnapshot(bytes.NewReader(data), snapMeta("cp-0", rev), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		byRev[rev] = w.Name
	}
	other, err := s.WriteEtcdSnapshot(bytes.NewReader(data), snapMeta("cp-1", 1), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	foreign := "19990101T000000.000000000Z-etcd-cdf818194e3a8c32-cp-0-rev1-deadbeef.db"
	if err := os.WriteFile(filepath.Join(s.Dir, foreign), data, 0o600); err != nil {
		t.Fatal(err)
	}
	backup, err := s.Write(doc(t), meta())
	if err != nil {
		t.Fatal(err)
	}
	removed, err := s.PruneNodeEtcdSnapshots(2, "cdf818194e3a8c32", "cp-0")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sortedNames(byRev[10], byRev[20], byRev[30]), removed); diff != "" {
		t.Fatalf("removed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sortedNames(foreign, byRev[40], byRev[40]+".json", byRev[50], byRev[50]+".json", other.Name, other.Name+".json", backup.Name), entries(t, s.Dir)); diff != "" {
		t.Fatalf("left (-want +got):\n%s", diff)
	}
	if removed, err := s.Prune(1); err != nil || len(removed) != 0 {
		t.Fatalf("backup pruning touched %v %v", removed, err)
	}
	if removed, err := s.PruneEtcdSnapshots(1); err != nil || fmt.Sprint(removed) != fmt.Sprint([]string{byRev[40]}) {
		t.Fatalf("pruning every node to 1: %v %v", removed, err)
	}
}

func sortedNames(names ...string) []string {
	slices.Sort(names)
	return names
}

// A snapshot that would leave less than the reserve free is refused with
// exit 4, and nothing is left behind. The reserve is the whole filesystem
// here, so that the refusal does not depend on the disk's fill.
func TestEtcdSnapshotKeepsTheReserveFree(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("free space is checked on Linux only")
	}
	t.Setenv(DiskReserveEnv, "100")
	s := &Store{Dir: filepath.Join(t.TempDir(), "b")}
	data := fakeSnapshot(t, 3)
	_, err := s.WriteEtcdSnapshot(bytes.NewReader(data), snapMeta("cp-1", 812), int64(len(data)))
	if exitcode.FromError(err) != exitcode.Conflict || !strings.Contains(err.Error(), "100% of the filesystem") {
		t.Fatalf("err %v, want exit 4 for the space kept free", err)
	}
	if _, err := os.Stat(s.Dir); err == nil {
		if names := entries(t, s.Dir); len(names) != 0 {
			t.Fatalf("left behind: %v", names)
		}
	}
}
