package backup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The backup directory, and writing files into it safely.

// DefaultDir is where backups go without --backup-dir: $KUBEADMCFG_BACKUP_DIR,
// else /etc/kubernetes/kubeadmcfg/backups for root (beside kubeadm's own
// files), else $XDG_STATE_HOME/kubeadmcfg/backups (default ~/.local/state).
// It is "" when none of these can be had (HOME is not set): a Store without
// a directory refuses every use with ErrNoDir, rather than keep backups in a
// directory other users share.
func DefaultDir() string {
	return defaultDir(os.Geteuid() == 0, os.Getenv, os.UserHomeDir)
}

func defaultDir(root bool, getenv func(string) string, home func() (string, error)) string {
	if d := getenv("KUBEADMCFG_BACKUP_DIR"); d != "" {
		return d
	}
	if root {
		return "/etc/kubernetes/kubeadmcfg/backups"
	}
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "kubeadmcfg", "backups")
	}
	h, err := home()
	if err != nil || !filepath.IsAbs(h) {
		return ""
	}
	return filepath.Join(h, ".local", "state", "kubeadmcfg", "backups")
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
