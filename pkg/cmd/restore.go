package cmd

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
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
static pods. Per-node values only ever go into that file.`

const restoreExample = `  # Restore the newest backup, showing the diff first
  kubectl kubeadmcfg restore --latest

  # See what a restore would change without writing
  kubectl kubeadmcfg restore 20261129T191500.123456789Z-kubeadm-config-rv812-1a2b3c4d.yaml --dry-run=server

  # Write a kubeadm config file for regenerating this node's static pods
  kubectl kubeadmcfg restore --latest --to-file ./kubeadm.yaml --node-name controller-0 --advertise-address 192.0.2.10`

// RestoreOptions restores a backup.
type RestoreOptions struct {
	Cluster          *ClusterFlags
	Write            *WriteFlags
	Backup           *BackupFlags
	Print            *PrintFlags
	Latest           bool
	Force            bool
	ToFile           string
	NodeName         string
	AdvertiseAddress string
	BindPort         int32

	name   string
	client kubernetes.Interface
	server string
	genericiooptions.IOStreams
}

// RestoreResult is what restore prints with -o.
type RestoreResult struct {
	*WriteResult `json:",inline"`
	Restored     string `json:"restored"`
	ToFile       string `json:"toFile,omitempty"`
}

// NewCmdRestore builds the restore command.
func NewCmdRestore(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &RestoreOptions{Cluster: cluster, Write: NewWriteFlags(), Backup: NewBackupFlags(), Print: NewPrintFlags(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:     "restore (NAME | --latest)",
		Short:   "Restore a backup to the cluster or to a kubeadm config file",
		Long:    restoreLong,
		Example: restoreExample,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.name = args[0]
			}
			if err := o.Validate(cmd); err != nil {
				return err
			}
			return o.Run(cmd)
		},
	}
	cmd.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeBackupNames(o.Backup)(c, args, toComplete)
	}
	fs := cmd.Flags()
	fs.BoolVar(&o.Latest, "latest", o.Latest, "Restore the newest backup of this ConfigMap")
	fs.BoolVar(&o.Force, "force", o.Force, "Restore even a backup of another ConfigMap uid or kubernetesVersion")
	fs.StringVar(&o.ToFile, "to-file", o.ToFile, "Write the backup to this kubeadm config file instead of the cluster (atomic, 0600)")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "With --to-file: this node's name, for the appended InitConfiguration")
	fs.StringVar(&o.AdvertiseAddress, "advertise-address", o.AdvertiseAddress, "With --to-file: this node's API server advertise address")
	fs.Int32Var(&o.BindPort, "bind-port", o.BindPort, "With --to-file: this node's API server port")
	o.Write.AddFlags(cmd)
	o.Backup.AddFlags(cmd, true)
	o.Print.AddFlags(cmd)
	return cmd
}

// Validate checks the arguments and flags without I/O.
func (o *RestoreOptions) Validate(cmd *cobra.Command) error {
	if o.Latest == (o.name != "") {
		return exitcode.Usagef("give a backup name or --latest, not both or neither")
	}
	nodeFlags := cmd.Flags().Changed("node-name") || cmd.Flags().Changed("advertise-address") || cmd.Flags().Changed("bind-port")
	if nodeFlags && o.ToFile == "" {
		return exitcode.Usagef("--node-name, --advertise-address and --bind-port only go with --to-file: per-node values never go into the shared ConfigMap")
	}
	if o.NodeName != "" {
		if errs := validation.IsDNS1123Subdomain(o.NodeName); len(errs) > 0 {
			return exitcode.Usagef("--node-name %q: %s", o.NodeName, errs[0])
		}
	}
	if o.AdvertiseAddress != "" && net.ParseIP(o.AdvertiseAddress) == nil {
		return exitcode.Usagef("--advertise-address must be an IP address, not %q", o.AdvertiseAddress)
	}
	if cmd.Flags().Changed("bind-port") && (o.BindPort < 1 || o.BindPort > 65535) {
		return exitcode.Usagef("--bind-port must be between 1 and 65535, not %d", o.BindPort)
	}
	if err := o.Write.Check(); err != nil {
		return err
	}
	if err := o.Backup.Check(); err != nil {
		return err
	}
	return o.Print.Validate()
}

// Run verifies the backup and restores it.
func (o *RestoreOptions) Run(cmd *cobra.Command) error {
	store := o.Backup.Store()
	var b *backup.Backup
	var err error
	if o.Latest {
		if b, err = store.Latest(o.Cluster.Namespace(), o.Cluster.ConfigMap); err == nil {
			fmt.Fprintf(o.ErrOut, "using backup %s (resourceVersion %s of %s, taken %s)\n",
				b.Name, b.ResourceVersion, b.Server, b.Time.Format(time.RFC3339))
		}
	} else {
		b, err = store.Read(o.name)
	}
	if err != nil {
		return err
	}
	opts := o.Write.DocumentOptions()
	if problems := b.Verify(opts.Validate); len(problems) > 0 {
		return exitcode.Invalidf("backup %s failed verification, nothing was restored: %s", b.Name, strings.Join(problems, "; "))
	}
	if o.ToFile != "" {
		return o.toFile(b)
	}

	cs, cfg, err := o.Cluster.Clientset()
	if err != nil {
		return err
	}
	o.client, o.server = cs, cfg.Host
	eng := o.Write.Engine(o.client, o.Cluster)
	if reason, err := o.Write.CheckLeader(cmd.Context(), o.client); err != nil || reason != "" {
		if err != nil {
			return err
		}
		return o.report(&RestoreResult{WriteResult: skippedResult(eng.Target, o.Write.DryRun, reason), Restored: b.Name}, "skipped: "+reason)
	}
	var saved string
	o.Backup.Attach(eng, o.server, backup.ReasonBeforeRestore, &saved)
	res, err := eng.ReplaceDocument(cmd.Context(), b.Document, func(cm *corev1.ConfigMap) error {
		return o.checkTarget(b, cm, eng.Target.Key)
	}, opts)
	if err != nil {
		return err
	}
	out := &RestoreResult{WriteResult: NewWriteResult(eng.Target, res, true, "backup/"+b.Name), Restored: b.Name}
	out.Backup = saved
	return o.report(out, res.Describe(eng.Target.Name, "restored from "+b.Name))
}

// checkTarget refuses a restore onto another ConfigMap or across an
// upgrade, unless --force.
func (o *RestoreOptions) checkTarget(b *backup.Backup, cm *corev1.ConfigMap, key string) error {
	if o.Force {
		return nil
	}
	if b.UID != string(cm.UID) {
		return exitcode.Conflictf("backup %s is of configmap uid %s, the live one is %s (another cluster, or a re-created ConfigMap); use --force to restore it anyway",
			b.Name, b.UID, cm.UID)
	}
	live := ""
	if doc, err := clusterconfig.Parse([]byte(cm.Data[key])); err == nil {
		live = doc.KubernetesVersion()
	}
	// A live document that does not even parse is what a restore is for:
	// there is no version to compare with.
	if live != "" && b.KubernetesVersion != live {
		return exitcode.Conflictf("backup %s is of kubernetesVersion %s, the live document is at %s (a restore across an upgrade); use --force to restore it anyway",
			b.Name, b.KubernetesVersion, live)
	}
	return nil
}

// toFile writes the backup as a kubeadm config file, with an
// InitConfiguration for this node when node values were given.
func (o *RestoreOptions) toFile(b *backup.Backup) error {
	data := append([]byte{}, b.Document...)
	if o.NodeName != "" || o.AdvertiseAddress != "" || o.BindPort != 0 {
		init := map[string]any{"apiVersion": b.APIVersion, "kind": "InitConfiguration"}
		endpoint := map[string]any{}
		if o.AdvertiseAddress != "" {
			endpoint["advertiseAddress"] = o.AdvertiseAddress
		}
		if o.BindPort != 0 {
			endpoint["bindPort"] = o.BindPort
		}
		if len(endpoint) > 0 {
			init["localAPIEndpoint"] = endpoint
		}
		if o.NodeName != "" {
			init["nodeRegistration"] = map[string]any{"name": o.NodeName}
		}
		initYAML, err := yaml.Marshal(init)
		if err != nil {
			return err
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			data = append(data, '\n')
		}
		data = append(append(data, "---\n"...), initYAML...)
	}
	if err := backup.WriteFile(o.ToFile, data); err != nil {
		return err
	}
	out := &RestoreResult{WriteResult: &WriteResult{DryRun: "none", Warnings: []string{}}, Restored: b.Name, ToFile: o.ToFile}
	return o.report(out, fmt.Sprintf("wrote %s from backup %s", o.ToFile, b.Name))
}

func (o *RestoreOptions) report(out *RestoreResult, human string) error {
	return reportWrite(o.IOStreams, o.Print, out.WriteResult, out, human)
}
