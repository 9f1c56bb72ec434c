package cmd

import (
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// validate -f /dev/zero ends at the limit with one clear error.
func TestValidateDevZero(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		done <- Run(genericiooptions.NewTestIOStreamsDiscard(), []string{"validate", "-f", "/dev/zero"})
	}()
	select {
	case err := <-done:
		want := "the config file /dev/zero is larger than 2 MiB, the limit for any input (twice what a ConfigMap holds)"
		if err == nil || err.Error() != want || exitcode.FromError(err) != exitcode.Invalid {
			t.Fatalf("got %v (exit %d), want %q (exit 3)", err, exitcode.FromError(err), want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("validate -f /dev/zero is still reading")
	}
}
