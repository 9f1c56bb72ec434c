package upgrade

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

const applyLong = `Start a Kubernetes upgrade to VERSION that the agents carry out
('kubectl kubeadmcfg agent' on every control-plane node), node by node in
the plan's order, with the real kubeadm: kubeadm upgrade apply on the first
control-plane node, kubeadm upgrade node on each further one, then each
node's kubelet. Every step and phase is recorded in the upgrade state, which
moves by itself; nobody runs upgrade-set.

The plan is --plan: kubeadm (the default, any number of control-plane
nodes) or starlingx (the seed system's, two controllers), or a plan file
whose steps say which are a node's work. It takes --control-plane-nodes in
the order given, or the nodes labelled node-role.kubernetes.io/control-plane
sorted by name; either way every control-plane node.

VERSION is a release such as v1.37.2, spelt so: anything else exits 2, a
pre-release included (the agents' kubeadm upgrade would refuse it).

Nothing is written (exit 4) unless the preflight passes, and a refusal names
every problem: an upgrade not over, or a rollout active; kubeadm's version
rules against kubeadm-config's kubernetesVersion (no downgrade, one minor
version at a time; a patch release, or the same version again, is fine),
and no kubelet more than 3 minor versions older than VERSION (every Node
must report its kubelet's version); every control-plane node's agent alive
(its Lease renewed within its own duration or --stale-after; one that looks
stale by the API server's clock is watched that long first), with
VERSION among the kubeadm versions it publishes; and, with local etcd, every
node's etcd member healthy as its agent finds it.

--wait follows the upgrade until it ends: 0 when every control-plane node
runs VERSION (upgrade-complete; worker nodes are not upgraded); 8 when a node failed and is back on its previous
version; 9 when it failed and was not put back (its rollback failed, or it
failed past the point where kubeadm-config says VERSION, from where recovery
is forward), naming the node, the phase and why; 4 when it was aborted or
taken out of the agents' hands; 7 when the wait ended first (--timeout, an
interrupt, a broken watch). Progress goes to stderr, one line per change of
the state or of a node's step, phase or outcome. Without --timeout the wait
has no limit; with it, the whole command has one.`

const applyExample = `  # Upgrade every control-plane node to v1.37.2, node by node, and wait for the end
  kubectl kubeadmcfg upgrade-apply v1.37.2 --wait

  # Take cp-2 first, and give up waiting after an hour (the upgrade goes on)
  kubectl kubeadmcfg upgrade-apply v1.37.2 --control-plane-nodes cp-2,cp-0,cp-1 --wait --timeout 1h

  # The seed system's plan, on its two controllers
  kubectl kubeadmcfg upgrade-apply v1.37.2 --plan starlingx`

// ApplyOptions start an upgrade the agents carry out.
type ApplyOptions struct {
	*Flags
	Version string
	// Plan is a built-in plan's name or a plan file ("-" for stdin).
	Plan              string
	ControlPlaneNodes []string
	Reason            string
	Wait              bool
	StaleAfter        time.Duration

	plan         *upgradestate.Plan // read by Complete
	op           *operator.Upgrades
	timeoutGiven bool
}

// NewApplyOptions returns the defaults.
func NewApplyOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *ApplyOptions {
	return &ApplyOptions{Flags: NewFlags(cluster, streams), Plan: "kubeadm", Reason: "upgrade-apply"}
}

// NewCmdUpgradeApply builds upgrade-apply.
func NewCmdUpgradeApply(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewApplyOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "upgrade-apply VERSION [--plan NAME|FILE] [--control-plane-nodes A,B] [--wait] [--timeout D]",
		Short:   "Start an upgrade the agents carry out node by node, and follow it",
		Long:    applyLong,
		Example: applyExample,
		Args:    cmdutil.ExactArgs(1, "VERSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.Plan, "plan", o.Plan, "The plan the upgrade follows: a built-in plan (kubeadm, starlingx) or a plan file (- for stdin)")
	cmd.Flags().StringSliceVar(&o.ControlPlaneNodes, "control-plane-nodes", o.ControlPlaneNodes,
		"The control-plane nodes in the order the plan takes them, every one (default: the cluster's control-plane nodes, by name)")
	cmd.Flags().StringVar(&o.Reason, "reason", o.Reason, "Why, recorded with the transition")
	cmd.Flags().BoolVar(&o.Wait, "wait", o.Wait, "Wait until the upgrade ends; the exit code says how (0, 8, 9, 4, 7)")
	cmd.Flags().DurationVar(&o.StaleAfter, "stale-after", o.StaleAfter, cmdutil.StaleAfterHelp+" (the preflight refuses a lost agent)")
	_ = cmd.RegisterFlagCompletionFunc("plan", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return upgradestate.BuiltinPlans(), cobra.ShellCompDirectiveDefault
	})
	o.AddFlags(cmd, true)
	return cmd
}

// Complete reads the version and the plan, and builds the operator.
func (o *ApplyOptions) Complete(cmd *cobra.Command, args []string) error {
	o.Version = args[0]
	plan, err := loadPlan(o.Plan, cmd.InOrStdin())
	if err != nil {
		return err
	}
	o.plan = plan
	if err := o.complete(); err != nil {
		return err
	}
	o.timeoutGiven = cmd.Flags().Changed("timeout")
	o.op = o.upgrades(o.StaleAfter)
	return nil
}

// Validate checks the version and the flags.
func (o *ApplyOptions) Validate() error {
	if err := versionArg("VERSION", upgradestate.CheckAgentsVersion(o.Version)); err != nil {
		return err
	}
	for i, n := range o.ControlPlaneNodes {
		if err := upgradestate.CheckNodeName(n); err != nil {
			return exitcode.Usagef("--control-plane-nodes: %w", err)
		}
		if slices.Contains(o.ControlPlaneNodes[:i], n) {
			return exitcode.Usagef("--control-plane-nodes names %s twice", n)
		}
	}
	if err := cmdutil.ValidateStaleAfter(o.StaleAfter); err != nil {
		return err
	}
	return o.validate()
}

// Budget bounds the command by --timeout; a wait only when it is given.
func (o *ApplyOptions) Budget() time.Duration {
	return waitBudget(o.Wait, o.timeoutGiven, o.Retry.Timeout)
}

// Run starts the upgrade and, with --wait, follows it.
func (o *ApplyOptions) Run(ctx context.Context) error {
	ch, err := o.op.Apply(ctx, operator.ApplySpec{Version: o.Version, Plan: o.plan, Nodes: o.ControlPlaneNodes,
		Reason: upgradestate.BoundReason(o.Reason)})
	var busy *upgradestate.InProgressError
	switch {
	case errors.As(err, &busy): // another start won the race after the preflight
		return o.explain(err)
	case err != nil:
		return err
	}
	return o.follow(ctx, o.op, ch, startedLine(ch.Record), o.Wait)
}

// waitBudget is the bound of a command that may wait for an upgrade:
// timeout, unless it waits and --timeout was not given, in which case
// nothing bounds the whole command (0), as kubectl rollout status; each
// read and write in it is still bounded by timeout.
func waitBudget(wait, timeoutGiven bool, timeout time.Duration) time.Duration {
	if wait && !timeoutGiven {
		return 0
	}
	return timeout
}
