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
// time, for the kinds named after it), after checking the directory. A
// missing directory has none. Every listing also removes leftover temporary
// files, so the one directory read a write's pruning makes does both.
func (s *Store) names(pattern func() *regexp.Regexp, what string) ([]string, error) {
	if err := s.checkDir(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
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

// readFile reads one of the store's files by name, after checking the
// directory as a write does. The name must be of the kind pattern matches
// (what names the kind in messages), and the file one the store trusts (see
// open) of at most 2 MiB: anything else is refused with exit code 3.
func (s *Store) readFile(name, what string, pattern func() *regexp.Regexp) (data []byte, path string, size int64, err error) {
	if name != filepath.Base(name) || !pattern().MatchString(name) {
		return nil, "", 0, exitcode.Usagef("%q is not a %s name (see 'kubectl kubeadmcfg backup list')", name, what)
	}
	notFound := exitcode.NotFoundf("%s %s not found in %s", what, name, s.Dir)
	if err := s.checkDir(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", 0, notFound
		}
		return nil, "", 0, err
	}
	f, fi, err := s.open(name, what)
	var distrust *untrustedError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", 0, notFound
	case errors.As(err, &distrust):
		return nil, "", 0, exitcode.New(exitcode.Invalid, err)
	case err != nil:
		return nil, "", 0, exitcode.Failuref("read %s: %w", what, err)
	}
	defer f.Close()
	data, err = input.Read(f)
	if errors.Is(err, input.ErrTooLarge) {
		return nil, "", 0, exitcode.Invalidf("%s %s is %w", what, name, input.ErrTooLarge)
	}
	if err != nil {
		return nil, "", 0, exitcode.Failuref("read %s: %w", what, err)
	}
	return data, f.Name(), fi.Size(), nil
}
