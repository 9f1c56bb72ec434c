package reconfigure

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Stage is a step of a run that depends on the node's settings.
type Stage string

// The stages a run can stop at before anything changed, each governed by a
// setting of the Request.
const (
	// StageLock: the manifests directory could not be locked (ManifestsDir),
	// or another reconfiguration holds it (controlplane.BusyError).
	StageLock Stage = "lock"
	// StageDiscover: the node's advertise address and port could not be
	// read from its kube-apiserver manifest (Node).
	StageDiscover Stage = "discover"
	// StageRender: kubeadm did not render the manifests (Kubeadm), or
	// refused the config file (controlplane.KubeadmError).
	StageRender Stage = "render"
	// StagePlan: the running manifests could not be compared with the
	// rendered ones (ManifestsDir, Components).
	StagePlan Stage = "plan"
	// StageBackup: the ClusterConfiguration to apply could not be backed up
	// (Store).
	StageBackup Stage = "backup"
)

// StageError is a run that stopped at Stage, or a warning about it. Its
// message is Err's: the stage only tells a caller which setting to point
// at.
type StageError struct {
	Stage Stage
	Err   error
}

func (e *StageError) Error() string { return e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

// lockError is the StageError of a manifests directory that cannot be
// locked: exit code 4 when another reconfiguration holds it, 1 otherwise.
func lockError(err error) error {
	var busy *controlplane.BusyError
	if errors.As(err, &busy) {
		return &StageError{Stage: StageLock, Err: exitcode.New(exitcode.Conflict, err)}
	}
	return &StageError{Stage: StageLock, Err: exitcode.New(exitcode.Failure, err)}
}

// PartialError is the warning of a healthy run over some components only:
// it is not recorded as the node's last known good, which stands for the
// whole control plane.
type PartialError struct {
	Components []controlplane.Component
}

func (e *PartialError) Error() string {
	names := make([]string, len(e.Components))
	for i, c := range e.Components {
		names[i] = string(c)
	}
	return fmt.Sprintf("not recorded as the last known good: only %s reconfigured", strings.Join(names, ","))
}

// NotRecordedError is the warning of a run after which the node's last
// known good was not recorded: the node could not be shown healthy on what
// it runs, or the applied document could not be backed up (Err says why),
// or, when Healthy, the node is healthy but the record failed.
type NotRecordedError struct {
	Healthy bool
	Err     error
}

func (e *NotRecordedError) Error() string {
	if e.Healthy {
		return "the node is healthy, but its last known good was not recorded: " + exitcode.Message(e.Err)
	}
	return "not recorded as the last known good: " + exitcode.Message(e.Err)
}

func (e *NotRecordedError) Unwrap() error { return e.Err }
