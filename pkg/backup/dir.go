package backup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The backup directory, and writing files into it safely.

// DefaultDir is where backups go without --backup-dir: $KUBEADMCFG_BACKUP_DIR,
// else /etc/kubernetes/kubeadmcfg/backups for root (beside kubeadm's own
// files), else $XDG_STATE_HOME/kubeadmcfg/backups (default ~/.local/state).
func DefaultDir() string {
	if d := os.Getenv("KUBEADMCFG_BACKUP_DIR"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/etc/kubernetes/kubeadmcfg/backups"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "kubeadmcfg", "backups")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "kubeadmcfg", "backups")
	}
	return filepath.Join(home, ".local", "state", "kubeadmcfg", "backups")
}

// ensureDir creates the directory 0700 if needed and checks it, so backups
// can be neither redirected nor replaced by another user.
func (s *Store) ensureDir() error {
	err := s.checkDir()
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err // there and safe (every write but the first), or refused
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return exitcode.Failuref("cannot create the backup directory: %w", err)
	}
	return s.checkDir()
}

// checkDir refuses a backup directory that another user could redirect or
// write into: the directory itself must be a real directory, owned by this
// user and writable by no one else; every directory above it that is a
// symlink must be one no other user can replace.
func (s *Store) checkDir() error {
	dir, err := filepath.Abs(s.Dir)
	if err != nil {
		return exitcode.Failuref("backup directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return exitcode.Failuref("backup directory: %w", err)
	}
	refuse := func(why string) error {
		return exitcode.Usagef("refusing backup directory %s: %s", s.Dir, why)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return refuse("it is a symlink (give its real path)")
	}
	if !fi.IsDir() {
		return exitcode.Usagef("backup directory %s is not a directory", s.Dir)
	}
	if owner(fi) != os.Geteuid() {
		return refuse("it is not owned by this user")
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return refuse("other users can write into it (chmod go-w)")
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		if err := checkAncestor(p); err != nil {
			return refuse(err.Error())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// checkAncestor accepts a directory above the backup directory unless it is
// a symlink that someone other than root or this user could replace.
func checkAncestor(p string) error {
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return nil
	}
	trusted := func(uid int) bool { return uid == 0 || uid == os.Geteuid() }
	parent, err := os.Stat(filepath.Dir(p))
	if err != nil {
		return err
	}
	writable := parent.Mode().Perm()&0o022 != 0 && parent.Mode()&fs.ModeSticky == 0
	if !trusted(owner(fi)) || !trusted(owner(parent)) || writable {
		return errors.New(p + " is a symlink another user could replace")
	}
	return nil
}

func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return os.Geteuid() // no owners on this platform
}

// tempPrefix starts the name of every file being written; the kubelet and
// the store's listing both ignore dot-files.
const tempPrefix = ".tmp-"

// staleTemp is how old a temporary file must be before it is taken for one
// a killed writer left behind.
const staleTemp = time.Minute

// cleanTemp removes, among a listing of the store, the temporary files that
// a writer killed between creating and linking them left behind.
func (s *Store) cleanTemp(entries []fs.DirEntry) {
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleTemp {
			_ = os.Remove(filepath.Join(s.Dir, e.Name()))
		}
	}
}

// writeAtomic writes content to a temporary file beside final, syncs it,
// puts it in place and syncs the directory, so final is either absent, the
// old file or the whole new one. A backup is linked into place, which fails
// rather than replace a file; other files are renamed over the old one.
func writeAtomic(final string, content []byte, replace bool) error {
	dir := filepath.Dir(final)
	tmp, err := os.CreateTemp(dir, tempPrefix+filepath.Base(final)+"-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := errors.Join(tmp.Chmod(0o600), writeAll(tmp, content), tmp.Sync(), tmp.Close()); err != nil {
		return err
	}
	if replace {
		err = os.Rename(tmp.Name(), final)
	} else {
		err = os.Link(tmp.Name(), final)
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriteFile writes data to path atomically with mode 0600, replacing it: the
// on-disk copies of --write-config and restore --to-file.
func WriteFile(path string, data []byte) error {
	if err := writeAtomic(path, data, true); err != nil {
		return exitcode.Failuref("write %s: %w", path, err)
	}
	return nil
}

func writeAll(f *os.File, data []byte) error {
	_, err := f.Write(data)
	return err
}
