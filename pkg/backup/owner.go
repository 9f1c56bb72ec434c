package backup

import (
	"bufio"
	"cmp"
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
// the store's. The directory is the caller's to check (by listing it).
func (s *Store) readMeta(name string) (Meta, error) {
	f, _, err := s.open(name, "backup")
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
// header are ever removed, and never a node's last known good. Damaged last
// known good records protect nothing: the rest is pruned, and they are
// named in the error (exit code 3) returned with what was removed.
func (s *Store) Prune(keep int) ([]string, error) {
	names, err := s.List()
	if err != nil {
		return nil, err
	}
	lastGood, damaged, err := s.protected()
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
		gone, err := s.remove(names, keep, lastGood)
		removed = append(removed, gone...)
		if err != nil {
			return removed, err
		}
	}
	slices.Sort(removed)
	return removed, damaged
}

// PruneOwner removes the oldest backups of owner beyond keep, as Prune
// does.
func (s *Store) PruneOwner(keep int, owner Owner) ([]string, error) {
	names, err := s.List()
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, func(name string) bool { return namePattern().FindStringSubmatch(name)[2] != owner.ConfigMap })
	if len(names) <= keep {
		return nil, nil // nothing to do: skip reading the headers
	}
	lastGood, damaged, err := s.protected()
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, func(name string) bool {
		m, err := s.readMeta(name)
		return err != nil || m.Owner() != owner
	})
	removed, err := s.remove(names, keep, lastGood)
	if err != nil {
		return removed, err
	}
	return removed, damaged
}

// remove deletes the oldest of names, the backups of one ConfigMap object,
// beyond keep, except the backups in lastGood, and the manifest backups
// reconfigure kept with each one it deletes.
func (s *Store) remove(names []string, keep int, lastGood map[string]bool) ([]string, error) {
	names = slices.DeleteFunc(slices.Clone(names), func(name string) bool { return lastGood[name] })
	slices.SortFunc(names, compareVersions)
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

// compareVersions orders the backup names of one ConfigMap object, oldest
// first: by the resourceVersion in the name, which the API server raises
// with every write of the object whatever any clock says; only backups of
// the same resourceVersion go by the time in their name, then by the rest.
// Backups of different objects (uids) are never ordered by it: their
// resourceVersions need not come from the same etcd.
func compareVersions(a, b string) int {
	rva, rvb := namePattern().FindStringSubmatch(a)[3], namePattern().FindStringSubmatch(b)[3]
	rva, rvb = strings.TrimLeft(rva, "0"), strings.TrimLeft(rvb, "0")
	if c := cmp.Compare(len(rva), len(rvb)); c != 0 {
		return c // decimal, without leading zeros: the longer is the larger
	}
	if c := strings.Compare(rva, rvb); c != 0 {
		return c
	}
	return strings.Compare(a, b) // the time comes first in a name
}

// Latest returns the newest backup of owner: of the live ConfigMap's uid,
// the one of the highest resourceVersion (see compareVersions), so a clock
// that stepped back, or hosts with skewed clocks sharing the directory,
// never make an older backup look newer. It leaves out the ones a restore
// took of the document it replaced: restoring "the latest" twice must not
// flip back to what the first restore undid. The backups of what
// reconfigure applied are left out too: they are the live document, not one
// a write replaced. With owner.UID empty (no cluster to ask) it takes the
// ConfigMap's backups of any uid, but refuses when they are of more than
// one: which cluster is meant cannot be told, and the resourceVersions of
// two objects say nothing about which is newer.
func (s *Store) Latest(owner Owner) (*Backup, error) {
	names, err := s.List()
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, func(name string) bool { return namePattern().FindStringSubmatch(name)[2] != owner.ConfigMap })
	slices.SortFunc(names, compareVersions)
	uids := map[string]bool{}
	var newest string
	for i := len(names) - 1; i >= 0; i-- {
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
