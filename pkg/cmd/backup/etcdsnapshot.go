package backup

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	backupstore "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The etcd snapshots reconfigure takes before it changes a node's etcd
// member live in the backup directory too: list shows them in a table of
// their own, verify reads them whole, prune keeps a count of their own.

// The kinds of file list and verify print with -o.
const (
	KindClusterConfiguration = "ClusterConfiguration"
	KindEtcdSnapshot         = "EtcdSnapshot"
)

// EtcdSnapshotInfo is one etcd snapshot as list and verify print it with
// -o. ChecksumOK is set by verify only: it reads the whole file, which may
// be gigabytes.
type EtcdSnapshotInfo struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	Path string `json:"path,omitempty"`
	backupstore.EtcdSnapshotMeta
	ChecksumOK *bool    `json:"checksumOK,omitempty"`
	Problems   []string `json:"problems,omitempty"`
}

// etcdSnapshotInfos reads the records of the store's etcd snapshots; one
// that cannot be read is listed with why.
func etcdSnapshotInfos(store *backupstore.Store) ([]EtcdSnapshotInfo, error) {
	names, err := store.EtcdSnapshots()
	if err != nil {
		return nil, err
	}
	infos := []EtcdSnapshotInfo{}
	for _, name := range names {
		s, err := store.ReadEtcdSnapshot(name)
		if err != nil {
			infos = append(infos, EtcdSnapshotInfo{Kind: KindEtcdSnapshot, Name: name, Problems: []string{exitcode.Message(err)}})
			continue
		}
		infos = append(infos, EtcdSnapshotInfo{Kind: KindEtcdSnapshot, Name: name, Path: s.Path, EtcdSnapshotMeta: s.EtcdSnapshotMeta})
	}
	return infos, nil
}

// verifyEtcdSnapshot reads an etcd snapshot whole. An error is one that
// says nothing of the file (exit codes other than 3).
func verifyEtcdSnapshot(store *backupstore.Store, name string) (EtcdSnapshotInfo, error) {
	info := EtcdSnapshotInfo{Kind: KindEtcdSnapshot, Name: name}
	s, err := store.ReadEtcdSnapshot(name)
	if err == nil {
		info.Path, info.EtcdSnapshotMeta = s.Path, s.EtcdSnapshotMeta
		info.Problems, err = store.VerifyEtcdSnapshot(s)
	}
	if err != nil {
		if exitcode.FromError(err) != exitcode.Invalid {
			return info, err
		}
		info.Problems = []string{exitcode.Message(err)}
	}
	ok := len(info.Problems) == 0
	info.ChecksumOK = &ok
	return info, nil
}

// printEtcdSnapshots writes list's table of etcd snapshots.
func printEtcdSnapshots(out io.Writer, infos []EtcdSnapshotInfo) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ETCD SNAPSHOT\tNODE\tMEMBER\tCLUSTER\tTIME\tREVISION\tETCD\tSIZE")
	for _, i := range infos {
		if i.Problems != nil {
			fmt.Fprintf(w, "%s\t-\t-\t-\t-\t-\t-\tunreadable\n", i.Name)
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\n", i.Name, i.Node, cmdutil.OrDash(i.Member), i.ClusterID,
			i.Time.Format(time.RFC3339), i.Revision, cmdutil.OrDash(i.EtcdVersion), i.Size)
	}
	return w.Flush()
}
