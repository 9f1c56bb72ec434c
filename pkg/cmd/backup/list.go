package backup

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	backupstore "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// ListOptions lists backups.
type ListOptions struct {
	Backup *cmdutil.BackupFlags
	Print  *cmdutil.PrintFlags
	genericiooptions.IOStreams
}

// NewListOptions returns options with defaults.
func NewListOptions(streams genericiooptions.IOStreams) *ListOptions {
	return &ListOptions{Backup: cmdutil.NewBackupFlags(), Print: cmdutil.NewPrintFlags(), IOStreams: streams}
}

// NewCmdBackupList builds backup list.
func NewCmdBackupList(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewListOptions(streams)
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List backups and etcd snapshots, oldest first",
		Long:    "List the backups in --backup-dir, oldest first, with their metadata and whether their checksum holds; then the etcd snapshots reconfigure took there, whose checksums 'backup verify' checks.",
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
func (o *ListOptions) Complete(*cobra.Command, []string) error { return o.Print.Complete() }

// Validate has nothing to check.
func (o *ListOptions) Validate() error { return nil }

// Run lists the backups.
func (o *ListOptions) Run(context.Context) error {
	store := o.Backup.Store()
	names, err := store.List()
	if err != nil {
		return err
	}
	infos := []Info{}
	for _, name := range names {
		b, err := store.Read(name)
		if err != nil {
			infos = append(infos, Info{Kind: KindClusterConfiguration, Name: name, Problems: []string{exitcode.Message(err)}})
			continue
		}
		infos = append(infos, newInfo(b, nil))
	}
	if err := addReconfigureInfo(store, infos); err != nil {
		return err
	}
	snapshots, err := etcdSnapshotInfos(store)
	if err != nil {
		return err
	}
	if !o.Print.Human() {
		all := []any{}
		for _, i := range infos {
			all = append(all, i)
		}
		for _, s := range snapshots {
			all = append(all, s)
		}
		return o.Print.Print(o.Out, all)
	}
	if len(infos) == 0 && len(snapshots) == 0 {
		fmt.Fprintf(o.ErrOut, "no backups in %s\n", store.Dir)
		return nil
	}
	if len(infos) > 0 {
		if err := printBackups(o.Out, infos); err != nil {
			return err
		}
	}
	if len(snapshots) == 0 {
		return nil
	}
	if len(infos) > 0 {
		fmt.Fprintln(o.Out)
	}
	return printEtcdSnapshots(o.Out, snapshots)
}

// printBackups writes list's table of ClusterConfiguration backups.
func printBackups(out io.Writer, infos []Info) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
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

// addReconfigureInfo fills in which nodes have each backup as their last
// known good and which manifests reconfigure kept with it.
func addReconfigureInfo(store *backupstore.Store, infos []Info) error {
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
