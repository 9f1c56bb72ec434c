// Package backup is the backup family: backup saves the live
// ClusterConfiguration to a file; backup list, verify and prune work on the
// files. The files are pkg/backup's (imported as backupstore), the live
// document is read through pkg/engine, and list shows which backups are a
// node's last known good with pkg/reconfigure.
package backup

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	backupstore "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const backupLong = `Back up the live ClusterConfiguration to a timestamped, checksummed file.

A backup file is the document exactly as stored, preceded by a block of YAML
comments recording the API server, the ConfigMap's namespace, name and uid,
the resourceVersion captured, kubernetesVersion, apiVersion, the UTC time, the
sha256 of the document and the plugin's version. kubeadm accepts the file as
it is (kubeadm config validate --config FILE). Files are written atomically,
mode 0600, in a 0700 directory; names sort by time and never collide.

Every command that writes kubeadm-config (patch, restore) backs up the exact
document it replaces first, unless --no-backup.`

const backupExample = `  # Back up the live document and print the file's path
  kubectl kubeadmcfg backup

  # List backups, newest last
  kubectl kubeadmcfg backup list

  # Verify every backup (checksum and validation)
  kubectl kubeadmcfg backup verify --all

  # Keep only the 10 newest backups
  kubectl kubeadmcfg backup prune --keep 10`

// Options backs up the live document.
type Options struct {
	Timeout time.Duration
	Cluster *cmdutil.ClusterFlags
	Backup  *cmdutil.BackupFlags
	Print   *cmdutil.PrintFlags
	Key     string

	engine *engine.Engine
	server string
	genericiooptions.IOStreams
}

// NewOptions returns options with defaults.
func NewOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *Options {
	return &Options{Cluster: cluster, Backup: cmdutil.NewBackupFlags(), Print: cmdutil.NewPrintFlags(), Key: engine.DefaultKey,
		Timeout: engine.DefaultTimeout, IOStreams: streams}
}

// NewCmdBackup builds the backup command and its list, verify and prune
// subcommands.
func NewCmdBackup(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "backup",
		Short:   "Back up the ClusterConfiguration to a file; list, verify and prune backups",
		Long:    backupLong,
		Example: backupExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	o.AddFlags(cmd)
	cmd.AddCommand(NewCmdBackupList(streams), NewCmdBackupVerify(streams), NewCmdBackupPrune(streams))
	return cmd
}

// AddFlags binds the options' flags.
func (o *Options) AddFlags(cmd *cobra.Command) {
	o.Backup.AddFlags(cmd, false)
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.Key, "key", o.Key, "ConfigMap key that holds the ClusterConfiguration")
	cmdutil.AddTimeoutFlag(cmd, &o.Timeout)
}

// Complete builds the printer and the client.
func (o *Options) Complete(_ *cobra.Command, _ []string) error {
	if err := o.Print.Complete(); err != nil {
		return err
	}
	c, err := o.Cluster.Clients()
	if err != nil {
		return err
	}
	o.engine, o.server = engine.New(c.Client, o.Cluster.Target(o.Key), engine.Options{Timeout: o.Timeout}), c.Server
	return nil
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if strings.TrimSpace(o.Key) == "" {
		return exitcode.Usagef("--key must not be empty")
	}
	if err := cmdutil.ValidateTimeout(o.Timeout); err != nil {
		return err
	}
	return o.Backup.Validate()
}

// Budget bounds the whole command by --timeout.
func (o *Options) Budget() time.Duration { return o.Timeout }

// Run backs up the live document.
func (o *Options) Run(ctx context.Context) error {
	cm, err := o.engine.Get(ctx)
	if err != nil {
		return err
	}
	if _, err := engine.DocumentOf(cm, o.engine.Target()); err != nil {
		return err
	}
	hook := &backupstore.Hook{Store: o.Backup.Store(), Keep: o.Backup.Keep, Server: o.server, Reason: backupstore.ReasonManual}
	b, err := hook.Save(cm, o.Key, nil)
	if err != nil {
		return err
	}
	if !o.Print.Human() {
		return o.Print.Print(o.Out, newInfo(b, nil))
	}
	_, err = fmt.Fprintln(o.Out, b.Path)
	return err
}
