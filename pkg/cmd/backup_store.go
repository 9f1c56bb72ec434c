package cmd

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// The backup subcommands that work on the store alone: list, verify, prune.

// BackupListOptions lists backups.
type BackupListOptions struct {
	Backup *cmdutil.BackupFlags
	Print  *cmdutil.PrintFlags
	genericiooptions.IOStreams
}

// NewBackupListOptions returns options with defaults.
func NewBackupListOptions(streams genericiooptions.IOStreams) *BackupListOptions {
	return &BackupListOptions{Backup: cmdutil.NewBackupFlags(), Print: cmdutil.NewPrintFlags(), IOStreams: streams}
}

// NewCmdBackupList builds backup list.
func NewCmdBackupList(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewBackupListOptions(streams)
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List backups, oldest first",
		Long:    "List the backups in --backup-dir, oldest first, with their metadata and whether their checksum holds.",
		Example: "  # List backups as JSON\n  kubectl kubeadmcfg backup list -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	o.Backup.AddDirFlag(cmd)
	o.Print.AddFlags(cmd)
	return cmd
}

// Complete builds the printer.
func (o *BackupListOptions) Complete(*cobra.Command, []string) error { return o.Print.Complete() }

// Validate has nothing to check.
func (o *BackupListOptions) Validate() error { return nil }

// Run lists the backups.
func (o *BackupListOptions) Run(context.Context) error {
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
	if err := addReconfigureInfo(store, infos); err != nil {
		return err
	}
	if !o.Print.Human() {
		return o.Print.Print(o.Out, infos)
	}
	if len(infos) == 0 {
		fmt.Fprintf(o.ErrOut, "no backups in %s\n", store.Dir)
		return nil
	}
	w := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tCLUSTER\tUID\tTIME\tRESOURCEVERSION\tKUBERNETES\tAPIVERSION\tSIZE\tCHECKSUM\tLAST-KNOWN-GOOD")
	for _, i := range infos {
		if i.Problems != nil {
			fmt.Fprintf(w, "%s\t-\t-\t-\t-\t-\t-\t-\tunreadable\t-\n", i.Name)
			continue
		}
		check := "ok"
		if !i.ChecksumOK {
			check = "MISMATCH"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", i.Name, cmdutil.OrDash(i.Server), shortUID(i.UID),
			i.Time.Format(time.RFC3339), i.ResourceVersion, i.KubernetesVersion, i.APIVersion, i.Size, check,
			cmdutil.OrDash(strings.Join(i.LastKnownGoodOf, ",")))
	}
	return w.Flush()
}

// BackupVerifyOptions verifies backups.
type BackupVerifyOptions struct {
	Backup         *cmdutil.BackupFlags
	Print          *cmdutil.PrintFlags
	All            bool
	KubeadmVersion string
	Names          []string
	genericiooptions.IOStreams
}

// NewBackupVerifyOptions returns options with defaults.
func NewBackupVerifyOptions(streams genericiooptions.IOStreams) *BackupVerifyOptions {
	return &BackupVerifyOptions{Backup: cmdutil.NewBackupFlags(), Print: cmdutil.NewPrintFlags(), IOStreams: streams}
}

// NewCmdBackupVerify builds backup verify.
func NewCmdBackupVerify(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewBackupVerifyOptions(streams)
	cmd := &cobra.Command{
		Use:   "verify (NAME... | --all)",
		Short: "Check backups' checksums and validate their documents",
		Long: `Check that each backup is a regular file with an intact header, that its
document matches its sha256, and that the document is a valid
ClusterConfiguration. Exit 3 naming what is wrong.`,
		Example: "  # Verify every backup\n  kubectl kubeadmcfg backup verify --all",
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
		ValidArgsFunction: cmdutil.CompleteBackupNames(o.Backup),
	}
	cmd.Flags().BoolVar(&o.All, "all", o.All, "Verify every backup in --backup-dir")
	cmd.Flags().StringVar(&o.KubeadmVersion, "kubeadm-version", o.KubeadmVersion, "Release of kubeadm whose rules validation applies: 1.35, 1.36 or 1.37 (default: the newest that reads the apiVersion, 1.36 for v1beta3); kubeadm refuses a kubernetesVersion more than one minor below itself")
	o.Backup.AddDirFlag(cmd)
	o.Print.AddFlags(cmd)
	return cmd
}

// Complete reads the names and builds the printer.
func (o *BackupVerifyOptions) Complete(_ *cobra.Command, args []string) error {
	o.Names = args
	return o.Print.Complete()
}

// Validate checks the arguments and flags.
func (o *BackupVerifyOptions) Validate() error {
	if o.All == (len(o.Names) > 0) {
		return exitcode.Usagef("give backup names or --all, not both or neither")
	}
	if err := clusterconfig.CheckKubeadmVersion(o.KubeadmVersion); err != nil {
		return exitcode.Usagef("--kubeadm-version: %w", err)
	}
	return nil
}

// Run verifies each backup and prints every problem.
func (o *BackupVerifyOptions) Run(context.Context) error {
	store := o.Backup.Store()
	names := o.Names
	if o.All {
		var err error
		if names, err = store.List(); err != nil {
			return err
		}
	}
	opts := clusterconfig.ValidateOptions{KubeadmVersion: o.KubeadmVersion}
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

// BackupPruneOptions removes old backups.
type BackupPruneOptions struct {
	Backup *cmdutil.BackupFlags
	Print  *cmdutil.PrintFlags
	genericiooptions.IOStreams
}

// NewBackupPruneOptions returns options with defaults.
func NewBackupPruneOptions(streams genericiooptions.IOStreams) *BackupPruneOptions {
	return &BackupPruneOptions{Backup: cmdutil.NewBackupFlags(), Print: cmdutil.NewPrintFlags(), IOStreams: streams}
}

// NewCmdBackupPrune builds backup prune.
func NewCmdBackupPrune(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewBackupPruneOptions(streams)
	cmd := &cobra.Command{
		Use:     "prune --keep N",
		Short:   "Remove the oldest backups beyond N of each ConfigMap",
		Long:    "Remove, for each ConfigMap (each cluster, by the ConfigMap's uid) with backups in --backup-dir, its oldest backups beyond the newest N. Files the plugin did not write are never removed.",
		Example: "  # Keep the 10 newest backups\n  kubectl kubeadmcfg backup prune --keep 10",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().IntVar(&o.Backup.Keep, "keep", o.Backup.Keep, "Number of newest backups to keep")
	o.Backup.AddDirFlag(cmd)
	o.Print.AddFlags(cmd)
	return cmd
}

// Complete builds the printer.
func (o *BackupPruneOptions) Complete(*cobra.Command, []string) error { return o.Print.Complete() }

// Validate checks --keep.
func (o *BackupPruneOptions) Validate() error { return o.Backup.Validate() }

// Run prunes and prints what it removed.
func (o *BackupPruneOptions) Run(context.Context) error {
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
}

// addReconfigureInfo fills in which nodes have each backup as their last
// known good and which manifests reconfigure kept with it.
func addReconfigureInfo(store *backup.Store, infos []BackupInfo) error {
	lastGood, err := reconfigure.LastKnownGoods(store)
	if err != nil {
		return err
	}
	for i := range infos {
		infos[i].LastKnownGoodOf = lastGood[infos[i].Name]
		if infos[i].Problems == nil {
			if infos[i].Manifests, err = store.Manifests(infos[i].Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// shortUID shows the first block of a uid, enough to tell clusters apart in
// a table; -o json has it whole.
func shortUID(uid string) string {
	if head, _, ok := strings.Cut(uid, "-"); ok {
		return head
	}
	return cmdutil.OrDash(uid)
}
