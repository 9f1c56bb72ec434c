package backup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Backups belong to one ConfigMap object of one cluster: pruning counts them
// and restore --latest picks among them per Owner, so with one directory
// shared by several clusters, writes to one never push out another's
// backups, and one cluster's backup is never taken for another's.

// Owner is the ConfigMap a backup is of. The uid is the object's own, so
// two clusters, or a ConfigMap deleted and created again, never share one.
type Owner struct {
	Namespace string
	ConfigMap string
	UID       string
}

// Owner returns the ConfigMap the backup is of.
func (m Meta) Owner() Owner { return Owner{Namespace: m.Namespace, ConfigMap: m.ConfigMap, UID: m.UID} }

func (o Owner) String() string {
	if o.UID == "" {
		return fmt.Sprintf("configmap %s/%s", o.Namespace, o.ConfigMap)
	}
	return fmt.Sprintf("configmap %s/%s (uid %s)", o.Namespace, o.ConfigMap, o.UID)
}

// readMeta reads only the header of a backup file: enough to know whose it
// is, without reading the document. A file without a backup header is not
// the store's.
func (s *Store) readMeta(name string) (Meta, error) {
	path := filepath.Join(s.Dir, name)
	fi, err := os.Lstat(path)
	if err != nil {
		return Meta{}, err
	}
	if !fi.Mode().IsRegular() {
		return Meta{}, errors.New("not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return Meta{}, err
	}
	defer f.Close()
	var head strings.Builder
	r := bufio.NewReader(io.LimitReader(f, input.MaxBytes)) // a header without line ends is not read on and on
	for range len(headerKeys) + 1 {
		line, err := r.ReadString('\n')
		head.WriteString(line)
		if err != nil {
			break
		}
	}
	b, err := parse([]byte(head.String()))
	if err != nil {
		return Meta{}, err
	}
	return b.Meta, nil
}

// Prune removes, for each ConfigMap that has backups in the store, its
// oldest backups beyond keep. Only files with a backup name and a backup
// header are ever removed.
func (s *Store) Prune(keep int) ([]string, error) {
	names, err := s.List()
	if err != nil {
		return nil, err
	}
	byOwner := map[Owner][]string{}
	for _, name := range names {
		if m, err := s.readMeta(name); err == nil {
			byOwner[m.Owner()] = append(byOwner[m.Owner()], name)
		}
	}
	var removed []string
	for _, names := range byOwner {
		gone, err := s.remove(names, keep)
		removed = append(removed, gone...)
		if err != nil {
			return removed, err
		}
	}
	slices.Sort(removed)
	return removed, nil
}

// PruneOwner removes the oldest backups of owner beyond keep.
func (s *Store) PruneOwner(keep int, owner Owner) ([]string, error) {
	names, err := s.List()
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, func(name string) bool { return namePattern().FindStringSubmatch(name)[2] != owner.ConfigMap })
	if len(names) <= keep {
		return nil, nil // nothing to do: skip reading the headers
	}
	names = slices.DeleteFunc(names, func(name string) bool {
		m, err := s.readMeta(name)
		return err != nil || m.Owner() != owner
	})
	return s.remove(names, keep)
}

// remove deletes the oldest of names (sorted oldest first) beyond keep.
// A node's last known good is never removed, and the manifest backups
// reconfigure kept with a backup go with it.
func (s *Store) remove(names []string, keep int) ([]string, error) {
	lastGood := s.lastGoodBackups()
	names = slices.DeleteFunc(slices.Clone(names), func(name string) bool { return lastGood[name] })
	if len(names) <= keep {
		return nil, nil
	}
	var removed []string
	defer func() { s.pruneManifestsOf(removed) }()
	for _, name := range names[:len(names)-keep] {
		err := os.Remove(filepath.Join(s.Dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, exitcode.Failuref("prune backups: %w", err)
		}
		removed = append(removed, name)
	}
	return removed, nil
}

// Latest returns the newest backup of owner, leaving out the ones a restore
// took of the document it replaced: restoring "the latest" twice must not
// flip back to what the first restore undid. The backups of what
// reconfigure applied are left out too: they are the live document, not one
// a write replaced. With owner.UID empty (no
// cluster to ask) it takes the ConfigMap's backups of any uid, but refuses
// when they are of more than one: which cluster is meant cannot be told.
func (s *Store) Latest(owner Owner) (*Backup, error) {
	names, err := s.List()
	if err != nil {
		return nil, err
	}
	uids := map[string]bool{}
	var newest string
	for i := len(names) - 1; i >= 0; i-- {
		if namePattern().FindStringSubmatch(names[i])[2] != owner.ConfigMap {
			continue
		}
		m, err := s.readMeta(names[i])
		if err != nil {
			if newest == "" {
				// The newest candidate is damaged: never fall back silently.
				return s.Read(names[i])
			}
			continue
		}
		if m.Namespace != owner.Namespace || (owner.UID != "" && m.UID != owner.UID) || m.Reason == ReasonBeforeRestore || m.Reason == ReasonReconfigure {
			continue
		}
		uids[m.UID] = true
		if newest == "" {
			newest = names[i]
		}
	}
	if newest == "" {
		return nil, exitcode.NotFoundf("no backup of %s in %s", owner, s.Dir)
	}
	if len(uids) > 1 {
		return nil, exitcode.Usagef("backups of %d ConfigMaps named %s/%s (%d clusters or re-created ConfigMaps) are in %s; name the backup to use",
			len(uids), owner.Namespace, owner.ConfigMap, len(uids), s.Dir)
	}
	return s.Read(newest)
}
