package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// UpgradeAuditOptions fails an upgrade stuck in a step.
type UpgradeAuditOptions struct {
	*UpgradeFlags
	StuckAfter time.Duration
	Interval   time.Duration
}

// NewCmdUpgradeAudit builds upgrade-audit.
func NewCmdUpgradeAudit(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeAuditOptions{UpgradeFlags: NewUpgradeFlags(cluster, streams), StuckAfter: time.Hour}
	cmd := &cobra.Command{
		Use:   "upgrade-audit [--stuck-after DURATION] [--interval DURATION]",
		Short: "Fail an upgrade stuck in a step for too long",
		Long: `Do what upgrade-fail does when the upgrade has been in a step in progress for
longer than --stuck-after, with the reason "stuck in STATE for AGE". Safe to
run from every control-plane node at once: the compare-and-swap lets exactly
one of them record the transition. With --interval it repeats until
interrupted, reporting a failed pass and going on. An unparsable updated-at
is reported (exit 3), never a crash. hack/upgrade-audit-cronjob.yaml runs it
as a CronJob.`,
		Example: "  # One pass, failing a step older than 30 minutes\n  kubectl kubeadmcfg upgrade-audit --stuck-after 30m\n\n" +
			"  # Keep auditing every 5 minutes\n  kubectl kubeadmcfg upgrade-audit --interval 5m",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().DurationVar(&o.StuckAfter, "stuck-after", o.StuckAfter, "Fail a step in progress whose state is older than this")
	cmd.Flags().DurationVar(&o.Interval, "interval", o.Interval, "Repeat the audit at this interval until interrupted (0: one pass)")
	o.AddFlags(cmd, true)
	return cmd
}

// Complete builds the pipeline.
func (o *UpgradeAuditOptions) Complete(*cobra.Command, []string) error { return o.complete() }

// Validate checks the durations and flags.
func (o *UpgradeAuditOptions) Validate() error {
	if o.StuckAfter <= 0 {
		return exitcode.Usagef("--stuck-after must be positive, not %s", o.StuckAfter)
	}
	if o.Interval < 0 {
		return exitcode.Usagef("--interval must not be negative, not %s", o.Interval)
	}
	return o.validate()
}

// Run audits once, or every --interval until interrupted.
func (o *UpgradeAuditOptions) Run(ctx context.Context) error {
	if o.Interval == 0 {
		return o.pass(ctx)
	}
	for {
		if err := o.pass(ctx); err != nil {
			fmt.Fprintf(o.ErrOut, "error: %s\n", exitcode.Message(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Interval):
		}
	}
}

// pass runs one audit; no upgrade at all is nothing to audit.
func (o *UpgradeAuditOptions) pass(ctx context.Context) error {
	err := o.write(ctx, upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
		return rec.Audit(o.clock(), o.StuckAfter)
	}))
	if exitcode.FromError(err) == exitcode.NotFound {
		if o.Print.Human() {
			fmt.Fprintln(o.Out, "no upgrade recorded: nothing to audit")
		}
		return nil
	}
	return err
}
