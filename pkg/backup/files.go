package backup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The store's files of every kind (backups, manifest backups, last known
// good records) are listed and opened the same way.

// names lists the store's files whose names match pattern, sorted (so by
// time, for the kinds named after it). A missing directory has none. Every
// listing also removes leftover temporary files, so the one directory read
// a write's pruning makes does both.
func (s *Store) names(pattern func() *regexp.Regexp, what string) ([]string, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, exitcode.Failuref("list %s: %w", what, err)
	}
	s.cleanTemp(entries)
	var names []string
	for _, e := range entries {
		if pattern().MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// readFile reads one of the store's files by name. The name must be of
// the kind pattern matches (what names the kind in messages), and the file
// a regular file of at most 2 MiB: a symlink or other entry is never
// trusted, and a larger file is not one the store wrote (exit 3).
func (s *Store) readFile(name, what string, pattern func() *regexp.Regexp) (data []byte, path string, size int64, err error) {
	if name != filepath.Base(name) || !pattern().MatchString(name) {
		return nil, "", 0, exitcode.Usagef("%q is not a %s name (see 'kubectl kubeadmcfg backup list')", name, what)
	}
	path = filepath.Join(s.Dir, name)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", 0, exitcode.NotFoundf("%s %s not found in %s", what, name, s.Dir)
	}
	if err != nil {
		return nil, "", 0, exitcode.Failuref("read %s: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, "", 0, exitcode.Invalidf("%s %s is not a regular file (a symlink or other entry is never trusted)", what, name)
	}
	data, err = input.ReadFile(path)
	if errors.Is(err, input.ErrTooLarge) {
		return nil, "", 0, exitcode.Invalidf("%s %s is %w", what, name, input.ErrTooLarge)
	}
	if err != nil {
		return nil, "", 0, exitcode.Failuref("read %s: %w", what, err)
	}
	return data, path, fi.Size(), nil
}
