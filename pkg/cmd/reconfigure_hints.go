package cmd

import (
	"errors"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// reconfigureHint adds to an error of pkg/reconfigure the flag that fixes
// it: the domain package says at which stage a run stopped, this layer
// knows which flag governs that stage.
func reconfigureHint(err error) error {
	var notRecorded *reconfigure.NotRecordedError
	if errors.As(err, &notRecorded) {
		return &reconfigure.NotRecordedError{Healthy: notRecorded.Healthy, Err: reconfigureHint(notRecorded.Err)}
	}
	var stage *reconfigure.StageError
	if !errors.As(err, &stage) {
		return err
	}
	var busy *controlplane.BusyError
	var kubeadm *controlplane.KubeadmError
	switch {
	case stage.Stage == reconfigure.StageLock && !errors.As(err, &busy):
		return exitcode.WithHint(err, "check --manifests-dir")
	case stage.Stage == reconfigure.StageDiscover:
		return exitcode.WithHint(err, "give --advertise-address and --bind-port")
	case stage.Stage == reconfigure.StageRender && !errors.As(err, &kubeadm):
		return exitcode.WithHint(err, "check --kubeadm")
	case stage.Stage == reconfigure.StagePlan:
		return exitcode.WithHint(err, "check --manifests-dir and --components")
	case stage.Stage == reconfigure.StageBackup:
		return exitcode.WithHint(err, "check --backup-dir")
	}
	return err
}
