package backup

import (
	"syscall"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// checkSpace refuses to write up to size bytes into dir when that could
// leave less than a tenth of its filesystem free. A control-plane node's
// backup directory is usually on the disk that holds etcd's data and the
// kubelet's, whose default hard eviction threshold is nodefs.available<10%:
// a snapshot must never be what pushes the node under it. A filesystem that
// cannot be asked is not refused.
func checkSpace(dir string, size int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Bsize <= 0 || size < 0 {
		return nil
	}
	block := uint64(st.Bsize)
	avail, total := st.Bavail*block, st.Blocks*block
	need := uint64(size) + total/10
	if avail < need {
		return exitcode.Conflictf("not enough space in %s for an etcd snapshot of up to %d MiB: %d MiB are free and a tenth of the filesystem (%d MiB) must stay free",
			dir, size>>20, avail>>20, total/10>>20)
	}
	return nil
}
