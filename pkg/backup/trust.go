package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Trusting the backup directory and the files in it. A backup is applied to
// a cluster's control plane (restore, reconfigure --from-backup), so a file
// another local user could have put in place must never be read as one: its
// checksum is no authentication, since whoever writes the file can
// recompute it. Only this user and root are trusted, for reads as for
// writes:
//
//   - the backup directory is a real directory (not a symlink) this user
//     owns and no one else can write;
//   - every directory on the way to it, symlinks followed, is owned by root
//     or this user and writable by no one else unless sticky (as /tmp), so
//     no one else can rename it away and put another in its place; every
//     symlink followed is root's or this user's;
//   - every file read is a regular file, opened without following a
//     symlink, owned by this user or root and writable by no one else.
//
// Root can always replace anything; nothing here guards against it.

// ErrNoDir is the error of a Store without a directory: none was given and
// none can be derived (HOME is not set). Backups never fall back to a
// directory other users share, such as /tmp.
var ErrNoDir = errors.New("no backup directory: HOME is not set, and backups never go to a directory other users share such as /tmp")

// untrustedError is a file of the store that may not be read: not a
// regular file, or one another user owns or can write.
type untrustedError struct{ msg string }

func (e *untrustedError) Error() string { return e.msg }

func untrusted(format string, a ...any) error {
	return &untrustedError{msg: fmt.Sprintf(format, a...)}
}

// trusted reports whether uid may own what the store reads.
func trusted(uid int) bool { return uid == 0 || uid == os.Geteuid() }

// checkDir refuses a backup directory that another user could redirect,
// replace or write into. It returns an error matching fs.ErrNotExist, and
// nothing else, when the directory does not exist.
func (s *Store) checkDir() error {
	if s.Dir == "" {
		return exitcode.New(exitcode.Usage, ErrNoDir)
	}
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
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return refuse("it is a symlink (give its real path)")
	case !fi.IsDir():
		return exitcode.Usagef("backup directory %s is not a directory", s.Dir)
	case owner(fi) != os.Geteuid():
		return refuse("it is not owned by this user")
	case writableByOthers(fi):
		return refuse("other users can write into it (chmod go-w)")
	}
	if err := checkAncestors(filepath.Dir(dir)); err != nil {
		return refuse(err.Error())
	}
	return nil
}

// open opens the store's file name (what names its kind in messages) for
// reading, and checks through the open file that it can be trusted. The
// directory is the caller's to check. A missing file gives an error
// matching fs.ErrNotExist; one that may not be read, an *untrustedError.
func (s *Store) open(name, what string) (*os.File, fs.FileInfo, error) {
	path := filepath.Join(s.Dir, name)
	before, err := os.Lstat(path)
	if err != nil {
		return nil, nil, err
	}
	notRegular := untrusted("%s %s is not a regular file (a symlink or other entry is never trusted)", what, name)
	if !before.Mode().IsRegular() {
		return nil, nil, notRegular // never opened: a FIFO would block, a device might act
	}
	f, err := openNoFollow(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close() // read-only: nothing to lose
		return nil, nil, err
	}
	switch uid := owner(fi); {
	case !fi.Mode().IsRegular() || !os.SameFile(before, fi):
		err = notRegular // replaced between the look and the open
	case !trusted(uid):
		err = untrusted("%s %s is owned by uid %d, neither this user nor root, and is never trusted (check who put it there)", what, name, uid)
	case writableByOthers(fi):
		err = untrusted("other users can write %s %s, so it is never trusted (check it, then chmod go-w)", what, name)
	}
	if err != nil {
		_ = f.Close() // read-only: nothing to lose
		return nil, nil, err
	}
	return f, fi, nil
}
