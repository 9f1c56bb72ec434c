package upgrade

import (
	"errors"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

func TestCommandLineQuotesWhatAShellWould(t *testing.T) {
	got := commandLine([]string{"sh", "-c", "echo 'hi'; exit 3", ""})
	if want := `sh -c 'echo '\''hi'\''; exit 3' ''`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// pkg/upgrade names no flag; upgrade-run's message still does, as before.
func TestRunOfAStepWithoutItsOwnStateNamesHost(t *testing.T) {
	err := hostStepsHint(exitcode.New(exitcode.Usage, &upgradestate.HostStepsError{Step: "upgrading-kubelets", Plan: "starlingx"}))
	want := "upgrading-kubelets reaches no state of its own in plan starlingx: run its host steps with --host NODE, then move on with upgrade-set"
	if err.Error() != want || exitcode.FromError(err) != exitcode.Usage {
		t.Errorf("exit %d: %s, want exit 2: %s", exitcode.FromError(err), err, want)
	}
	other := exitcode.Conflictf("upgraded-first-master -> upgrading-storage is not allowed")
	if got := hostStepsHint(other); !errors.Is(got, other) || got.Error() != other.Error() {
		t.Errorf("another error was changed: %v", got)
	}
}
