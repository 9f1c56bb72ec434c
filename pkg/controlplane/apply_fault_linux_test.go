//go:build linux

package controlplane

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// A replace that fails the way a full disk makes it fail: the write of the
// temporary file gets an error (here EFBIG, from a file size limit set on
// the test process just before the component's replace), so the rename never
// happens and the manifest on disk is the one the kubelet runs. The write
// that would put it back fails the same way. A component whose manifest
// never changed must not be reported as possibly down (exit 9), nor as
// rolled back.
func TestApplyReplaceThatFailsLeavesTheManifestIntact(t *testing.T) {
	// Bigger than the limit: its write fails. The other manifests are
	// smaller, so their writes (and put-backs) go through.
	big := "--v=0 --padding=" + strings.Repeat("x", 2048)
	for _, tc := range []struct {
		name    string
		failing Component
		changes map[Component]string
		code    exitcode.Code
		want    string
		// rolledBack are the components the error says were put back.
		rolledBack []Component
	}{
		{"the first component", APIServer, map[Component]string{APIServer: big + " --v=2"}, exitcode.Failure,
			"file too large (the manifest on disk is unchanged)", nil},
		{"after another was replaced", Scheduler, map[Component]string{APIServer: "--v=2", Scheduler: big + " --v=3"}, exitcode.RolledBack,
			"file too large (the manifest on disk is unchanged); rolled back kube-apiserver: the node is back on its previous configuration",
			[]Component{APIServer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			n.write(tc.failing, big)
			var limited bool
			restore := func() {
				if limited {
					limitFileSize(t, 0)
					limited = false
				}
			}
			defer restore()
			_, err := n.apply(tc.changes, func(o *Options) {
				progress := o.Progress
				o.Progress = func(e Event) {
					progress(e)
					switch {
					case e.Kind == EventReplacing && e.Component == tc.failing:
						limitFileSize(t, 1024)
						limited = true
					case e.Kind == EventRollingBack:
						restore()
					}
				}
			})
			restore()
			if code := exitcode.FromError(err); code != tc.code || err == nil || !strings.HasSuffix(err.Error(), tc.want) ||
				!strings.HasPrefix(err.Error(), "replace "+filepath.Join(n.kubelet.dir, tc.failing.File())+": ") {
				t.Fatalf("exit %d: %v; want exit %d ending in %q", code, err, tc.code, tc.want)
			}
			var rb *RollbackError
			if errors.As(err, &rb) {
				t.Errorf("a component whose manifest never changed is reported down: %v", err)
			}
			var failed *FailedError
			if errors.As(err, &failed) {
				if diff := cmp.Diff(tc.rolledBack, failed.RolledBack); diff != "" {
					t.Errorf("rolled back (-want +got):\n%s", diff)
				}
			}
			if got := n.read(tc.failing); got != string(manifestFor(tc.failing, n.port, big)) {
				t.Errorf("the %s manifest changed:\n%s", tc.failing.PodName(), got)
			}
			for c := range tc.changes {
				if c != tc.failing && n.read(c) != string(manifestFor(c, n.port, "--v=0")) {
					t.Errorf("%s is not back on its previous manifest", c.PodName())
				}
			}
		})
	}
}

// limitFileSize sets the process's file size limit (RLIMIT_FSIZE) to max
// bytes, or back to unlimited for 0. The Go runtime ignores SIGXFSZ, so a
// write past it fails with EFBIG, as a write to a full disk fails with
// ENOSPC.
func limitFileSize(t *testing.T, max uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = max
	if max == 0 {
		lim.Cur = lim.Max
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
}
