package cmd

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
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
}

func newBackupInfo(b *backup.Backup, problems []string) BackupInfo {
	return BackupInfo{
		Name: b.Name, Path: b.Path, Time: b.Time, ConfigMap: b.Namespace + "/" + b.ConfigMap, UID: b.UID,
		ResourceVersion: b.ResourceVersion, KubernetesVersion: b.KubernetesVersion, APIVersion: b.APIVersion,
		Size: b.Size, SHA256: b.SHA256, ChecksumOK: b.ChecksumOK(), Reason: b.Reason, Problems: problems,
	}
}

// BackupOptions backs up the live document.
type BackupOptions struct {
	Cluster *ClusterFlags
	Backup  *BackupFlags
	Print   *PrintFlags
	Key     string
	genericiooptions.IOStreams
}

// NewCmdBackup builds the backup command and its list, verify and prune
// subcommands.
func NewCmdBackup(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &BackupOptions{Cluster: cluster, Backup: NewBackupFlags(), Print: NewPrintFlags(), Key: engine.DefaultKey, IOStreams: streams}
	cmd := &cobra.Command{
		Use:     "backup",
		Short:   "Back up the ClusterConfiguration to a file; list, verify and prune backups",
		Long:    backupLong,
		Example: backupExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Backup.Check(); err != nil {
				return err
			}
			if err := o.Print.Validate(); err != nil {
				return err
			}
			return o.Run(cmd)
		},
	}
	o.Backup.AddFlags(cmd, false)
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.Key, "key", o.Key, "ConfigMap key that holds the ClusterConfiguration")
	cmd.AddCommand(newCmdBackupList(streams), newCmdBackupVerify(streams), newCmdBackupPrune(streams))
	return cmd
}

// Run backs up the live document.
func (o *BackupOptions) Run(cmd *cobra.Command) error {
	cs, cfg, err := o.Cluster.Clientset()
	if err != nil {
		return err
	}
	t := engine.Target{Namespace: o.Cluster.Namespace(), Name: o.Cluster.ConfigMap, Key: o.Key}
	cm, err := engine.Get(cmd.Context(), cs.CoreV1(), t)
	if err != nil {
		return err
	}
	if _, err := engine.Document(cm, t); err != nil {
		return err
	}
	b, err := o.Backup.Save(cm, o.Key, cfg.Host, backup.ReasonManual)
	if err != nil {
		return err
	}
	if !o.Print.Human() {
		return o.Print.Print(o.Out, newBackupInfo(b, nil))
	}
	_, err = fmt.Fprintln(o.Out, b.Path)
	return err
}

// backupStoreOptions is what list, verify and prune share.
type backupStoreOptions struct {
	Backup *BackupFlags
	Print  *PrintFlags
	genericiooptions.IOStreams
}

func newBackupStoreOptions(streams genericiooptions.IOStreams) *backupStoreOptions {
	return &backupStoreOptions{Backup: NewBackupFlags(), Print: NewPrintFlags(), IOStreams: streams}
}

func (o *backupStoreOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.Backup.Dir, "backup-dir", o.Backup.Dir, backupDirHelp)
	o.Print.AddFlags(cmd)
}

func newCmdBackupList(streams genericiooptions.IOStreams) *cobra.Command {
	o := newBackupStoreOptions(streams)
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List backups, oldest first",
		Long:    "List the backups in --backup-dir, oldest first, with their metadata and whether their checksum holds.",
		Example: "  # List backups as JSON\n  kubectl kubeadmcfg backup list -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Print.Validate(); err != nil {
				return err
			}
			return o.list()
		},
	}
	o.addFlags(cmd)
	return cmd
}

func (o *backupStoreOptions) list() error {
	store := o.Backup.Store()
	names, err := store.List()
	if err != nil {
		return err
	}
	infos := []BackupInfo{}
	for _, name := range names {
		b, err := store.Read(name)
		if err != nil {
			infos = append(infos, BackupInfo{Name: name, Problems: []string{exitcode.Message(err)}})
			continue
		}
		infos = append(infos, newBackupInfo(b, nil))
	}
	if !o.Print.Human() {
		return o.Print.Print(o.Out, infos)
	}
	if len(infos) == 0 {
		fmt.Fprintf(o.ErrOut, "no backups in %s\n", store.Dir)
		return nil
	}
	w := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tTIME\tRESOURCEVERSION\tKUBERNETES\tAPIVERSION\tSIZE\tCHECKSUM")
	for _, i := range infos {
		if i.Problems != nil {
			fmt.Fprintf(w, "%s\t-\t-\t-\t-\t-\tunreadable\n", i.Name)
			continue
		}
		check := "ok"
		if !i.ChecksumOK {
			check = "MISMATCH"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", i.Name, i.Time.Format(time.RFC3339), i.ResourceVersion,
			i.KubernetesVersion, i.APIVersion, i.Size, check)
	}
	return w.Flush()
}

func newCmdBackupVerify(streams genericiooptions.IOStreams) *cobra.Command {
	o := newBackupStoreOptions(streams)
	var all bool
	kubeadmVersion := clusterconfig.DefaultKubeadmVersion
	cmd := &cobra.Command{
		Use:   "verify (NAME... | --all)",
		Short: "Check backups' checksums and validate their documents",
		Long: `Check that each backup is a regular file with an intact header, that its
document matches its sha256, and that the document is a valid
ClusterConfiguration. Exit 3 naming what is wrong.`,
		Example: "  # Verify every backup\n  kubectl kubeadmcfg backup verify --all",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return exitcode.Usagef("give backup names or --all, not both or neither")
			}
			if err := clusterconfig.CheckKubeadmVersion(kubeadmVersion); err != nil {
				return exitcode.Usagef("--kubeadm-version: %w", err)
			}
			if err := o.Print.Validate(); err != nil {
				return err
			}
			return o.verify(args, clusterconfig.ValidateOptions{KubeadmVersion: kubeadmVersion})
		},
	}
	cmd.ValidArgsFunction = completeBackupNames(o.Backup)
	cmd.Flags().BoolVar(&all, "all", all, "Verify every backup in --backup-dir")
	cmd.Flags().StringVar(&kubeadmVersion, "kubeadm-version", kubeadmVersion, "Release of kubeadm whose rules validation applies")
	o.addFlags(cmd)
	return cmd
}

func (o *backupStoreOptions) verify(names []string, opts clusterconfig.ValidateOptions) error {
	store := o.Backup.Store()
	if len(names) == 0 {
		var err error
		if names, err = store.List(); err != nil {
			return err
		}
	}
	infos := []BackupInfo{}
	failed := 0
	for _, name := range names {
		b, err := store.Read(name)
		if err != nil {
			if exitcode.FromError(err) != exitcode.Invalid {
				return err
			}
			failed++
			infos = append(infos, BackupInfo{Name: name, Problems: []string{exitcode.Message(err)}})
			continue
		}
		problems := b.Verify(opts)
		if len(problems) > 0 {
			failed++
		}
		infos = append(infos, newBackupInfo(b, problems))
	}
	if !o.Print.Human() {
		if err := o.Print.Print(o.Out, infos); err != nil {
			return err
		}
	} else {
		for _, i := range infos {
			if len(i.Problems) == 0 {
				fmt.Fprintf(o.Out, "%s: ok\n", i.Name)
			}
			for _, p := range i.Problems {
				fmt.Fprintf(o.Out, "%s: %s\n", i.Name, p)
			}
		}
	}
	if failed > 0 {
		return exitcode.Invalidf("%d of %d backups failed verification", failed, len(infos))
	}
	return nil
}

func newCmdBackupPrune(streams genericiooptions.IOStreams) *cobra.Command {
	o := newBackupStoreOptions(streams)
	cmd := &cobra.Command{
		Use:     "prune --keep N",
		Short:   "Remove the oldest backups beyond N",
		Long:    "Remove the oldest backups in --backup-dir beyond the newest N. Files the plugin did not write are never removed.",
		Example: "  # Keep the 10 newest backups\n  kubectl kubeadmcfg backup prune --keep 10",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Backup.Check(); err != nil {
				return err
			}
			if err := o.Print.Validate(); err != nil {
				return err
			}
			removed, err := o.Backup.Store().Prune(o.Backup.Keep)
			if err != nil {
				return err
			}
			if removed == nil {
				removed = []string{}
			}
			if !o.Print.Human() {
				return o.Print.Print(o.Out, map[string]any{"removed": removed})
			}
			for _, name := range removed {
				fmt.Fprintf(o.Out, "removed %s\n", name)
			}
			fmt.Fprintf(o.ErrOut, "%d backups removed\n", len(removed))
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Backup.Keep, "keep", o.Backup.Keep, "Number of newest backups to keep")
	o.addFlags(cmd)
	return cmd
}
