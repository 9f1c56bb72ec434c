// Package patch edits fields of the ClusterConfiguration with a
// conflict-safe write: the edits are parsed once into pkg/clusterconfig
// edits, and pkg/engine applies them to every freshly read copy, with
// pkg/backup's hook keeping the document it replaces.
package patch

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
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
holds a string, such as an argument value; --set-string always stores text.

With --rollout the write and its rollout are one step: the rollout's checks
run first (no other rollout active, every control-plane node's components
Ready and its agent alive), and nothing is written when they fail (exit 4);
then the document is written, and a rollout of exactly the bytes written
starts, taking every control-plane node to it one at a time (see 'rollout
start' for --nodes, --canary, --try and --wait). With --dry-run the checks
run and nothing is started.`

const patchExample = `  # Set an API server argument (stored as the string "false")
  kubectl kubeadmcfg patch --set apiServer.extraArgs.profiling=false

  # Add a certificate SAN and remove an argument, in one write
  kubectl kubeadmcfg patch --set 'apiServer.certSANs[+]=lb.example.com' --unset apiServer.extraArgs.audit-log-maxage

  # Apply a merge patch (YAML or JSON) and show what changes
  kubectl kubeadmcfg patch -p '{"networking":{"podSubnet":"10.244.0.0/16"}}' --diff

  # Apply a JSON patch only if the cluster name is still "prod"
  kubectl kubeadmcfg patch --type json -p '[{"op":"test","path":"/clusterName","value":"prod"},{"op":"replace","path":"/imageRepository","value":"registry.example.com"}]'

  # Write only from the node that holds the controller-manager lease
  kubectl kubeadmcfg patch --if-leader kube-system/kube-controller-manager --set apiServer.extraArgs.v=2

  # Change a flag and carry it to every control-plane node, one at a time, until done
  kubectl kubeadmcfg patch --set apiServer.extraArgs.audit-log-maxage=7 --rollout --wait`

// editKind is one kind of edit flag.
type editKind string

const (
	editSet       editKind = "set"
	editSetString editKind = "set-string"
	editUnset     editKind = "unset"
	editPatch     editKind = "patch"
	editPatchFile editKind = "patch-file"
)

// editArg is one edit flag as given, in command-line order.
type editArg struct {
	kind editKind
	arg  string
}

// editFlag is a repeatable flag that appends to one shared list, so edits
// of different kinds keep the order they were given in.
type editFlag struct {
	kind     editKind
	typeName string
	args     *[]editArg
}

func (f *editFlag) String() string { return "" }
func (f *editFlag) Type() string   { return f.typeName }
func (f *editFlag) Set(v string) error {
	*f.args = append(*f.args, editArg{kind: f.kind, arg: v})
	return nil
}

// Options edits the ClusterConfiguration.
type Options struct {
	Cluster     *cmdutil.ClusterFlags
	Write       *cmdutil.WriteFlags
	Backup      *cmdutil.BackupFlags
	Print       *cmdutil.PrintFlags
	Rollout     *cmdutil.RolloutFlags
	PatchType   string
	WriteConfig string
	// Args are the edit flags as given; Complete parses them into Edits.
	Args  []editArg
	Edits clusterconfig.Edits

	engine   *engine.Engine
	operator *operator.Rollouts // with --rollout
	genericiooptions.IOStreams
}

// NewOptions returns options with defaults.
func NewOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *Options {
	return &Options{Cluster: cluster, Write: cmdutil.NewWriteFlags(), Backup: cmdutil.NewBackupFlags(), Print: cmdutil.NewPrintFlags(),
		Rollout: cmdutil.NewRolloutFlags(), PatchType: "merge", IOStreams: streams}
}

// NewCmdPatch builds the patch command.
func NewCmdPatch(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "patch (--set PATH=VALUE | --set-string PATH=VALUE | --unset PATH | -p PATCH | --patch-file FILE)...",
		Short:   "Edit the ClusterConfiguration with a conflict-safe write",
		Long:    patchLong,
		Example: patchExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags binds the options' flags.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.Var(&editFlag{editSet, "PATH=VALUE", &o.Args}, "set", "Set PATH to VALUE, parsed as YAML unless the field holds a string (repeatable)")
	fs.Var(&editFlag{editSetString, "PATH=VALUE", &o.Args}, "set-string", "Set PATH to VALUE as a string (repeatable)")
	fs.Var(&editFlag{editUnset, "PATH", &o.Args}, "unset", "Remove PATH; on extraArgs, every entry of that name (repeatable)")
	fs.VarP(&editFlag{editPatch, "PATCH", &o.Args}, "patch", "p", "A patch in JSON or YAML, of --type (repeatable)")
	fs.Var(&editFlag{editPatchFile, "FILE", &o.Args}, "patch-file", `A file holding a patch, of --type ("-" reads stdin; repeatable)`)
	fs.StringVar(&o.PatchType, "type", o.PatchType, "The type of the patches: merge (RFC 7386) or json (RFC 6902)")
	for _, name := range []string{"set", "set-string", "unset"} {
		_ = cmd.RegisterFlagCompletionFunc(name, completePaths)
	}
	fs.StringVar(&o.WriteConfig, "write-config", o.WriteConfig, "After a successful patch, also write the resulting ClusterConfiguration to this file (atomic, 0600)")
	o.Write.AddFlags(cmd)
	o.Backup.AddFlags(cmd, true)
	o.Rollout.AddFlags(cmd, true)
	o.Print.AddFlags(cmd)
}

// Complete parses the edits, once, into values of the document model, then
// builds the write pipeline.
func (o *Options) Complete(cmd *cobra.Command, _ []string) error {
	if err := o.parseEdits(); err != nil {
		return err
	}
	o.Write.Complete()
	o.Rollout.Complete(cmd)
	if err := o.Print.Complete(); err != nil {
		return err
	}
	c, err := o.Cluster.Clients()
	if err != nil {
		return err
	}
	o.engine = o.Write.ToEngine(c, o.Cluster, o.Backup.Hook(c.Server, backup.ReasonBeforePatch))
	if o.Rollout.Rollout {
		o.operator = cmdutil.NewOperator(c, o.Cluster, o.Write.RetryFlags, o.engine, o.Rollout.Operator(o.Write.Timeout, o.Print.Progress(o.ErrOut)))
	}
	return nil
}

func (o *Options) parseEdits() error {
	if o.PatchType != "merge" && o.PatchType != "json" {
		if o.PatchType == "strategic" {
			return exitcode.Usagef("--type must be one of merge, json, not %q (a ClusterConfiguration has no strategic merge schema)", o.PatchType)
		}
		return exitcode.Usagef("--type must be one of merge, json, not %q", o.PatchType)
	}
	o.Edits = nil
	for _, a := range o.Args {
		var e clusterconfig.Edit
		var err error
		switch a.kind {
		case editSet, editSetString:
			path, value, ok := strings.Cut(a.arg, "=")
			switch {
			case !ok:
				err = exitcode.Usagef("--%s needs PATH=VALUE, not %q", a.kind, a.arg)
			case a.kind == editSet:
				e, err = clusterconfig.NewSet(path, value)
			default:
				e, err = clusterconfig.NewSetString(path, value)
			}
		case editUnset:
			e, err = clusterconfig.NewUnset(a.arg)
		case editPatch, editPatchFile:
			data := []byte(a.arg)
			if a.kind == editPatchFile {
				if data, err = cmdutil.ReadInput(a.arg, "the patch file", o.In); err != nil {
					return err
				}
			}
			if o.PatchType == "json" {
				e, err = clusterconfig.NewJSONPatch(data)
			} else {
				e, err = clusterconfig.NewMergePatch(data)
			}
		}
		if err != nil {
			return err
		}
		o.Edits = append(o.Edits, e)
	}
	return nil
}

// Validate checks the options without I/O.
func (o *Options) Validate() error {
	if len(o.Edits) == 0 {
		return exitcode.Usagef("nothing to do: give at least one --set, --set-string, --unset, --patch or --patch-file")
	}
	if err := o.Write.ValidateFlags(); err != nil {
		return err
	}
	if err := o.Rollout.Validate(); err != nil {
		return err
	}
	return o.Backup.Validate()
}

// Budget bounds the whole command by --timeout (a wait for the rollout only
// when --timeout is given).
func (o *Options) Budget() time.Duration { return o.Rollout.Budget(o.Write.Timeout) }

// Run checks the rollout when there is one, writes the edits through the
// engine, reports the outcome, and starts the rollout of what was written.
func (o *Options) Run(ctx context.Context) error {
	plan, err := o.Rollout.Plan(ctx, o.operator)
	if err != nil {
		return err
	}
	res, err := o.engine.UpdateDocument(ctx, o.Edits...)
	if err != nil {
		return err
	}
	t := o.engine.Target()
	out := cmdutil.NewWriteResult(t, res, "patched", o.Write.Diff, "edited/"+t.Key)
	// The rollout's error, if any, wins: the copy's is then a warning.
	rolloutErr := cmdutil.FinishWrite(ctx, o.IOStreams, o.Print, plan, res, rollout.SourcePatch, out, out)
	if o.WriteConfig != "" && !res.Skipped && res.DryRun == engine.DryRunNone {
		if err := backup.WriteFile(o.WriteConfig, res.After); err != nil {
			err = fmt.Errorf("the cluster was written, but not the --write-config copy: %w", err)
			if rolloutErr == nil {
				return err
			}
			cmdutil.PrintWarnings(o.ErrOut, []string{err.Error()})
		}
	}
	return rolloutErr
}
