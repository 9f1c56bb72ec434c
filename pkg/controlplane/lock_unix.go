//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// lockFile is the lock one reconfiguration of a manifests directory holds.
// It is a dot-file, which the kubelet ignores.
const lockFile = ".kubeadmcfg-reconfigure.lock"

// Lock takes the manifests directory for one reconfiguration at a time:
// two runs on one node must never interleave their replacements and
// rollbacks. It fails at once when another run holds it; the lock goes with
// the process, so a killed run never leaves it taken.
// An empty dir is refused: it would lock the working directory.
func Lock(dir string) (unlock func(), err error) {
	if dir == "" {
		return nil, exitcode.Usagef("no manifests directory to lock")
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the manifests directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, &BusyError{Dir: dir}
	}
	return func() { _ = f.Close() }, nil
}
