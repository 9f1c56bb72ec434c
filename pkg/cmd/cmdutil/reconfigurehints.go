package cmdutil

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	reconfigurenode "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// The flags that fix what a reconfiguration of a node runs into, for every
// verb that runs one with the node flags: reconfigure, and the agent,
// which logs them.

// ReconfigureHint adds to an error of pkg/reconfigure the flag of cmd that
// fixes it: the domain package says at which stage a run stopped, this
// layer knows which flag governs that stage.
func ReconfigureHint(cmd *cobra.Command, err error) error {
	var notRecorded *reconfigurenode.NotRecordedError
	if errors.As(err, &notRecorded) {
		return &reconfigurenode.NotRecordedError{Healthy: notRecorded.Healthy, Err: ReconfigureHint(cmd, notRecorded.Err)}
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
	var snapshot *reconfigurenode.EtcdSnapshotError
	var creds *reconfigurenode.EtcdCredentialsError
	// A hint names only a flag cmd has: the agent has no --components and
	// overrides no refusal.
	has := func(flag string) bool { return cmd.Flags().Lookup(flag) != nil }
	switch {
	case stage.Stage == reconfigurenode.StageLock && !errors.As(err, &busy):
		return exitcode.WithHint(err, "check --manifests-dir")
	case stage.Stage == reconfigurenode.StageDiscover:
		return exitcode.WithHint(err, "give --advertise-address and --bind-port")
	case stage.Stage == reconfigurenode.StageRender && !errors.As(err, &kubeadm):
		return exitcode.WithHint(err, "check --kubeadm")
	case stage.Stage == reconfigurenode.StagePlan && has("components"):
		return exitcode.WithHint(err, "check --manifests-dir and --components")
	case stage.Stage == reconfigurenode.StagePlan:
		return exitcode.WithHint(err, "check --manifests-dir")
	case stage.Stage == reconfigurenode.StageBackup:
		return exitcode.WithHint(err, "check --backup-dir")
	case stage.Stage == reconfigurenode.StageVersion && has("allow-version-change"):
		return exitcode.WithHint(err, "pass --allow-version-change to apply it anyway")
	case stage.Stage == reconfigurenode.StageUpgrade && errors.As(err, &inProgress) && has("allow-during-upgrade"):
		return exitcode.WithHint(err, "pass --allow-during-upgrade to reconfigure anyway")
	case stage.Stage == reconfigurenode.StageUpgrade && errors.As(err, &inProgress):
	case stage.Stage == reconfigurenode.StageUpgrade && has("allow-during-upgrade"):
		return exitcode.WithHint(err, "check --state-configmap, or pass --allow-during-upgrade to go on without the upgrade record")
	case stage.Stage == reconfigurenode.StageUpgrade:
		return exitcode.WithHint(err, "check --state-configmap")
	case stage.Stage == reconfigurenode.StageEtcd && errors.As(err, &snapshot):
		return exitcode.WithHint(err, "check --backup-dir, or pass --no-etcd-snapshot to change the member without one")
	case stage.Stage == reconfigurenode.StageEtcd && errors.As(err, &creds):
		return exitcode.WithHint(err, "give this node's kubeadm certificates directory with --cert-dir")
	}
	return err
}

// ReconfigureWarning words one of the run's warnings, with the flag of
// cmd that fixes it; components are the --components as given.
func ReconfigureWarning(cmd *cobra.Command, w error, components []string) string {
	var partial *reconfigurenode.PartialError
	var notRecorded *reconfigurenode.NotRecordedError
	switch {
	case errors.As(w, &partial):
		// The components as the user named them.
		return "not recorded as the last known good: only " + strings.Join(components, ",") + " reconfigured"
	case errors.As(w, &notRecorded):
		return ReconfigureHint(cmd, notRecorded).Error()
	}
	return exitcode.Message(w)
}
