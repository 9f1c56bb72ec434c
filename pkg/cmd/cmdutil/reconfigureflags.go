package cmdutil

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
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
	Backup       *BackupFlags
	// BindPortGiven is whether --bind-port was given (Complete sets it):
	// only a port given is checked.
	BindPortGiven bool
}

// NewReconfigureFlags returns kubeadm's defaults.
func NewReconfigureFlags() *ReconfigureFlags {
	return &ReconfigureFlags{ManifestsDir: "/etc/kubernetes/manifests", Kubeadm: "kubeadm", Wait: 5 * time.Minute,
		Key: engine.DefaultKey, Backup: NewBackupFlags()}
}

// AddFlags binds the node flags (--node-name, --advertise-address,
// --bind-port, with help saying what they mean to cmd), --patches,
// --manifests-dir, --kubeadm, --wait, --key, --backup-dir and --keep.
func (f *ReconfigureFlags) AddFlags(cmd *cobra.Command, help NodeHelp) {
	fs := cmd.Flags()
	AddNodeFlags(cmd, &f.Node, help)
	fs.StringVar(&f.Node.PatchesDir, "patches", f.Node.PatchesDir, "Directory of kubeadm patches this node's manifests are rendered with")
	fs.StringVar(&f.ManifestsDir, "manifests-dir", f.ManifestsDir, "The kubelet's static Pod manifests directory")
	fs.StringVar(&f.Kubeadm, "kubeadm", f.Kubeadm, "The kubeadm binary that renders the manifests (1.37 or later)")
	fs.DurationVar(&f.Wait, "wait", f.Wait, "How long each changed component may take to come up healthy before the rollback")
	fs.StringVar(&f.Key, "key", f.Key, "ConfigMap key that holds the ClusterConfiguration")
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

// Validate checks the values without I/O.
func (f *ReconfigureFlags) Validate() error {
	if err := ValidateNode(f.Node, f.BindPortGiven); err != nil {
		return err
	}
	if f.Wait <= 0 {
		return exitcode.Usagef("--wait must be positive, not %s", f.Wait)
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
	return f.Backup.Validate()
}
