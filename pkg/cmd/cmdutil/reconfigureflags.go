package cmdutil

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// ReconfigureFlags are the flags of a verb that reconfigures the node it
// runs on, with pkg/reconfigure: reconfigure once, the agent on each turn.
// Both take them from here, so that a node is described the same way to
// both.
type ReconfigureFlags struct {
	Node         clusterconfig.NodeConfig
	ManifestsDir string
	Kubeadm      string
	Wait         time.Duration
	Key          string
	// StateConfigMap names the upgrade record, as the upgrade verbs'
	// --state-configmap does: a reconfiguration does not run while it says
	// an upgrade is in progress.
	StateConfigMap string
	Backup         *BackupFlags
	// CertificatesDir is the node's kubeadm certificates directory
	// (--cert-dir, as kubeadm names it), where the etcd client certificate
	// is; "" is the ClusterConfiguration's certificatesDir.
	CertificatesDir string
	// NoEtcdSnapshot skips the etcd snapshot taken before the node's etcd
	// member is changed.
	NoEtcdSnapshot bool
	// BindPortGiven is whether --bind-port was given (Complete sets it):
	// only a port given is checked.
	BindPortGiven bool
}

// NewReconfigureFlags returns kubeadm's defaults.
func NewReconfigureFlags() *ReconfigureFlags {
	return &ReconfigureFlags{ManifestsDir: "/etc/kubernetes/manifests", Kubeadm: "kubeadm", Wait: 5 * time.Minute,
		Key: engine.DefaultKey, StateConfigMap: upgrade.DefaultConfigMap, Backup: NewBackupFlags()}
}

// AddFlags binds the node flags (--node-name, --advertise-address,
// --bind-port, with help saying what they mean to cmd), --patches,
// --manifests-dir, --kubeadm, --wait, --key, --state-configmap, --cert-dir,
// --no-etcd-snapshot, --backup-dir and --keep.
func (f *ReconfigureFlags) AddFlags(cmd *cobra.Command, help NodeHelp) {
	fs := cmd.Flags()
	AddNodeFlags(cmd, &f.Node, help)
	fs.StringVar(&f.Node.PatchesDir, "patches", f.Node.PatchesDir, "Directory of kubeadm patches this node's manifests are rendered with")
	fs.StringVar(&f.ManifestsDir, "manifests-dir", f.ManifestsDir, "The kubelet's static Pod manifests directory")
	fs.StringVar(&f.Kubeadm, "kubeadm", f.Kubeadm, "The kubeadm binary that renders the manifests (1.36 or later)")
	fs.DurationVar(&f.Wait, "wait", f.Wait, "How long each changed component may take to come up healthy before the rollback (at least 30s)")
	fs.StringVar(&f.Key, "key", f.Key, "ConfigMap key that holds the ClusterConfiguration")
	fs.StringVar(&f.StateConfigMap, "state-configmap", f.StateConfigMap, "Name of the ConfigMap that holds the upgrade state (in -n)")
	fs.StringVar(&f.CertificatesDir, "cert-dir", f.CertificatesDir,
		"This node's kubeadm certificates directory, holding the etcd client certificate its etcd member is checked with (default: the ClusterConfiguration's certificatesDir, /etc/kubernetes/pki)")
	fs.BoolVar(&f.NoEtcdSnapshot, "no-etcd-snapshot", f.NoEtcdSnapshot, "Change this node's etcd member without taking an etcd snapshot into --backup-dir first")
	f.Backup.AddFlags(cmd, false)
}

// Complete fills the node name from the hostname, as kubeadm does.
func (f *ReconfigureFlags) Complete(cmd *cobra.Command) error {
	f.BindPortGiven = cmd.Flags().Changed("bind-port")
	if f.Node.Name == "" {
		name, err := controlplane.NodeName()
		if err != nil {
			return exitcode.Failuref("cannot read the hostname for the node name (give --node-name): %w", err)
		}
		f.Node.Name = name
	}
	return nil
}

// NodeFor is the node the flags describe, as every reconfiguration of it
// sees it: config reads kubeadm-config and the node's mirror Pods, server
// is recorded in the backups and now is the API server's clock. The
// reconfigure verb builds it once for its run, the agent once for all its
// turns.
func (f *ReconfigureFlags) NodeFor(config *engine.Engine, server string, now func() time.Time) reconfigure.Node {
	return reconfigure.Node{
		Config: config, Store: f.Backup.Store(), Keep: f.Backup.Keep, Server: server,
		NodeConfig: f.Node, ManifestsDir: f.ManifestsDir, Kubeadm: f.Kubeadm,
		CertificatesDir: f.CertificatesDir, UpgradeConfigMap: f.StateConfigMap, Now: now,
	}
}

// Validate checks the values without I/O.
func (f *ReconfigureFlags) Validate() error {
	if err := ValidateNode(f.Node, f.BindPortGiven); err != nil {
		return err
	}
	if f.Wait < controlplane.MinWait {
		return exitcode.Usagef("--wait must be at least %s, not %s: a restarting kube-apiserver may take the kubelet's 30s grace period just to stop",
			controlplane.MinWait, f.Wait)
	}
	if strings.TrimSpace(f.ManifestsDir) == "" {
		return exitcode.Usagef("--manifests-dir must not be empty")
	}
	if strings.TrimSpace(f.Kubeadm) == "" {
		return exitcode.Usagef("--kubeadm must not be empty")
	}
	if strings.TrimSpace(f.Key) == "" {
		return exitcode.Usagef("--key must not be empty")
	}
	if strings.TrimSpace(f.StateConfigMap) == "" {
		return exitcode.Usagef("--state-configmap must not be empty")
	}
	return f.Backup.Validate()
}
