package backup

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	backupstore "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// VerifyOptions verifies backups.
type VerifyOptions struct {
	Backup         *cmdutil.BackupFlags
	Print          *cmdutil.PrintFlags
	All            bool
	KubeadmVersion string
	Names          []string
	genericiooptions.IOStreams
}

// NewVerifyOptions returns options with defaults.
func NewVerifyOptions(streams genericiooptions.IOStreams) *VerifyOptions {
	return &VerifyOptions{Backup: cmdutil.NewBackupFlags(), Print: cmdutil.NewPrintFlags(), IOStreams: streams}
}

// NewCmdBackupVerify builds backup verify.
func NewCmdBackupVerify(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewVerifyOptions(streams)
	cmd := &cobra.Command{
		Use:   "verify (NAME... | --all)",
		Short: "Check backups' checksums and validate their documents",
		Long: `Check that each backup is a regular file with an intact header, that its
document matches its sha256, and that the document is a valid
ClusterConfiguration. An etcd snapshot is read whole: its size and sha256
must be its record's, and it must end in the sha256 etcd appends to a
snapshot, which etcdutl snapshot restore checks. Exit 3 naming what is wrong.`,
		Example: "  # Verify every backup\n  kubectl kubeadmcfg backup verify --all",
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
		ValidArgsFunction: cmdutil.CompleteBackupNames(o.Backup),
	}
	cmd.Flags().BoolVar(&o.All, "all", o.All, "Verify every backup and etcd snapshot in --backup-dir")
	cmd.Flags().StringVar(&o.KubeadmVersion, "kubeadm-version", o.KubeadmVersion, "Release of kubeadm whose rules validation applies: 1.35, 1.36 or 1.37 (default: the newest that reads the apiVersion, 1.36 for v1beta3); kubeadm refuses a kubernetesVersion more than one minor below itself")
	o.Backup.AddDirFlag(cmd)
	o.Print.AddFlags(cmd)
	return cmd
}

// Complete reads the names and builds the printer.
func (o *VerifyOptions) Complete(_ *cobra.Command, args []string) error {
	o.Names = args
	return o.Print.Complete()
}

// Validate checks the arguments and flags.
func (o *VerifyOptions) Validate() error {
	if o.All == (len(o.Names) > 0) {
		return exitcode.Usagef("give backup names or --all, not both or neither")
	}
	if err := clusterconfig.CheckKubeadmVersion(o.KubeadmVersion); err != nil {
		return exitcode.Usagef("--kubeadm-version: %w", err)
	}
	return nil
}

// Run verifies each backup and prints every problem.
func (o *VerifyOptions) Run(context.Context) error {
	store := o.Backup.Store()
	names := o.Names
	if o.All {
		var err error
		if names, err = store.List(); err != nil {
			return err
		}
		snapshots, err := store.EtcdSnapshots()
		if err != nil {
			return err
		}
		names = append(names, snapshots...)
	}
	opts := clusterconfig.ValidateOptions{KubeadmVersion: o.KubeadmVersion}
	infos := []any{}
	failed := 0
	report := func(name string, problems []string) {
		if len(problems) > 0 {
			failed++
		}
		if !o.Print.Human() {
			return
		}
		if len(problems) == 0 {
			fmt.Fprintf(o.Out, "%s: ok\n", name)
		}
		for _, p := range problems {
			fmt.Fprintf(o.Out, "%s: %s\n", name, p)
		}
	}
	for _, name := range names {
		if backupstore.IsEtcdSnapshotName(name) {
			info, err := verifyEtcdSnapshot(store, name)
			if err != nil {
				return err
			}
			report(name, info.Problems)
			infos = append(infos, info)
			continue
		}
		b, err := store.Read(name)
		if err != nil {
			if exitcode.FromError(err) != exitcode.Invalid {
				return err
			}
			report(name, []string{exitcode.Message(err)})
			infos = append(infos, Info{Kind: KindClusterConfiguration, Name: name, Problems: []string{exitcode.Message(err)}})
			continue
		}
		problems := b.Verify(opts)
		report(name, problems)
		infos = append(infos, newInfo(b, problems))
	}
	if !o.Print.Human() {
		if err := o.Print.Print(o.Out, infos); err != nil {
			return err
		}
	}
	if failed > 0 {
		return exitcode.Invalidf("%d of %d backups failed verification", failed, len(infos))
	}
	return nil
}
