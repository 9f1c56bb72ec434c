//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package controlplane

import (
	"os"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// An empty manifests directory is refused, never taken for the working
// directory: a Go caller that left it empty once had a lock file written
// wherever it ran.
func TestLockRefusesNoDirectory(t *testing.T) {
	t.Chdir(t.TempDir())
	unlock, err := Lock("")
	if err == nil {
		unlock()
	}
	if exitcode.FromError(err) != exitcode.Usage {
		t.Fatalf("Lock(\"\") = %v, want a usage error", err)
	}
	if _, err := os.Stat(lockFile); !os.IsNotExist(err) {
		t.Fatalf("a lock file was written in the working directory (%v)", err)
	}
}
