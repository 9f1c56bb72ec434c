package backup

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// etcdGroup is whose snapshots are counted together when pruning: one
// node's member of one etcd cluster. Both are in the name, so pruning needs
// no record to group, and two clusters sharing a directory never push out
// each other's snapshots.
type etcdGroup struct{ cluster, node string }

// PruneEtcdSnapshots removes, for each node of each etcd cluster with
// snapshots in the store, its oldest snapshots beyond keep, with their
// records. A snapshot is removed only when its record says it is the
// store's: a file of the name without one is left alone.
func (s *Store) PruneEtcdSnapshots(keep int) ([]string, error) {
	return s.pruneEtcdSnapshots(keep, func(etcdGroup) bool { return true })
}

// PruneNodeEtcdSnapshots removes the oldest snapshots of node's member of
// etcd cluster clusterID beyond keep, as PruneEtcdSnapshots does: the
// housekeeping after writing one.
func (s *Store) PruneNodeEtcdSnapshots(keep int, clusterID, node string) ([]string, error) {
	return s.pruneEtcdSnapshots(keep, func(g etcdGroup) bool { return g == etcdGroup{cluster: clusterID, node: node} })
}

// PruneEtcdSnapshotsOfNode removes the oldest snapshots of node's member
// beyond keep, for each etcd cluster it has snapshots of, as
// PruneEtcdSnapshots does: the housekeeping after an upgrade step, which
// may find the member down and so not know its cluster's ID.
func (s *Store) PruneEtcdSnapshotsOfNode(keep int, node string) ([]string, error) {
	return s.pruneEtcdSnapshots(keep, func(g etcdGroup) bool { return g.node == node })
}

func (s *Store) pruneEtcdSnapshots(keep int, which func(etcdGroup) bool) ([]string, error) {
	names, err := s.EtcdSnapshots()
	if err != nil {
		return nil, err
	}
	groups := map[etcdGroup][]string{}
	for _, name := range names {
		m := etcdSnapshotPattern().FindStringSubmatch(name)
		if g := (etcdGroup{cluster: m[2], node: m[3]}); which(g) {
			groups[g] = append(groups[g], name)
		}
	}
	var removed []string
	for _, names := range groups {
		slices.SortFunc(names, compareRevisions)
		if len(names) <= keep {
			continue
		}
		for _, name := range names[:len(names)-keep] {
			if _, err := s.ReadEtcdSnapshot(name); err != nil {
				continue // not provably the store's, or damaged: never removed
			}
			path := filepath.Join(s.Dir, name)
			err := errors.Join(ignoreMissing(os.Remove(path)), ignoreMissing(os.Remove(path+etcdRecordSuffix)))
			if err != nil {
				slices.Sort(removed)
				return removed, exitcode.Failuref("prune etcd snapshots: %w", err)
			}
			removed = append(removed, name)
		}
	}
	slices.Sort(removed)
	return removed, nil
}

func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// compareRevisions orders the snapshots of one member of one cluster,
// oldest first: by the revision in the name, which the cluster raises with
// every write whatever any clock says; snapshots of the same revision by
// the time in their name.
func compareRevisions(a, b string) int {
	ra := strings.TrimLeft(etcdSnapshotPattern().FindStringSubmatch(a)[4], "0")
	rb := strings.TrimLeft(etcdSnapshotPattern().FindStringSubmatch(b)[4], "0")
	if c := cmp.Compare(len(ra), len(rb)); c != 0 {
		return c // decimal, without leading zeros: the longer is the larger
	}
	if c := strings.Compare(ra, rb); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}
