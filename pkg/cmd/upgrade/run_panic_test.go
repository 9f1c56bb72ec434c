//go:build !windows

package upgrade

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// TestExecutePanicIsAnInternalError: the command is started, and waited
// for, in a goroutine of its own; a panic there (here, in the callback that
// records the pid) does not end the runner, which reports the step failed
// with exit 10 and the panic, as for any panic, rather than hanging on a
// start that never reports back.
func TestExecutePanicIsAnInternalError(t *testing.T) {
	out := execute(command{args: []string{"true"}, stdout: io.Discard, stderr: io.Discard,
		onStart: func(proc.Identity) { panic("recording broke") }}, make(chan os.Signal))
	if out.code != int(exitcode.Internal) || out.started || out.startErr == nil ||
		!strings.Contains(out.startErr.Error(), "internal error: recording broke") {
		t.Fatalf("code %d, started %v, error %v; want 10, not started, the panic", out.code, out.started, out.startErr)
	}
}
