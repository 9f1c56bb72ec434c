// Package cmd is the root of kubectl-kubeadmcfg's cobra layer, as kubectl's
// cmd.go: NewCmdRoot wires the verb families, one package each under
// pkg/cmd (get, patch, edit, validate, backup, restore, reconfigure,
// agent, upgrade, completion, version), and Run executes the tree and adds to a
// domain error the flag that fixes it. A verb package never imports another;
// what verbs share is in pkg/cmd/cmdutil, and the work itself in the domain
// packages.
package cmd

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	backupstore "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/agent"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/completion"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/edit"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/get"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/nodes"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/patch"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/reconfigure"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/restore"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/upgrade"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/validate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/version"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const rootLong = `Edit, validate, back up and restore the kubeadm ClusterConfiguration stored
in the kube-system/kubeadm-config ConfigMap, and track Kubernetes upgrade
state, through the Kubernetes API.

Every write is a compare-and-swap on the ConfigMap's resourceVersion: on a
conflict the edit is re-applied to the fresh document, so no concurrent
update is lost, and a document kubeadm would reject is never written.

A rollout carries the configuration to every control-plane node, one at a
time, through an agent on each node, from the API ('rollout start', or
--rollout on patch, edit and restore).

Exit codes: 0 success (also "unchanged" and "skipped"), 1 other error,
2 usage error, 3 invalid configuration, 4 conflict or precondition not met
(also another rollout active, a preflight that failed), 5 not found,
6 forbidden or unauthorized, 7 outcome of the last write unknown (also a
wait that ended before its rollout); reconfigure and a rollout's --wait:
8 failed, node back on its previous configuration (a rollout stops there),
9 failed and rollback failed; 10 internal error (a bug: please report it;
GOTRACEBACK=all adds the stack).`

// NewCmdRoot builds the command tree.
func NewCmdRoot(streams genericiooptions.IOStreams) *cobra.Command {
	flags := cmdutil.NewClusterFlags()
	root := &cobra.Command{
		Use:   "kubeadmcfg",
		Short: "Safely edit the kubeadm ClusterConfiguration and track upgrade state",
		Long:  rootLong,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl kubeadmcfg",
		},
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	flags.AddFlags(root)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return exitcode.Usagef("%w (see '%s --help')", err, c.CommandPath())
	})

	root.AddCommand(
		get.NewCmdGet(flags, streams),
		patch.NewCmdPatch(flags, streams),
		edit.NewCmdEdit(flags, streams),
		validate.NewCmdValidate(flags, streams),
		backup.NewCmdBackup(flags, streams),
		restore.NewCmdRestore(flags, streams),
		reconfigure.NewCmdReconfigure(flags, streams),
		rollout.NewCmdRollout(flags, streams),
		nodes.NewCmdNodes(flags, streams),
		agent.NewCmdAgent(flags, streams),
		version.NewCmdVersion(streams),
	)
	root.AddCommand(upgrade.NewCmdUpgrade(flags, streams)...)
	completion.RegisterFlagCompletions(root)
	return root
}

// Run executes the plugin with args and returns the error that decides the
// exit code. SIGINT and SIGTERM cancel the command's context, so an
// interrupted write stops between attempts rather than mid-way. A panic is
// returned as an internal error (exit 10), never left to end the process
// with Go's exit 2, the usage code.
func Run(streams genericiooptions.IOStreams, args []string) (err error) {
	defer crash.Recover(func(p error) { err = p })
	// client-go logs through klog by itself (a watch that failed, once a
	// second while an API server is away): lines outside the plugin's own
	// one-line messages, which scripts and log shippers parse. Every
	// failure that matters comes back to the plugin as an error and is
	// reported in its own words, once, so klog's lines are dropped.
	klog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root := NewCmdRoot(streams)
	root.SetArgs(args)
	reached := false
	root.PersistentPreRun = func(*cobra.Command, []string) { reached = true }
	_, err = root.ExecuteContextC(ctx)
	if err != nil && !reached {
		// cobra rejected the command line before any verb ran: an unknown
		// command, a missing argument, a bad flag.
		var typed *exitcode.Error
		if !errors.As(err, &typed) {
			return exitcode.Usagef("%w (see 'kubectl kubeadmcfg --help')", err)
		}
	}
	return withHint(err)
}

// withHint adds to a domain error the flag that fixes it. Domain packages
// say what is wrong in their own terms; only this layer knows the flags.
func withHint(err error) error {
	var value *clusterconfig.ValueError
	var backupErr *engine.BackupError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrUnauthorized):
		return exitcode.WithHint(err, "check --kubeconfig, --context, --token")
	case errors.Is(err, engine.ErrUnreachable):
		return exitcode.WithHint(err, "check --kubeconfig and --context")
	case errors.Is(err, engine.ErrOutcomeUnknown):
		return exitcode.WithHint(err, "check with 'kubectl kubeadmcfg get' (or 'upgrade-status') before retrying")
	case errors.Is(err, engine.ErrGaveUp) && exitcode.FromError(err) == exitcode.Conflict:
		return exitcode.WithHint(err, "retry, or raise --timeout")
	case errors.Is(err, backupstore.ErrNoDir):
		return exitcode.WithHint(err, "give one with --backup-dir or KUBEADMCFG_BACKUP_DIR")
	case errors.As(err, &backupErr):
		return exitcode.WithHint(err, "use --no-backup to skip it")
	case errors.As(err, &value):
		return exitcode.WithHint(err, "use --set-string to store it as text")
	}
	return err
}
