package reconfigure

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	reconfigurenode "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// hint adds to an error of pkg/reconfigure the flag that fixes
// it: the domain package says at which stage a run stopped, this layer
// knows which flag governs that stage.
func hint(err error) error {
	var notRecorded *reconfigurenode.NotRecordedError
	if errors.As(err, &notRecorded) {
		return &reconfigurenode.NotRecordedError{Healthy: notRecorded.Healthy, Err: hint(notRecorded.Err)}
	}
	var noMirrorPod *controlplane.NoMirrorPodError
	if errors.As(err, &noMirrorPod) {
		return exitcode.New(exitcode.FromError(err), fmt.Errorf("%w (is --node-name this node's name?)", err))
	}
	var stage *reconfigurenode.StageError
	if !errors.As(err, &stage) {
		return err
	}
	var busy *controlplane.BusyError
	var kubeadm *controlplane.KubeadmError
	var inProgress *reconfigurenode.UpgradeInProgressError
	switch {
	case stage.Stage == reconfigurenode.StageLock && !errors.As(err, &busy):
		return exitcode.WithHint(err, "check --manifests-dir")
	case stage.Stage == reconfigurenode.StageDiscover:
		return exitcode.WithHint(err, "give --advertise-address and --bind-port")
	case stage.Stage == reconfigurenode.StageRender && !errors.As(err, &kubeadm):
		return exitcode.WithHint(err, "check --kubeadm")
	case stage.Stage == reconfigurenode.StagePlan:
		return exitcode.WithHint(err, "check --manifests-dir and --components")
	case stage.Stage == reconfigurenode.StageBackup:
		return exitcode.WithHint(err, "check --backup-dir")
	case stage.Stage == reconfigurenode.StageVersion:
		return exitcode.WithHint(err, "pass --allow-version-change to apply it anyway")
	case stage.Stage == reconfigurenode.StageUpgrade && errors.As(err, &inProgress):
		return exitcode.WithHint(err, "pass --allow-during-upgrade to reconfigure anyway")
	case stage.Stage == reconfigurenode.StageUpgrade:
		return exitcode.WithHint(err, "check --state-configmap, or pass --allow-during-upgrade to go on without the upgrade record")
	}
	return err
}

// warning words one of the run's warnings, with the flag that fixes it;
// components are the --components as given.
func warning(w error, components []string) string {
	var partial *reconfigurenode.PartialError
	var notRecorded *reconfigurenode.NotRecordedError
	switch {
	case errors.As(w, &partial):
		// The components as the user named them.
		return "not recorded as the last known good: only " + strings.Join(components, ",") + " reconfigured"
	case errors.As(w, &notRecorded):
		return hint(notRecorded).Error()
	}
	return exitcode.Message(w)
}
