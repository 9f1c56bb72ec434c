package cmd

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const patchLong = `Edit fields of the ClusterConfiguration in the kubeadm-config ConfigMap.

All edits are applied, in the order given, to the freshly read document and
written in one compare-and-swap Update. When another writer got there first,
the document is read again and the same edits are applied to it, so no
concurrent change is lost. The result is validated the way kubeadm validates
it and is never written when invalid (--validate=strict) or unchanged.

Paths are dotted keys (networking.podSubnet), list indexes
(apiServer.certSANs[0]), [+] to append (apiServer.certSANs[+]), and quoted
keys for names with dots (featureGates["A.B"]). Component arguments are
addressed by name on every apiVersion: apiServer.extraArgs.audit-log-maxage
sets the v1beta3 map entry, or replaces the value of the {name, value} entry
of v1beta4 and v1 (appending it when absent). The same holds for
controllerManager, scheduler and etcd.local.

--set parses VALUE as YAML (30, true, [a,b], {k: v}) except where the field
holds a string, such as an argument value; --set-string always stores text.`

const patchExample = `  # Set an API server argument (stored as the string "false")
  kubectl kubeadmcfg patch --set apiServer.extraArgs.profiling=false

  # Add a certificate SAN and remove an argument, in one write
  kubectl kubeadmcfg patch --set 'apiServer.certSANs[+]=lb.example.com' --unset apiServer.extraArgs.audit-log-maxage

  # Apply a merge patch (YAML or JSON) and show what changes
  kubectl kubeadmcfg patch -p '{"networking":{"podSubnet":"10.244.0.0/16"}}' --diff

  # Apply a JSON patch only if the cluster name is still "prod"
  kubectl kubeadmcfg patch --type json -p '[{"op":"test","path":"/clusterName","value":"prod"},{"op":"replace","path":"/imageRepository","value":"registry.example.com"}]'

  # Write only from the node that holds the controller-manager lease
  kubectl kubeadmcfg patch --if-leader kube-system/kube-controller-manager --set apiServer.extraArgs.v=2`

// editKind is one kind of edit on the command line.
type editKind string

const (
	editSet       editKind = "set"
	editSetString editKind = "set-string"
	editUnset     editKind = "unset"
	editPatch     editKind = "patch"
	editPatchFile editKind = "patch-file"
)

// edit is one edit flag as given, in command-line order.
type edit struct {
	kind editKind
	arg  string
	data []byte // patch contents, read by Complete
}

// editFlag is a repeatable flag that appends to one shared list, so edits
// of different kinds keep the order they were given in.
type editFlag struct {
	kind     editKind
	typeName string
	edits    *[]edit
}

func (f *editFlag) String() string { return "" }
func (f *editFlag) Type() string   { return f.typeName }
func (f *editFlag) Set(v string) error {
	*f.edits = append(*f.edits, edit{kind: f.kind, arg: v})
	return nil
}

// PatchOptions edits the ClusterConfiguration.
type PatchOptions struct {
	Cluster     *ClusterFlags
	Write       *WriteFlags
	Backup      *BackupFlags
	Print       *PrintFlags
	PatchType   string
	WriteConfig string

	edits  []edit
	client kubernetes.Interface
	server string
	genericiooptions.IOStreams
}

// NewPatchOptions returns options with defaults.
func NewPatchOptions(cluster *ClusterFlags, streams genericiooptions.IOStreams) *PatchOptions {
	return &PatchOptions{Cluster: cluster, Write: NewWriteFlags(), Backup: NewBackupFlags(), Print: NewPrintFlags(),
		PatchType: "merge", IOStreams: streams}
}

// NewCmdPatch builds the patch command.
func NewCmdPatch(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewPatchOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "patch (--set PATH=VALUE | --set-string PATH=VALUE | --unset PATH | -p PATCH | --patch-file FILE)...",
		Short:   "Edit the ClusterConfiguration with a conflict-safe write",
		Long:    patchLong,
		Example: patchExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd)
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags binds the options' flags.
func (o *PatchOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.Var(&editFlag{editSet, "PATH=VALUE", &o.edits}, "set", "Set PATH to VALUE, parsed as YAML unless the field holds a string (repeatable)")
	fs.Var(&editFlag{editSetString, "PATH=VALUE", &o.edits}, "set-string", "Set PATH to VALUE as a string (repeatable)")
	fs.Var(&editFlag{editUnset, "PATH", &o.edits}, "unset", "Remove PATH; on extraArgs, every entry of that name (repeatable)")
	fs.VarP(&editFlag{editPatch, "PATCH", &o.edits}, "patch", "p", "A patch in JSON or YAML, of --type (repeatable)")
	fs.Var(&editFlag{editPatchFile, "FILE", &o.edits}, "patch-file", `A file holding a patch, of --type ("-" reads stdin; repeatable)`)
	fs.StringVar(&o.PatchType, "type", o.PatchType, "The type of the patches: merge (RFC 7386) or json (RFC 6902)")
	_ = cmd.RegisterFlagCompletionFunc("set", completePaths)
	_ = cmd.RegisterFlagCompletionFunc("set-string", completePaths)
	_ = cmd.RegisterFlagCompletionFunc("unset", completePaths)
	fs.StringVar(&o.WriteConfig, "write-config", o.WriteConfig, "After a successful patch, also write the resulting ClusterConfiguration to this file (atomic, 0600)")
	o.Write.AddFlags(cmd)
	o.Backup.AddFlags(cmd, true)
	o.Print.AddFlags(cmd)
}

// Complete reads patch files and builds the client.
func (o *PatchOptions) Complete() error {
	for i, e := range o.edits {
		switch e.kind {
		case editPatch:
			o.edits[i].data = []byte(e.arg)
		case editPatchFile:
			data, err := readFileOrStdin(e.arg, o.In)
			if err != nil {
				return err
			}
			o.edits[i].data = data
		}
	}
	cs, cfg, err := o.Cluster.Clientset()
	if err != nil {
		return err
	}
	o.client, o.server = cs, cfg.Host
	return nil
}

func readFileOrStdin(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, exitcode.Failuref("read the patch from stdin: %w", err)
		}
		return data, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, exitcode.Usagef("cannot read the patch file: %w", err)
	}
	return data, nil
}

// Validate checks the edits without touching the cluster: every path parses,
// every --set has a value, and every patch is JSON or YAML of --type.
func (o *PatchOptions) Validate() error {
	if len(o.edits) == 0 {
		return exitcode.Usagef("nothing to do: give at least one --set, --set-string, --unset, --patch or --patch-file")
	}
	if o.PatchType != "merge" && o.PatchType != "json" {
		if o.PatchType == "strategic" {
			return exitcode.Usagef("--type must be one of merge, json, not %q (a ClusterConfiguration has no strategic merge schema)", o.PatchType)
		}
		return exitcode.Usagef("--type must be one of merge, json, not %q", o.PatchType)
	}
	for _, e := range o.edits {
		switch e.kind {
		case editSet, editSetString:
			path, _, ok := strings.Cut(e.arg, "=")
			if !ok {
				return exitcode.Usagef("--%s needs PATH=VALUE, not %q", e.kind, e.arg)
			}
			if _, err := clusterconfig.ParsePath(path); err != nil {
				return err
			}
		case editUnset:
			if _, err := clusterconfig.ParsePath(e.arg); err != nil {
				return err
			}
		case editPatch, editPatchFile:
			if err := clusterconfig.CheckPatch(e.data, o.PatchType == "json"); err != nil {
				return err
			}
		}
	}
	if err := o.Write.Check(); err != nil {
		return err
	}
	if err := o.Backup.Check(); err != nil {
		return err
	}
	return o.Print.Validate()
}

// apply runs the edits, in order, on doc.
func (o *PatchOptions) apply(doc *clusterconfig.Document) error {
	for _, e := range o.edits {
		var err error
		switch e.kind {
		case editSet, editSetString:
			path, value, _ := strings.Cut(e.arg, "=")
			if e.kind == editSet {
				err = doc.Set(path, value)
			} else {
				err = doc.SetString(path, value)
			}
		case editUnset:
			err = doc.Unset(e.arg)
		case editPatch, editPatchFile:
			if o.PatchType == "json" {
				err = doc.JSONPatch(e.data)
			} else {
				err = doc.MergePatch(e.data)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Run writes the edits through the engine and reports the outcome.
func (o *PatchOptions) Run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	eng := o.Write.Engine(o.client, o.Cluster)
	if reason, err := o.Write.CheckLeader(ctx, o.client); err != nil || reason != "" {
		if err != nil {
			return err
		}
		return o.report(skippedResult(eng.Target, o.Write.DryRun, reason), "skipped: "+reason)
	}
	var saved string
	o.Backup.Attach(eng, o.server, backup.ReasonBeforePatch, &saved)
	res, err := eng.UpdateDocument(ctx, o.apply, o.Write.DocumentOptions())
	if err != nil {
		return err
	}
	out := NewWriteResult(eng.Target, res, o.Write.Diff, "edited/"+eng.Target.Key)
	out.Backup = saved
	if err := o.report(out, res.Describe(eng.Target.Name, "patched")); err != nil {
		return err
	}
	if o.WriteConfig != "" && res.DryRun == engine.DryRunNone {
		if err := backup.WriteFile(o.WriteConfig, res.After); err != nil {
			return fmt.Errorf("the cluster was written, but not the --write-config copy: %w", err)
		}
	}
	return nil
}

func (o *PatchOptions) report(out *WriteResult, human string) error {
	return reportWrite(o.IOStreams, o.Print, out, out, human)
}
