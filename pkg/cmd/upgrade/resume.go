package upgrade

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
)

const resumeLong = `Resume an upgrade the agents carry out (upgrade-apply) that stopped on a
failure, once its cause is fixed: the agent of the failed step (or of the
failed node's kubelet) runs it again, from the phase kubeadm failed in, and
the upgrade goes on from there. It is one compare-and-swap write; a resume
given again before the agent has run the step again asks for nothing more.

Refused (exit 4, nothing written) when no step or host failed, and for an
upgrade driven by hand (retry its step with upgrade-run); exit 5 when no
upgrade is recorded. A warning says when the agent that runs the step again
is missing or lost: the step waits for it.

--wait follows the upgrade as upgrade-apply --wait does, with its exit codes
(0, 8, 9, 4, 7).`

// ResumeOptions resume an upgrade stopped on a failure.
type ResumeOptions struct {
	*Flags
	Wait       bool
	StaleAfter time.Duration

	op           *operator.Upgrades
	timeoutGiven bool
}

// NewResumeOptions returns the defaults.
func NewResumeOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *ResumeOptions {
	return &ResumeOptions{Flags: NewFlags(cluster, streams)}
}

// NewCmdUpgradeResume builds upgrade-resume.
func NewCmdUpgradeResume(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewResumeOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:   "upgrade-resume [--wait] [--timeout D]",
		Short: "Have the agents run the failed step of an upgrade again, and go on",
		Long:  resumeLong,
		Example: "  # The second node's kubeadm failed; once its cause is fixed, run its step again and follow the upgrade to its end\n" +
			"  kubectl kubeadmcfg upgrade-resume --wait",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().BoolVar(&o.Wait, "wait", o.Wait, "Wait until the upgrade ends; the exit code says how (0, 8, 9, 4, 7)")
	cmd.Flags().DurationVar(&o.StaleAfter, "stale-after", o.StaleAfter, cmdutil.StaleAfterHelp+" (a warning names a lost agent)")
	o.AddFlags(cmd, true)
	return cmd
}

// Complete builds the operator.
func (o *ResumeOptions) Complete(cmd *cobra.Command, _ []string) error {
	if err := o.complete(); err != nil {
		return err
	}
	o.timeoutGiven = cmd.Flags().Changed("timeout")
	o.op = o.upgrades(o.StaleAfter)
	return nil
}

// Validate checks the flags.
func (o *ResumeOptions) Validate() error {
	if err := cmdutil.ValidateStaleAfter(o.StaleAfter); err != nil {
		return err
	}
	return o.validate()
}

// Budget bounds the command by --timeout; a wait only when it is given.
func (o *ResumeOptions) Budget() time.Duration {
	return waitBudget(o.Wait, o.timeoutGiven, o.Retry.Timeout)
}

// Run resumes the upgrade and, with --wait, follows it.
func (o *ResumeOptions) Run(ctx context.Context) error {
	ch, err := o.op.Resume(ctx)
	if err != nil {
		return o.explain(err)
	}
	return o.follow(ctx, o.op, ch, resumedLine(ch.Record), o.Wait)
}
