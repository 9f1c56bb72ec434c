// Package reconfigure is the reconfigure verb: it applies the
// ClusterConfiguration to this node's control-plane static Pods. It reads
// the flags, runs pkg/reconfigure (imported as reconfigurenode), which
// drives pkg/controlplane, pkg/engine and pkg/backup, adds the flag that
// fixes a failure, and prints the progress and the result.
package reconfigure

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	reconfigurenode "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

const reconfigureLong = `Apply the ClusterConfiguration to this node's control-plane static Pods.

Changing kubeadm-config changes nothing by itself: every control-plane node's
static Pod manifests must be regenerated from it. reconfigure does that on the
node it runs on. It builds the node's kubeadm config file from the live
ClusterConfiguration (or a backup) and an InitConfiguration of the same
apiVersion holding this node's own values, read back from its running
kube-apiserver manifest as 'kubeadm upgrade node' does (the advertise endpoint
annotation; the node name is the hostname) unless given. The real kubeadm
renders the manifests ('kubeadm init phase control-plane COMPONENT --dry-run'
into a private temporary directory), so nothing is rendered by hand and
kubeadm writes nothing under /etc/kubernetes. Per-node values never go into
the ConfigMap: reconfigure does not write it at all.

reconfigure changes a node's configuration, never its versions, which are
kubeadm upgrade's to change (with etcd and the kubelet). It refuses, exit 4
and before anything changes (on a dry run too), when a rendered image tag
differs from the running manifest's, or when kubeadm is of another minor
release than kubernetesVersion: --allow-version-change overrides that. It
also refuses while the upgrade record (--state-configmap, see upgrade-status)
says an upgrade is in progress, from its start until it is complete or
aborted: --allow-during-upgrade overrides that, and only that.

A component whose rendered manifest equals the running one is left alone.
The others are changed one at a time, kube-apiserver first, then
kube-controller-manager, then kube-scheduler, then etcd: the running manifest
is backed up beside the ClusterConfiguration backups, replaced atomically,
and then reconfigure waits until the kubelet runs the new one (its mirror
Pod's kubernetes.io/config.hash changes, as kubeadm upgrade waits) and the
component answers its manifest's own probe. While kube-apiserver restarts,
the API may be down on this node: that is waited through. A component the
kubelet reports crash-looping on its new manifest fails at once.

On a node with a local etcd member (an etcd.yaml manifest, and no
etcd.external: an external etcd is left alone, and the output says so) the
member is a component too, rendered by 'kubeadm init phase etcd local' with
the running member's --initial-cluster and --initial-cluster-state kept
(etcd reads them only when its data directory is empty). It is changed last,
on its own, once the other components are healthy, and only one member of the
cluster at a time: reconfigure holds the Lease kubeadmcfg-etcd-member while
it changes it. Before anything on the node changes it checks that every
member is healthy, no alarm is raised, the members are the control-plane
nodes, and quorum survives this member being down (exit 4 naming the member
in the way otherwise), and takes an etcd snapshot into --backup-dir
(--no-etcd-snapshot skips it). The member is back once it answers with the
same member ID, has caught up with the leader, every member is healthy, and
this node's API server answers /readyz; otherwise its previous manifest is put
back (exit 8, or 9 naming the member). Its data directory is never touched.

If a component is not healthy within --wait, the previous manifests of every
component this run changed are put back and waited for, and reconfigure exits
8 (failed, node back on its previous configuration), or 9 when they do not
come back healthy either (a component may be down; the error names it).
Nothing else exits 8 or 9: a manifest that could not be written (a full
disk) and is unchanged on disk is neither rolled back nor reported down.
After a fully healthy run, the ClusterConfiguration backup it applied becomes
this node's last known good ('backup list' shows it), which --latest-good
applies again.

Progress goes to stderr: one line per change when stderr is not a terminal,
nothing with -o.`

const reconfigureExample = `  # See what would change on this node, without changing it
  kubectl kubeadmcfg reconfigure --diff

  # Apply the live ClusterConfiguration to this node's control plane
  kubectl kubeadmcfg reconfigure

  # Only the node's etcd member, with its certificates in another directory
  kubectl kubeadmcfg reconfigure --components etcd --cert-dir /srv/kubernetes/pki

  # Only the API server, with the node's kubeadm patches, waiting at most 2 minutes
  kubectl kubeadmcfg reconfigure --components apiserver --patches /etc/kubernetes/patches --wait 2m

  # Go back to the configuration this node last ran healthy
  kubectl kubeadmcfg reconfigure --latest-good`

// Options carries the ClusterConfiguration to this node's
// control-plane static Pods.
type Options struct {
	Cluster *cmdutil.ClusterFlags
	*cmdutil.ReconfigureFlags
	Print *cmdutil.PrintFlags

	Components []string
	FromBackup string
	LatestGood bool
	DryRun     string
	Diff       bool
	NoRollback bool
	// AllowVersionChange and AllowDuringUpgrade override the refusals of
	// pkg/reconfigure's StageVersion and StageUpgrade.
	AllowVersionChange bool
	AllowDuringUpgrade bool

	components []controlplane.Component
	cmd        *cobra.Command
	node       reconfigurenode.Node // built once the clients are
	genericiooptions.IOStreams
}

// NewOptions returns options with defaults.
func NewOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *Options {
	return &Options{
		Cluster: cluster, ReconfigureFlags: cmdutil.NewReconfigureFlags(), Print: cmdutil.NewPrintFlags(),
		Components: []string{string(controlplane.APIServer), string(controlplane.ControllerManager), string(controlplane.Scheduler), string(controlplane.Etcd)},
		DryRun:     string(engine.DryRunNone), IOStreams: streams,
	}
}

// NewCmdReconfigure builds the reconfigure command.
func NewCmdReconfigure(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "reconfigure",
		Short:   "Apply the ClusterConfiguration to this node's control plane, health-checked, rolled back on failure",
		Long:    reconfigureLong,
		Example: reconfigureExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags binds the options' flags.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringSliceVar(&o.Components, "components", o.Components,
		"Components to reconfigure, always in the order apiserver, controller-manager, scheduler, etcd (etcd only on a node that runs a local member)")
	fs.StringVar(&o.FromBackup, "from-backup", o.FromBackup, "Apply the ClusterConfiguration of this backup instead of the live one")
	fs.BoolVar(&o.LatestGood, "latest-good", o.LatestGood, "Apply this node's last known good ClusterConfiguration (see 'backup list')")
	o.ReconfigureFlags.AddFlags(cmd, cmdutil.NodeHelp{
		Name:    "This node's name, which names its mirror Pods (default: the hostname, lowercased)",
		Address: "This node's API server advertise address (default: read from its kube-apiserver manifest)",
		Port:    "This node's API server port, digits only, 1-65535 (default: read from its kube-apiserver manifest)",
	})
	fs.StringVar(&o.DryRun, "dry-run", o.DryRun, `One of none, client. "client" (or --dry-run alone) prints the diff of each manifest that would change, and changes nothing`)
	fs.Lookup("dry-run").NoOptDefVal = string(engine.DryRunClient)
	fs.BoolVar(&o.Diff, "diff", o.Diff, "Print a unified diff of each manifest that would change, and change nothing (as --dry-run)")
	fs.BoolVar(&o.NoRollback, "no-rollback", o.NoRollback, "Leave a component that does not come up as it is (debugging)")
	fs.BoolVar(&o.AllowVersionChange, "allow-version-change", o.AllowVersionChange,
		"Apply even when a component's image tag would change, or kubeadm is of another minor release than kubernetesVersion (kubeadm upgrade's work)")
	fs.BoolVar(&o.AllowDuringUpgrade, "allow-during-upgrade", o.AllowDuringUpgrade,
		"Run even while the upgrade record (--state-configmap) says an upgrade is in progress, without reading it")
	o.Print.AddFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("components", cmdutil.FixedCompletion(
		string(controlplane.APIServer), string(controlplane.ControllerManager), string(controlplane.Scheduler), string(controlplane.Etcd)))
	_ = cmd.RegisterFlagCompletionFunc("from-backup", cmdutil.CompleteBackupNames(o.Backup))
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cmdutil.FixedCompletion(string(engine.DryRunNone), string(engine.DryRunClient)))
}

// Complete fills the node name and builds the read-only client.
func (o *Options) Complete(cmd *cobra.Command, _ []string) error {
	o.cmd = cmd
	if err := o.Print.Complete(); err != nil {
		return err
	}
	if err := o.ReconfigureFlags.Complete(cmd); err != nil {
		return err
	}
	c, err := o.Cluster.Clients()
	if err != nil {
		return err
	}
	o.node = o.NodeFor(engine.New(c.Client, o.Cluster.Target(o.Key), engine.Options{}), c.Server, c.Clock.Now)
	return nil
}

// Validate checks the flags without I/O.
func (o *Options) Validate() error {
	comps, err := controlplane.ParseComponents(o.Components)
	if err != nil {
		return exitcode.Usagef("--components: %w", err)
	}
	o.components = comps
	if o.FromBackup != "" && o.LatestGood {
		return exitcode.Usagef("give --from-backup or --latest-good, not both")
	}
	switch o.DryRun {
	case string(engine.DryRunNone), string(engine.DryRunClient):
	case string(engine.DryRunServer):
		return exitcode.Usagef(`--dry-run must be none or client, not "server": reconfigure changes files on this node, not objects in the API`)
	default:
		return exitcode.Usagef("--dry-run must be none or client, not %q", o.DryRun)
	}
	return o.ReconfigureFlags.Validate()
}

// dryRun reports whether the run only shows what would change.
func (o *Options) dryRun() bool { return o.DryRun == string(engine.DryRunClient) || o.Diff }

// Run renders, compares, applies and reports, with pkg/reconfigure.
func (o *Options) Run(ctx context.Context) error {
	p := newPrinter(o.ErrOut, o.Print.Human())
	defer p.done()
	rep, err := reconfigurenode.Run(ctx, o.node, reconfigurenode.Request{
		Source:     reconfigurenode.Source{Backup: o.FromBackup, LatestGood: o.LatestGood},
		Components: o.components, Wait: o.Wait, NoRollback: o.NoRollback, DryRun: o.dryRun(), NoEtcdSnapshot: o.NoEtcdSnapshot,
		AllowVersionChange: o.AllowVersionChange, AllowDuringUpgrade: o.AllowDuringUpgrade,
		Progress: p.event,
	})
	err = cmdutil.ReconfigureHint(o.cmd, err)
	if err != nil && rep == nil {
		return err
	}
	res := newResult(rep, func(w error) string { return cmdutil.ReconfigureWarning(o.cmd, w, o.Components) })
	if err != nil {
		// The apply failed: say what was done, rolled back or not.
		p.done()
		res.Error, res.ExitCode = exitcode.Message(err), int(exitcode.FromError(err))
		if !o.Print.Human() {
			_ = o.Print.Print(o.Out, res)
		}
		return err
	}
	return printResult(o.IOStreams, o.Print, res)
}
