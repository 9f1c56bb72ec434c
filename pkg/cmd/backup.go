package cmd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
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

// BackupInfo is one backup as list, backup and verify print it with -o.
type BackupInfo struct {
	Name              string    `json:"name"`
	Path              string    `json:"path"`
	Time              time.Time `json:"time"`
	Server            string    `json:"server"`
	ConfigMap         string    `json:"configMap"`
	UID               string    `json:"uid"`
	ResourceVersion   string    `json:"resourceVersion"`
	KubernetesVersion string    `json:"kubernetesVersion"`
	APIVersion        string    `json:"apiVersion"`
	Size              int64     `json:"size"`
	SHA256            string    `json:"sha256"`
	ChecksumOK        bool      `json:"checksumOK"`
	Reason            string    `json:"reason"`
	Problems          []string  `json:"problems,omitempty"`
	// LastKnownGoodOf are the nodes whose last known good this is
	// (reconfigure), and Manifests the manifests its run replaced.
	LastKnownGoodOf []string `json:"lastKnownGoodOf,omitempty"`
	Manifests       []string `json:"manifests,omitempty"`
}

func newBackupInfo(b *backup.Backup, problems []string) BackupInfo {
	return BackupInfo{
		Name: b.Name, Path: b.Path, Time: b.Time, Server: b.Server, ConfigMap: b.Namespace + "/" + b.ConfigMap, UID: b.UID,
		ResourceVersion: b.ResourceVersion, KubernetesVersion: b.KubernetesVersion, APIVersion: b.APIVersion,
		Size: b.Size, SHA256: b.SHA256, ChecksumOK: b.ChecksumOK(), Reason: b.Reason, Problems: problems,
	}
}

// BackupOptions backs up the live document.
type BackupOptions struct {
	Timeout time.Duration
	Cluster *cmdutil.ClusterFlags
	Backup  *cmdutil.BackupFlags
	Print   *cmdutil.PrintFlags
	Key     string

	engine *engine.Engine
	server string
	genericiooptions.IOStreams
}

// NewBackupOptions returns options with defaults.
func NewBackupOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *BackupOptions {
	return &BackupOptions{Cluster: cluster, Backup: cmdutil.NewBackupFlags(), Print: cmdutil.NewPrintFlags(), Key: engine.DefaultKey,
		Timeout: engine.DefaultTimeout, IOStreams: streams}
}

// NewCmdBackup builds the backup command and its list, verify and prune
// subcommands.
func NewCmdBackup(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewBackupOptions(cluster, streams)
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
func (o *BackupOptions) AddFlags(cmd *cobra.Command) {
	o.Backup.AddFlags(cmd, false)
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.Key, "key", o.Key, "ConfigMap key that holds the ClusterConfiguration")
	cmdutil.AddTimeoutFlag(cmd, &o.Timeout)
}

// Complete builds the printer and the client.
func (o *BackupOptions) Complete(_ *cobra.Command, _ []string) error {
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
func (o *BackupOptions) Validate() error {
	if strings.TrimSpace(o.Key) == "" {
		return exitcode.Usagef("--key must not be empty")
	}
	if err := cmdutil.ValidateTimeout(o.Timeout); err != nil {
		return err
	}
	return o.Backup.Validate()
}

// Budget bounds the whole command by --timeout.
func (o *BackupOptions) Budget() time.Duration { return o.Timeout }

// Run backs up the live document.
func (o *BackupOptions) Run(ctx context.Context) error {
	cm, err := o.engine.Get(ctx)
	if err != nil {
		return err
	}
	if _, err := engine.DocumentOf(cm, o.engine.Target()); err != nil {
		return err
	}
	hook := &backup.Hook{Store: o.Backup.Store(), Keep: o.Backup.Keep, Server: o.server, Reason: backup.ReasonManual}
	b, err := hook.Save(cm, o.Key, nil)
	if err != nil {
		return err
	}
	if !o.Print.Human() {
		return o.Print.Print(o.Out, newBackupInfo(b, nil))
	}
	_, err = fmt.Fprintln(o.Out, b.Path)
	return err
}
