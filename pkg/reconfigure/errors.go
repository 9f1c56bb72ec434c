package reconfigure

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
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
	// StageUpgrade: the upgrade record says an upgrade is in progress
	// (UpgradeInProgressError), or it could not be read (UpgradeConfigMap,
	// AllowDuringUpgrade).
	StageUpgrade Stage = "upgrade"
	// StageVersion: the render would change versions
	// (controlplane.VersionChangeError), or kubeadm is of another minor
	// release than kubernetesVersion (controlplane.KubeadmReleaseError)
	// (AllowVersionChange; AllowImageChange lifts the first alone).
	StageVersion Stage = "version"
	// StageEtcd: the node's etcd member may not be changed now: another
	// member is being changed (EtcdBusyError), the cluster fails the
	// checks (etcd.RefusedError), or its client certificate is not in the
	// certificates directory (CertificatesDir), or the snapshot before the
	// change failed (NoEtcdSnapshot).
	StageEtcd Stage = "etcd"
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

// UpgradeInProgressError is a run refused because the upgrade record says
// an upgrade is in progress: a reconfiguration could undo what the upgrade
// did on this node, or give it the other release's configuration.
type UpgradeInProgressError struct {
	// ConfigMap holds the record, as namespace/name.
	ConfigMap string
	State     upgrade.State
	From, To  string
}

func (e *UpgradeInProgressError) Error() string {
	return fmt.Sprintf("an upgrade from %s to %s is in progress (state %s in configmap %s): reconfiguring a node now could undo its work or mix releases; finish or abort the upgrade first",
		orUnknown(e.From), orUnknown(e.To), e.State, e.ConfigMap)
}

func orUnknown(v string) string {
	if v == "" {
		return "(unknown)"
	}
	return v
}

// EtcdSnapshotError is the snapshot of the node's etcd member, taken before
// the member is changed, that failed: nothing was changed.
type EtcdSnapshotError struct {
	Member string
	Err    error
}

func (e *EtcdSnapshotError) Error() string {
	return fmt.Sprintf("no snapshot of %s could be taken before changing it, so nothing was changed: %s", e.Member, exitcode.Message(e.Err))
}

func (e *EtcdSnapshotError) Unwrap() error { return e.Err }

// EtcdCredentialsError is the node's etcd client certificate not found, or
// not readable, in the certificates directory Dir (CertificatesDir).
type EtcdCredentialsError struct {
	Dir string
	Err error
}

func (e *EtcdCredentialsError) Error() string { return exitcode.Message(e.Err) }

func (e *EtcdCredentialsError) Unwrap() error { return e.Err }
