package backup

import (
	"syscall"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// checkSpace refuses to write up to size bytes into dir when that could
// leave less than a tenth of its filesystem free (reservePercent). A control-plane node's
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
	percent := reservePercent()
	reserve := total / 100 * percent
	if avail < uint64(size)+reserve {
		return exitcode.Conflictf("not enough space in %s for an etcd snapshot of up to %d MiB: %d MiB are free and %d%% of the filesystem (%d MiB) must stay free",
			dir, size>>20, avail>>20, percent, reserve>>20)
	}
	return nil
}
