package backup

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	backupstore "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// PruneOptions removes old backups.
type PruneOptions struct {
	Backup *cmdutil.BackupFlags
	Print  *cmdutil.PrintFlags
	// KeepEtcdSnapshots is how many etcd snapshots of each node are kept:
	// their own count, since one is as large as the etcd database.
	KeepEtcdSnapshots int
	genericiooptions.IOStreams
}

// NewPruneOptions returns options with defaults.
func NewPruneOptions(streams genericiooptions.IOStreams) *PruneOptions {
	return &PruneOptions{Backup: cmdutil.NewBackupFlags(), Print: cmdutil.NewPrintFlags(), KeepEtcdSnapshots: backupstore.DefaultKeepEtcdSnapshots, IOStreams: streams}
}

// NewCmdBackupPrune builds backup prune.
func NewCmdBackupPrune(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewPruneOptions(streams)
	cmd := &cobra.Command{
		Use:     "prune --keep N",
		Short:   "Remove the oldest backups beyond N of each ConfigMap",
		Long:    "Remove, for each ConfigMap (each cluster, by the ConfigMap's uid) with backups in --backup-dir, its oldest backups beyond the newest N, and for each node's etcd member, its oldest etcd snapshots beyond --keep-etcd-snapshots. Files the plugin did not write are never removed.",
		Example: "  # Keep the 10 newest backups\n  kubectl kubeadmcfg backup prune --keep 10",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().IntVar(&o.Backup.Keep, "keep", o.Backup.Keep, "Number of newest backups to keep")
	cmd.Flags().IntVar(&o.KeepEtcdSnapshots, "keep-etcd-snapshots", o.KeepEtcdSnapshots, "Number of newest etcd snapshots of each node to keep")
	o.Backup.AddDirFlag(cmd)
	o.Print.AddFlags(cmd)
	return cmd
}

// Complete builds the printer.
func (o *PruneOptions) Complete(*cobra.Command, []string) error { return o.Print.Complete() }

// Validate checks --keep and --keep-etcd-snapshots.
func (o *PruneOptions) Validate() error {
	if o.KeepEtcdSnapshots < 1 {
		return exitcode.Usagef("--keep-etcd-snapshots must be at least 1, not %d", o.KeepEtcdSnapshots)
	}
	return o.Backup.Validate()
}

// Run prunes and prints what it removed. A prune that removed something,
// or went on past a damaged last known good record, prints the list before
// it fails (exit 3 for the record): the files are gone either way, and the
// list is the only account of them. A damaged record does not stop the
// etcd snapshots' pruning, which no record protects.
func (o *PruneOptions) Run(context.Context) error {
	store := o.Backup.Store()
	removed, err := store.Prune(o.Backup.Keep)
	var damaged *backupstore.DamagedError
	if err == nil || errors.As(err, &damaged) {
		snapshots, serr := store.PruneEtcdSnapshots(o.KeepEtcdSnapshots)
		removed = append(removed, snapshots...)
		if serr != nil {
			err = errors.Join(err, serr)
		}
	}
	if err != nil && len(removed) == 0 && !errors.As(err, &damaged) {
		return err // nothing was pruned
	}
	if removed == nil {
		removed = []string{}
	}
	if !o.Print.Human() {
		if perr := o.Print.Print(o.Out, map[string]any{"removed": removed}); perr != nil {
			return errors.Join(err, perr)
		}
		return err
	}
	for _, name := range removed {
		fmt.Fprintf(o.Out, "removed %s\n", name)
	}
	fmt.Fprintf(o.ErrOut, "%d backups removed\n", len(removed))
	return err
}
