//go:build unix

package backup

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// nobody is the uid and gid the tests give to files "another user" made.
const nobody = 65534

func asRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make files another user owns")
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// forge writes, as another user would, a backup of a permissive document
// under name in dir, with a checksum that holds.
func forge(t *testing.T, dir, name string, real []byte) {
	t.Helper()
	b, err := parse(real)
	if err != nil {
		t.Fatal(err)
	}
	forged := []byte(strings.Replace(string(b.Document), "apiServer:\n", "apiServer:\n  extraArgs:\n  - name: authorization-mode\n    value: AlwaysAllow\n", 1))
	m := b.Meta
	m.SHA256 = sum(forged)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, append(encodeHeader(m), forged...), 0o600); err != nil {
		t.Fatal(err)
	}
	chown(t, path, nobody)
}

// TestSwappedDirectoryIsRefused (review B1): the backup directory sits in a
// directory another user owns and anyone may write. After a backup is
// written, that user moves the directory away and puts one of their own in
// its place, holding a forged backup under the real backup's name, with a
// checksum that holds. Every read refuses it: naming the backup (restore
// NAME, reconfigure --from-backup), the last known good, the newest, the
// listing.
func TestSwappedDirectoryIsRefused(t *testing.T) {
	asRoot(t)
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &Store{Dir: filepath.Join(shared, "backups")}
	b, err := s.Write(doc(t), reconfigureMeta())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkLastGood(b, "cp-0"); err != nil {
		t.Fatal(err)
	}
	m, err := s.WriteManifest([]byte(manifest), ManifestMeta{Node: "cp-0", Component: "kube-apiserver", ConfigBackup: b.Name})
	if err != nil {
		t.Fatal(err)
	}
	realManifest, err := os.ReadFile(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	real, err := os.ReadFile(b.Path)
	if err != nil {
		t.Fatal(err)
	}
	// The directory above now belongs to another user, who swaps ours.
	chown(t, shared, nobody)
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(s.Dir, s.Dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	chown(t, s.Dir, nobody)
	forge(t, s.Dir, b.Name, real)
	lastGood, _ := os.ReadFile(filepath.Join(s.Dir+".old", "last-known-good--kube-system--kubeadm-config--cp-0.json"))
	mark := filepath.Join(s.Dir, "last-known-good--kube-system--kubeadm-config--cp-0.json")
	if err := os.WriteFile(mark, []byte(strings.Replace(string(lastGood), b.SHA256, sumOfFile(t, filepath.Join(s.Dir, b.Name)), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	chown(t, mark, nobody)
	if err := os.WriteFile(m.Path, realManifest, 0o600); err != nil {
		t.Fatal(err)
	}
	chown(t, m.Path, nobody)

	reads := map[string]func() error{
		"Read":     func() error { _, err := s.Read(b.Name); return err },
		"LastGood": func() error { _, err := s.LastGood("kube-system", "kubeadm-config", "cp-0"); return err },
		"Latest": func() error {
			_, err := s.Latest(Owner{Namespace: "kube-system", ConfigMap: "kubeadm-config", UID: b.UID})
			return err
		},
		"ReadManifest": func() error { _, err := s.ReadManifest(m.Name); return err },
		"Manifests":    func() error { _, err := s.Manifests(b.Name); return err },
		"List":         func() error { _, err := s.List(); return err },
		"LastGoods":    func() error { _, err := s.LastGoods(); return err },
	}
	for name, read := range reads {
		err := read()
		if exitcode.FromError(err) != exitcode.Usage || !strings.Contains(err.Error(), "refusing backup directory") {
			t.Errorf("%s after the swap: %v, want the directory refused", name, err)
		}
	}
}

// sumOfFile is the checksum a forger would record for the backup at path.
func sumOfFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return b.SHA256
}

// TestUntrustedFilesAreRefused (review B1): in a directory only this user
// controls, a backup file is trusted only if it is a regular file, reached
// without a symlink, owned by this user or root, and writable by no one
// else. A FIFO under a backup's name is refused without blocking.
func TestUntrustedFilesAreRefused(t *testing.T) {
	cases := []struct {
		name   string
		root   bool
		damage func(t *testing.T, s *Store, b *Backup)
		want   string
	}{
		{"symlink", false, func(t *testing.T, s *Store, b *Backup) {
			other := filepath.Join(t.TempDir(), "elsewhere.yaml")
			if err := os.Rename(b.Path, other); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, b.Path); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"fifo", false, func(t *testing.T, s *Store, b *Backup) {
			if err := os.Remove(b.Path); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(b.Path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"owned by another user", true, func(t *testing.T, s *Store, b *Backup) {
			chown(t, b.Path, nobody)
		}, "owned by uid 65534"},
		{"writable by the group", false, func(t *testing.T, s *Store, b *Backup) {
			if err := os.Chmod(b.Path, 0o620); err != nil {
				t.Fatal(err)
			}
		}, "other users can write"},
		{"writable by anyone", false, func(t *testing.T, s *Store, b *Backup) {
			if err := os.Chmod(b.Path, 0o606); err != nil {
				t.Fatal(err)
			}
		}, "other users can write"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root {
				asRoot(t)
			}
			s := &Store{Dir: filepath.Join(t.TempDir(), "backups")}
			b, err := s.Write(doc(t), meta())
			if err != nil {
				t.Fatal(err)
			}
			c.damage(t, s, b)
			_, err = s.Read(b.Name)
			if exitcode.FromError(err) != exitcode.Invalid || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Read: %v, want exit 3 and %q", err, c.want)
			}
		})
	}
	t.Run("owned by root", func(t *testing.T) {
		asRoot(t)
		s := &Store{Dir: filepath.Join(t.TempDir(), "backups")}
		b, err := s.Write(doc(t), meta())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Read(b.Name); err != nil {
			t.Fatalf("a file of root's (this user) is refused: %v", err)
		}
	})
}

// TestUntrustedAncestorsAreRefused (review B1): every directory the path to
// the backup directory passes through, symlinks followed, must be one no
// other user can change: owned by root or this user, and writable by no one
// else unless sticky (as /tmp).
func TestUntrustedAncestorsAreRefused(t *testing.T) {
	cases := []struct {
		name  string
		root  bool
		setup func(t *testing.T, base string) (dir string)
		want  string // "" when accepted
	}{
		{"world-writable plain directory", false, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "open"), 0o777)
			return filepath.Join(base, "open", "backups")
		}, "open is writable by other users"},
		{"group-writable plain directory", false, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "team"), 0o770)
			return filepath.Join(base, "team", "backups")
		}, "team is writable by other users"},
		{"sticky world-writable directory", false, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "tmp"), 0o777|os.ModeSticky)
			return filepath.Join(base, "tmp", "backups")
		}, ""},
		{"directory of another user", true, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "theirs"), 0o755)
			chown(t, filepath.Join(base, "theirs"), nobody)
			return filepath.Join(base, "theirs", "backups")
		}, "theirs is owned by uid 65534"},
		{"symlink of another user in a sticky directory", true, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "tmp"), 0o777|os.ModeSticky)
			mkdir(t, filepath.Join(base, "mine"), 0o700)
			link := filepath.Join(base, "tmp", "link")
			if err := os.Symlink(filepath.Join(base, "mine"), link); err != nil {
				t.Fatal(err)
			}
			chown(t, link, nobody)
			return filepath.Join(link, "backups")
		}, "link is a symlink owned by uid 65534"},
		{"symlink to a path through an open directory", false, func(t *testing.T, base string) string {
			// base/link -> base/open/inner: the link is ours, but anyone can
			// replace base/open/inner.
			mkdir(t, filepath.Join(base, "open"), 0o777)
			mkdir(t, filepath.Join(base, "open", "inner"), 0o700)
			if err := os.Symlink(filepath.Join(base, "open", "inner"), filepath.Join(base, "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "link", "backups")
		}, "open is writable by other users"},
		{"relative symlink with ..", false, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "a"), 0o700)
			mkdir(t, filepath.Join(base, "b"), 0o700)
			if err := os.Symlink("../b", filepath.Join(base, "a", "up")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "a", "up", "backups")
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root {
				asRoot(t)
			}
			dir := c.setup(t, t.TempDir())
			_, err := (&Store{Dir: dir}).Write(doc(t), meta())
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if exitcode.FromError(err) != exitcode.Usage || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Write: %v, want exit 2 and %q", err, c.want)
			}
		})
	}
}

func mkdir(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestUntrustedLastGoodRecordStopsPruning (review B2): a last known good
// record the store may not read (another user's) might name any backup, so
// nothing is pruned until it is dealt with, and the error says why.
func TestUntrustedLastGoodRecordStopsPruning(t *testing.T) {
	asRoot(t)
	s := &Store{Dir: t.TempDir()}
	var all []*Backup
	for range 4 {
		b, err := s.Write(doc(t), reconfigureMeta())
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b)
	}
	if err := s.MarkLastGood(all[1], "cp-1"); err != nil {
		t.Fatal(err)
	}
	chown(t, filepath.Join(s.Dir, "last-known-good--kube-system--kubeadm-config--cp-1.json"), nobody)
	removed, err := s.Prune(1)
	if len(removed) != 0 || err == nil || !strings.Contains(err.Error(), "none is pruned") {
		t.Fatalf("Prune removed %v (%v), want nothing and the record named", removed, err)
	}
	if removed, err := s.PruneOwner(1, all[0].Owner()); len(removed) != 0 || err == nil {
		t.Fatalf("PruneOwner removed %v (%v), want nothing", removed, err)
	}
	if names, _ := s.List(); len(names) != 4 {
		t.Fatalf("%d backups left, want all 4", len(names))
	}
}
