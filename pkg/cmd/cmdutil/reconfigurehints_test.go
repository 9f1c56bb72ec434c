package cmdutil

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	reconfigurenode "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// pkg/reconfigure names no flag; the messages a user sees still do, word
// for word as before the orchestration left this layer.
func TestReconfigureHints(t *testing.T) {
	cmd := &cobra.Command{}
	cmd.Flags().StringSlice("components", nil, "")
	cmd.Flags().Bool("allow-version-change", false, "")
	cmd.Flags().Bool("allow-during-upgrade", false, "")
	cause := errors.New("open /m/.lock: permission denied")
	stage := func(s reconfigurenode.Stage, code exitcode.Code, err error) error {
		return &reconfigurenode.StageError{Stage: s, Err: exitcode.New(code, err)}
	}
	backupErr := &reconfigurenode.StageError{Stage: reconfigurenode.StageBackup,
		Err: exitcode.New(exitcode.Failure, errors.New("back up the ClusterConfiguration to apply, nothing was changed: disk full"))}
	for _, tc := range []struct {
		name string
		err  error
		code exitcode.Code
		want string
	}{
		{"lock", stage(reconfigurenode.StageLock, exitcode.Failure, cause), exitcode.Failure,
			"open /m/.lock: permission denied; check --manifests-dir"},
		{"busy", stage(reconfigurenode.StageLock, exitcode.Conflict, &controlplane.BusyError{Dir: "/m"}), exitcode.Conflict,
			"another reconfigure is running on /m; wait for it to end"},
		{"discover", stage(reconfigurenode.StageDiscover, exitcode.Failure, errors.New("no advertise address")), exitcode.Failure,
			"no advertise address; give --advertise-address and --bind-port"},
		{"kubeadm missing", stage(reconfigurenode.StageRender, exitcode.Failure, errors.New("exec: kubeadm: not found")), exitcode.Failure,
			"exec: kubeadm: not found; check --kubeadm"},
		{"kubeadm refuses", stage(reconfigurenode.StageRender, exitcode.Failure,
			&controlplane.KubeadmError{Component: controlplane.APIServer, Err: errors.New("exit status 1"), Output: "bad"}), exitcode.Failure,
			"kubeadm could not render the kube-apiserver manifest: exit status 1: bad"},
		{"plan", stage(reconfigurenode.StagePlan, exitcode.NotFound, errors.New("no kube-apiserver manifest")), exitcode.NotFound,
			"no kube-apiserver manifest; check --manifests-dir and --components"},
		{"backup", backupErr, exitcode.Failure,
			"back up the ClusterConfiguration to apply, nothing was changed: disk full; check --backup-dir"},
		{"no mirror Pod", exitcode.New(exitcode.NotFound, &controlplane.NoMirrorPodError{Pod: "kube-system/kube-apiserver-cp-9"}), exitcode.NotFound,
			"no mirror Pod kube-system/kube-apiserver-cp-9: without it there is no telling when the kubelet runs a new manifest (is --node-name this node's name?)"},
		{"rolled back", exitcode.New(exitcode.RolledBack, errors.New("kube-apiserver did not become healthy")), exitcode.RolledBack,
			"kube-apiserver did not become healthy"},
		{"version change", stage(reconfigurenode.StageVersion, exitcode.Conflict, &controlplane.VersionChangeError{Changes: []controlplane.ImageChange{
			{Component: controlplane.APIServer, Container: "kube-apiserver", Running: "v1.37.2", Rendered: "v1.37.3"}}}), exitcode.Conflict,
			"the rendered manifests change versions (kube-apiserver: image tag v1.37.2 -> v1.37.3): upgrade the node with kubeadm instead; pass --allow-version-change to apply it anyway"},
		{"kubeadm release", stage(reconfigurenode.StageVersion, exitcode.Conflict, &controlplane.KubeadmReleaseError{Kubeadm: "v1.38.0", KubernetesVersion: "v1.37.2"}), exitcode.Conflict,
			"kubeadm v1.38.0 is of another minor release than kubernetesVersion v1.37.2, and renders its own release's flags: use the kubeadm of the cluster's release; pass --allow-version-change to apply it anyway"},
		{"upgrade in progress", stage(reconfigurenode.StageUpgrade, exitcode.Conflict, &reconfigurenode.UpgradeInProgressError{
			ConfigMap: "kube-system/kubeadmcfg-upgrade", State: "upgrading-first-master", From: "v1.37.2", To: "v1.38.0"}), exitcode.Conflict,
			"an upgrade from v1.37.2 to v1.38.0 is in progress (state upgrading-first-master in configmap kube-system/kubeadmcfg-upgrade): " +
				"reconfiguring a node now could undo its work or mix releases; finish or abort the upgrade first; pass --allow-during-upgrade to reconfigure anyway"},
		{"etcd client certificate", stage(reconfigurenode.StageEtcd, exitcode.NotFound, &reconfigurenode.EtcdCredentialsError{Dir: "/etc/kubernetes/pki",
			Err: errors.New("no etcd client certificate in /etc/kubernetes/pki: open /etc/kubernetes/pki/etcd/ca.crt: no such file or directory (is this a control-plane node with a stacked etcd?)")}), exitcode.NotFound,
			"no etcd client certificate in /etc/kubernetes/pki: open /etc/kubernetes/pki/etcd/ca.crt: no such file or directory (is this a control-plane node with a stacked etcd?); give this node's kubeadm certificates directory with --cert-dir"},
		{"etcd snapshot", stage(reconfigurenode.StageEtcd, exitcode.Failure, &reconfigurenode.EtcdSnapshotError{Member: "etcd member cp-1 (ID 2, https://127.0.0.1:2379)",
			Err: errors.New("write etcd snapshot: no space left on device")}), exitcode.Failure,
			"no snapshot of etcd member cp-1 (ID 2, https://127.0.0.1:2379) could be taken before changing it, so nothing was changed: write etcd snapshot: no space left on device; " +
				"check --backup-dir, or pass --no-etcd-snapshot to change the member without one"},
		{"etcd member being changed", stage(reconfigurenode.StageEtcd, exitcode.Conflict, &reconfigurenode.EtcdBusyError{Lease: "kube-system/kubeadmcfg-etcd-member", Holder: "agent/cp-2/1", Node: "cp-2"}),
			exitcode.Conflict, "another etcd member is being changed (on node cp-2, by agent/cp-2/1, which holds lease kube-system/kubeadmcfg-etcd-member and renews it); one member is changed at a time: try again once it is done"},
		{"upgrade record unreadable", stage(reconfigurenode.StageUpgrade, exitcode.Forbidden, errors.New(`configmaps "kubeadmcfg-upgrade" is forbidden`)), exitcode.Forbidden,
			`configmaps "kubeadmcfg-upgrade" is forbidden; check --state-configmap, or pass --allow-during-upgrade to go on without the upgrade record`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ReconfigureHint(cmd, tc.err)
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" || exitcode.FromError(err) != tc.code {
				t.Errorf("exit %d, want %d; (-want +got):\n%s", exitcode.FromError(err), tc.code, diff)
			}
		})
	}

	for _, tc := range []struct {
		name    string
		warning error
		want    string
	}{
		{"partial, as the user named the components", &reconfigurenode.PartialError{Components: []controlplane.Component{controlplane.APIServer}},
			"not recorded as the last known good: only kube-apiserver reconfigured"},
		{"not healthy", &reconfigurenode.NotRecordedError{Err: errors.New("kube-scheduler: mirror Pod kube-system/kube-scheduler-cp-1 is not Ready")},
			"not recorded as the last known good: kube-scheduler: mirror Pod kube-system/kube-scheduler-cp-1 is not Ready"},
		{"not backed up", &reconfigurenode.NotRecordedError{Err: backupErr},
			"not recorded as the last known good: back up the ClusterConfiguration to apply, nothing was changed: disk full; check --backup-dir"},
		{"not recorded", &reconfigurenode.NotRecordedError{Healthy: true, Err: errors.New("record the last known good: read-only file system")},
			"the node is healthy, but its last known good was not recorded: record the last known good: read-only file system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ReconfigureWarning(cmd, tc.warning, []string{"kube-apiserver"})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The agent has no --components and overrides no refusal: its hints name
// the flags it has.
func TestReconfigureHintWithoutComponents(t *testing.T) {
	stage := func(s reconfigurenode.Stage, err error) error {
		return &reconfigurenode.StageError{Stage: s, Err: exitcode.New(exitcode.Conflict, err)}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{stage(reconfigurenode.StagePlan, errors.New("no kube-apiserver manifest")), "no kube-apiserver manifest; check --manifests-dir"},
		{stage(reconfigurenode.StageVersion, errors.New("the rendered manifests change versions")), "the rendered manifests change versions"},
		{stage(reconfigurenode.StageUpgrade, errors.New(`configmaps "kubeadmcfg-upgrade" is forbidden`)),
			`configmaps "kubeadmcfg-upgrade" is forbidden; check --state-configmap`},
	} {
		if got := ReconfigureHint(&cobra.Command{}, tc.err).Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
