package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	rolloutstate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

const abandonLong = `Give up on a node that never comes back (it died, was reset or removed),
whose agent is gone, so that the rollout system is not wedged by it:
without this, a node left in progress keeps 'rollout undo' waiting for its
turn to end, and every 'rollout start' refused, for ever.

In a rollout, the node (in progress or pending) is marked RollbackFailed,
"abandoned by IDENTITY: state unknown", and the rollout ends Failed: 'rollout
undo' and 'rollout start' work again. The undo leaves a node abandoned in
progress out (its state is unknown; no agent would take it back), and says
so. In an undo or a revert, the node is dropped from its order instead: the
other nodes still go back, and it ends once kubeadm-config is put back.
Recorded in the history, and as a Warning Event (NodeAbandoned) on the
record.

It needs --force (exit 2 without it), and is allowed only while the node's
agent is gone: it has no Lease, or its Lease does not change while watched
for its whole duration (three of its agent's heartbeats: 30s by default,
--stale-after overrides it), on this host's clock, whatever its renewTime
says on the API server's. An agent seen renewing is refused (exit 4):
stop it first. So is a node not in progress or pending, and, in a rollout,
one while another node is in progress. Once abandoned, remove the node from
the cluster (see docs/rollout.md, "A node is gone: rollout abandon"), or every later
preflight names its lost agent.

--timeout bounds the whole command, the watch included; without it, the
watch lasts at most the Lease's duration and each read and write 30s.`

const abandonExample = `  # cp-2 died during its turn: take it out of the rollout
  kubectl kubeadmcfg rollout abandon cp-2 --force

  # Then take the rollout back on the other nodes, and go on without cp-2
  kubectl kubeadmcfg rollout undo --wait`

// AbandonOptions give up on a node whose agent is gone.
type AbandonOptions struct {
	*Flags
	Node  string
	Force bool

	timeoutGiven bool
}

// NewAbandonOptions returns the defaults.
func NewAbandonOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *AbandonOptions {
	return &AbandonOptions{Flags: NewFlags(cluster, streams)}
}

// NewCmdAbandon builds rollout abandon.
func NewCmdAbandon(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewAbandonOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "abandon NODE --force",
		Short:   "Give up on a node whose agent is gone, so that undo and start work again",
		Long:    abandonLong,
		Example: abandonExample,
		Args:    cmdutil.ExactArgs(1, "one node's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().BoolVar(&o.Force, "force", o.Force, "Abandon the node: its state becomes unknown to the record, for good")
	o.addStaleAfter(cmd)
	o.addFlags(cmd)
	return cmd
}

// Complete reads the node and builds the operator.
func (o *AbandonOptions) Complete(cmd *cobra.Command, args []string) error {
	o.Node = args[0]
	o.timeoutGiven = cmd.Flags().Changed("timeout")
	return o.complete(nil)
}

// Validate checks the flags.
func (o *AbandonOptions) Validate() error {
	if !o.Force {
		return exitcode.Usagef("rollout abandon gives up on node %s for good, its state unknown to the record: it needs --force", o.Node)
	}
	return o.validate()
}

// Budget bounds the command by --timeout when given; without it the watch
// is bounded by the Lease's duration, and each read and write by 30s.
func (o *AbandonOptions) Budget() time.Duration {
	if o.timeoutGiven {
		return o.Retry.Timeout
	}
	return 0
}

// Run abandons the node and prints what became of the rollout.
func (o *AbandonOptions) Run(ctx context.Context) error {
	res, err := o.op.Abandon(ctx, o.Node)
	if err != nil {
		return err
	}
	s := res.Status
	line := fmt.Sprintf("rollout %d: node %s abandoned (%s); the rollout is %s\n", s.ID, res.Node, res.AgentGone, s.Phase)
	if s.Kind != rolloutstate.KindRollout {
		line = fmt.Sprintf("rollout %d (%s): node %s abandoned (%s) and dropped from its order; it is %s\n", s.ID, s.Kind, res.Node, res.AgentGone, s.Phase)
	}
	if !res.Changed {
		line = fmt.Sprintf("rollout %d: node %s was already abandoned\n", s.ID, res.Node)
	}
	return o.followResult(ctx, &Result{Changed: res.Changed, Rollout: s, Abandoned: res.Node, AgentGone: res.AgentGone, Warnings: res.Warnings}, line, false)
}
