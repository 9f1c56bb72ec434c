// Package restore puts a backup back: into the cluster through pkg/engine's
// compare-and-swap write, or into a kubeadm config file built by
// pkg/clusterconfig. Backups are read, verified and taken with pkg/backup.
package restore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

const restoreLong = `Restore a backup to the cluster, or to a kubeadm config file.

The backup is verified first (checksum and validation). Restoring to the
cluster shows the diff against the live document and writes the backup's
document, byte for byte, through the same compare-and-swap engine as patch:
a concurrent change is never overwritten blindly, and the checks below are
made again on every freshly read copy. The document being replaced is backed
up first, unless --no-backup.

A backup of another ConfigMap uid (another cluster, or a re-created
ConfigMap) or of another kubernetesVersion (a restore across an upgrade) is
refused with exit 4 unless --force.

With --to-file the ClusterConfiguration is written to a kubeadm config file
and the cluster is not touched. With --node-name, --advertise-address and
--bind-port an InitConfiguration of the same apiVersion is appended, so that
'kubeadm init phase control-plane all --config FILE' regenerates this node's
static pods. Per-node values only ever go into that file.

With --rollout the restore and its rollout are one step, as for patch: the
rollout's checks run first, and a rollout of exactly the document restored
starts after the write, taking every control-plane node back to it one at a
time (see 'rollout start' for --nodes, --canary, --try and --wait).`

const restoreExample = `  # Restore the newest backup, showing the diff first
  kubectl kubeadmcfg restore --latest

  # See what a restore would change without writing
  kubectl kubeadmcfg restore 20261129T191500.123456789Z-kubeadm-config-rv812-1a2b3c4d.yaml --dry-run=server

  # Write a kubeadm config file for regenerating this node's static pods
  kubectl kubeadmcfg restore --latest --to-file ./kubeadm.yaml --node-name controller-0 --advertise-address 192.0.2.10

  # Restore the newest backup and carry it to every control-plane node, until done
  kubectl kubeadmcfg restore --latest --rollout --wait`

// Options restores a backup.
type Options struct {
	Cluster *cmdutil.ClusterFlags
	Write   *cmdutil.WriteFlags
	Backup  *cmdutil.BackupFlags
	Print   *cmdutil.PrintFlags
	Rollout *cmdutil.RolloutFlags
	Latest  bool
	Force   bool
	ToFile  string
	Node    clusterconfig.NodeConfig
	// Name is the backup to restore, from the argument.
	Name string

	nodeFlags   bool // a per-node flag was given
	bindPortSet bool
	engine      *engine.Engine
	operator    *operator.Rollouts // with --rollout
	genericiooptions.IOStreams
}

// Result is what restore prints with -o.
type Result struct {
	*cmdutil.WriteResult `json:",inline"`
	Restored             string `json:"restored"`
	ToFile               string `json:"toFile,omitempty"`
}

// NewOptions returns options with defaults.
func NewOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *Options {
	return &Options{Cluster: cluster, Write: cmdutil.NewWriteFlags(), Backup: cmdutil.NewBackupFlags(), Print: cmdutil.NewPrintFlags(),
		Rollout: cmdutil.NewRolloutFlags(), IOStreams: streams}
}

// NewCmdRestore builds the restore command.
func NewCmdRestore(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "restore (NAME | --latest)",
		Short:   "Restore a backup to the cluster or to a kubeadm config file",
		Long:    restoreLong,
		Example: restoreExample,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return cmdutil.CompleteBackupNames(o.Backup)(c, args, toComplete)
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags binds the options' flags.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.BoolVar(&o.Latest, "latest", o.Latest, "Restore the newest backup of this ConfigMap")
	fs.BoolVar(&o.Force, "force", o.Force, "Restore even a backup of another ConfigMap uid or kubernetesVersion")
	fs.StringVar(&o.ToFile, "to-file", o.ToFile, "Write the backup to this kubeadm config file instead of the cluster (atomic, 0600)")
	cmdutil.AddNodeFlags(cmd, &o.Node, cmdutil.NodeHelp{
		Name:    "With --to-file: this node's name, for the InitConfiguration",
		Address: "With --to-file: this node's API server advertise address",
		Port:    "With --to-file: this node's API server port, digits only, 1-65535",
	})
	o.Write.AddFlags(cmd)
	o.Backup.AddFlags(cmd, true)
	o.Rollout.AddFlags(cmd, true)
	o.Print.AddFlags(cmd)
}

// Complete reads the argument and, unless writing a file, builds the write
// pipeline.
func (o *Options) Complete(cmd *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.Name = args[0]
	}
	o.nodeFlags, o.bindPortSet = cmdutil.NodeFlagsChanged(cmd), cmd.Flags().Changed("bind-port")
	o.Write.Complete()
	o.Rollout.Complete(cmd)
	if err := o.Print.Complete(); err != nil {
		return err
	}
	if o.ToFile != "" {
		return nil
	}
	c, err := o.Cluster.Clients()
	if err != nil {
		return err
	}
	o.engine = o.Write.ToEngine(c, o.Cluster, o.Backup.Hook(c.Server, backup.ReasonBeforeRestore))
	if o.Rollout.Rollout {
		o.operator = cmdutil.NewOperator(c, o.Cluster, o.Write.RetryFlags, o.engine, o.Rollout.Operator(o.Write.Timeout, o.Print.Progress(o.ErrOut)))
	}
	return nil
}

// Validate checks the arguments and flags without I/O.
func (o *Options) Validate() error {
	if o.Latest == (o.Name != "") {
		return exitcode.Usagef("give a backup name or --latest, not both or neither")
	}
	if o.nodeFlags && o.ToFile == "" {
		return exitcode.Usagef("--node-name, --advertise-address and --bind-port only go with --to-file: per-node values never go into the shared ConfigMap")
	}
	if err := cmdutil.ValidateNode(o.Node, o.bindPortSet); err != nil {
		return err
	}
	if o.Rollout.Rollout && o.ToFile != "" {
		return exitcode.Usagef("--rollout does not go with --to-file: a file is not rolled out to the nodes")
	}
	if err := o.Write.ValidateFlags(); err != nil {
		return err
	}
	if err := o.Rollout.Validate(); err != nil {
		return err
	}
	return o.Backup.Validate()
}

// Budget bounds the whole command by --timeout (a wait for the rollout only
// when --timeout is given).
func (o *Options) Budget() time.Duration { return o.Rollout.Budget(o.Write.Timeout) }

// Run verifies the backup and restores it.
func (o *Options) Run(ctx context.Context) error {
	b, err := o.read(ctx)
	if err != nil {
		return err
	}
	if problems := b.Verify(clusterconfig.ValidateOptions{KubeadmVersion: o.Write.KubeadmVersion}); len(problems) > 0 {
		return exitcode.Invalidf("backup %s failed verification, nothing was restored: %s", b.Name, strings.Join(problems, "; "))
	}
	if o.ToFile != "" {
		return o.toFile(b)
	}
	plan, err := o.Rollout.Plan(ctx, o.operator)
	if err != nil {
		return err
	}
	res, err := o.engine.ReplaceDocument(ctx, b.Document, func(cm *corev1.ConfigMap) error {
		if o.Force {
			return nil
		}
		return exitcode.WithHint(b.CheckTarget(cm, o.engine.Target().Key), "use --force to restore it anyway")
	})
	if err != nil {
		return err
	}
	out := &Result{
		WriteResult: cmdutil.NewWriteResult(o.engine.Target(), res, "restored from "+b.Name, true, "backup/"+b.Name),
		Restored:    b.Name,
	}
	return cmdutil.FinishWrite(ctx, o.IOStreams, o.Print, plan, res, rollout.SourceRestore, out.WriteResult, out)
}

// read opens the backup named, or the newest one of the live ConfigMap
// (by its uid: never another cluster's). With --to-file there is no cluster
// to ask, and the newest of the ConfigMap's name is taken only when all its
// backups are of one uid.
func (o *Options) read(ctx context.Context) (*backup.Backup, error) {
	store := o.Backup.Store()
	if !o.Latest {
		return store.Read(o.Name)
	}
	owner := backup.Owner{Namespace: o.Cluster.Namespace(), ConfigMap: o.Cluster.ConfigMap}
	if o.engine != nil {
		live, err := o.engine.Get(ctx)
		if err != nil {
			return nil, err
		}
		owner.UID = string(live.UID)
	}
	b, err := store.Latest(owner)
	if err == nil {
		fmt.Fprintf(o.ErrOut, "using backup %s (resourceVersion %s of %s, taken %s)\n",
			b.Name, b.ResourceVersion, b.Server, b.Time.Format(time.RFC3339))
	}
	return b, err
}

// toFile writes the backup as a kubeadm config file, with an
// InitConfiguration for this node when node values were given.
func (o *Options) toFile(b *backup.Backup) error {
	data, err := clusterconfig.ConfigFile(b.Document, b.APIVersion, o.Node)
	if err != nil {
		return err
	}
	// Check the file kubeadm will read, not only the backup's document: the
	// InitConfiguration holds this node's values.
	if r := clusterconfig.ValidateFile(data, clusterconfig.ValidateOptions{KubeadmVersion: o.Write.KubeadmVersion}); !r.Valid() {
		return exitcode.Invalidf("kubeadm would refuse the file, nothing was written to %s: %s", o.ToFile, r.Summary())
	}
	if err := backup.WriteFile(o.ToFile, data); err != nil {
		return err
	}
	out := &Result{WriteResult: &cmdutil.WriteResult{DryRun: "none", Warnings: []string{},
		Summary: fmt.Sprintf("wrote %s from backup %s", o.ToFile, b.Name)}, Restored: b.Name, ToFile: o.ToFile}
	return cmdutil.PrintWrite(o.IOStreams, o.Print, out.WriteResult, out)
}
