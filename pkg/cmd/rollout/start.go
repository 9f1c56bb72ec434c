package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

const startLong = `Start a rollout of the live ClusterConfiguration: pin kubeadm-config's
document, byte for byte with its resourceVersion, and let the agents carry
it to the control-plane nodes one at a time, in the order of --nodes or by
name. Every node ends on exactly the pinned document, even if someone
changes kubeadm-config meanwhile.

Nothing starts (exit 4) while another rollout is active, for a node in
--nodes that is not a control-plane node, or when the preflight finds a
control-plane node not ready for it: each node's kube-apiserver,
kube-controller-manager and kube-scheduler mirror Pods must be Ready and its
agent alive. Every node that is not is named. A missing or lost agent is
refused at once. A component not Ready yet (restarting after the last
rollout) is waited for, within --timeout when given, else for up to 2m,
with a line on stderr saying what the preflight waits for. An agent is
alive when its Lease was renewed within its own duration (three of its
heartbeats; --stale-after overrides it); a Lease that looks older on the
clock of the API server that answered is watched for up to its duration
before its agent is taken for lost, so that a skewed clock on one API
server never refuses a live agent. Of two starts at once, exactly one wins;
the other exits 4 naming it.

The nodes' previous document, what 'rollout undo' and an expired --try go
back to, is the one the live document replaced: every write the plugin
makes of kubeadm-config stamps what it replaced. When that is not the last
rollout's target (kubeadm-config was written since by a plain patch, by
kubectl, by a --rollout write whose rollout did not start), going back to
that target would drop those writes too: the rollout starts with a warning
that names them, and its undo is refused without --force.

--canary N pauses the rollout by itself after N nodes are done, until
'rollout resume'. --try DURATION puts it on trial: once its last node is
done, unless 'rollout confirm' comes within DURATION, the agents put every
node and kubeadm-config back, without this command. A trial needs its
previous document known exactly, so that its revert drops nothing but the
tried change: it is refused (exit 4, naming the writes it would drop) when
there is none, or when kubeadm-config was written since the last rollout
by another than the live document's write; carry the live document with a
plain 'rollout start', then try the next change with 'patch --rollout
--try'.

--wait follows the rollout until every node runs the document (with --try:
until the last node is done) or it stops, and exits 0 (every node runs it),
8 (stopped on a node that rolled itself back; the nodes after it are
untouched), 9 (a node's rollback failed), 4 (undone meanwhile) or 7 (the
outcome is unknown: the wait ended first). Without --timeout the wait has no
limit; with it, the whole command has one. Without --wait or --timeout, the
command is bounded by 30s for its reads and writes plus the preflight's
2m.`

const startExample = `  # Carry the live document to every control-plane node, by name, waiting for the end
  kubectl kubeadmcfg rollout start --wait

  # Go through cp-2 first, and pause after it for a look
  kubectl kubeadmcfg rollout start --nodes cp-2,cp-0,cp-1 --canary 1

  # Put it on trial: unless confirmed within 10 minutes of the last node, it is reverted
  kubectl kubeadmcfg rollout start --try 10m`

// StartOptions start a rollout of the live document.
type StartOptions struct {
	*Flags
	Rollout *cmdutil.RolloutFlags
	Message string
}

// NewStartOptions returns the defaults.
func NewStartOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *StartOptions {
	return &StartOptions{Flags: NewFlags(cluster, streams), Rollout: cmdutil.NewRolloutFlags()}
}

// NewCmdStart builds rollout start.
func NewCmdStart(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewStartOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "start [--nodes NODE,...] [--canary N] [--try DURATION] [--wait]",
		Short:   "Start a rollout of the live ClusterConfiguration to the control-plane nodes",
		Long:    startLong,
		Example: startExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	o.Rollout.AddFlags(cmd, false)
	cmd.Flags().StringVar(&o.Message, "message", o.Message, "Why, recorded with the rollout")
	o.addFlags(cmd)
	return cmd
}

// Complete builds the operator.
func (o *StartOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.Rollout.Complete(cmd)
	op := o.Rollout.Operator(o.Retry.Timeout, nil)
	o.StaleAfter, o.preflightWait = op.StaleAfter, op.PreflightWait
	return o.complete(nil)
}

// Validate checks the flags.
func (o *StartOptions) Validate() error {
	if err := o.Rollout.Validate(); err != nil {
		return err
	}
	return o.validate()
}

// Budget bounds the command by --timeout; a wait only when it is given.
func (o *StartOptions) Budget() time.Duration { return o.Rollout.Budget(o.Retry.Timeout) }

// Run starts the rollout and, with --wait, follows it.
func (o *StartOptions) Run(ctx context.Context) error {
	spec := o.Rollout.Spec()
	spec.Message = o.Message
	ch, err := o.op.Start(ctx, spec)
	if err != nil {
		return cmdutil.RolloutHint(err)
	}
	return o.follow(ctx, ch, fmt.Sprintln(cmdutil.StartedLine(ch.Status)), o.Rollout.Wait)
}
