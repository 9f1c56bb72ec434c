package backup

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

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
	}
	opts := clusterconfig.ValidateOptions{KubeadmVersion: o.KubeadmVersion}
	infos := []Info{}
	failed := 0
	for _, name := range names {
		b, err := store.Read(name)
		if err != nil {
			if exitcode.FromError(err) != exitcode.Invalid {
				return err
			}
			failed++
			infos = append(infos, Info{Name: name, Problems: []string{exitcode.Message(err)}})
			continue
		}
		problems := b.Verify(opts)
		if len(problems) > 0 {
			failed++
		}
		infos = append(infos, newInfo(b, problems))
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
