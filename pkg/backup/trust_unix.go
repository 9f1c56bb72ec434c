//go:build unix

package backup

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// writableByOthers reports whether users other than the owner may write fi.
func writableByOthers(fi fs.FileInfo) bool { return fi.Mode().Perm()&0o022 != 0 }

// openNoFollow opens path for reading, failing rather than following a
// symlink put there after it was looked at, and without blocking on a FIFO.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// maxLinks is how many symlinks a path may pass through, as Linux allows.
const maxLinks = 40

// checkAncestors walks the path to dir from the root as the kernel resolves
// it, symlinks included, and refuses it unless no other user can change
// where it leads: every directory passed through must be owned by root or
// this user and writable by no one else unless sticky, and every symlink
// followed must be root's or this user's.
func checkAncestors(dir string) error {
	cur := "/"
	fi, err := os.Lstat(cur)
	if err != nil {
		return err
	}
	if err := trustedDir(cur, fi); err != nil {
		return err
	}
	rest := splitPath(dir)
	for links := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case ".":
			continue
		case "..":
			cur = filepath.Dir(cur) // cur has no symlinks left: its parent is real
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if links++; links > maxLinks {
				return fmt.Errorf("%s passes through too many symlinks", dir)
			}
			if uid := owner(fi); !trustedOwner(uid) {
				return fmt.Errorf("%s is a symlink owned by uid %d, neither root nor this user", next, uid)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return err
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			rest = append(splitPath(target), rest...)
			continue
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", next)
		}
		if err := trustedDir(next, fi); err != nil {
			return err
		}
		cur = next
	}
	return nil
}

func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}

// trustedDir accepts a directory above the backup directory that no other
// user can change: owned by root or this user, writable by no one else
// unless sticky (then others may add entries, but not rename ours).
func trustedDir(path string, fi fs.FileInfo) error {
	if uid := owner(fi); !trustedOwner(uid) {
		return fmt.Errorf("%s is owned by uid %d, neither root nor this user", path, uid)
	}
	if writableByOthers(fi) && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("%s is writable by other users and not sticky (chmod go-w)", path)
	}
	return nil
}

// trustedOwner is trusted for the directories and symlinks above the backup
// directory: it also takes, in a user namespace that does not map root
// (unshare -r, a rootless container), the overflow uid for root, since
// root's files show as owned by it there and every path starts at root's /.
func trustedOwner(uid int) bool { return trusted(uid) || unmappedRoot(uid) }
