package upgrade

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// AuditOptions fails an upgrade stuck in a step.
type AuditOptions struct {
	*Flags
	StuckAfter time.Duration
	StaleAfter time.Duration
	Interval   time.Duration

	observer *engine.HeartbeatObserver // kept across passes with --interval
}

// NewCmdUpgradeAudit builds upgrade-audit.
func NewCmdUpgradeAudit(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &AuditOptions{Flags: NewFlags(cluster, streams), StuckAfter: time.Hour, StaleAfter: 2 * time.Minute}
	cmd := &cobra.Command{
		Use:   "upgrade-audit [--stale-after DURATION] [--stuck-after DURATION] [--interval DURATION]",
		Short: "Fail a step whose runner died, or that is stuck for too long",
		Long: `Do what upgrade-fail does to a step that will not finish by itself:

- a step run by upgrade-run whose runner's heartbeat has stopped for
  --stale-after (a runner killed with SIGKILL, a node that rebooted): the
  upgrade's step fails with its hosts in progress that have no live runner
  of their own, or a host's step fails that host alone. The reason says
  "the runner of STEP stopped: no heartbeat from RUNNER for D". A step whose
  heartbeat goes on is never failed, however long it runs, nor one whose
  runner's COMMAND this process sees still running on its own node;
- a step in progress without a live heartbeat (set by hand) that has made
  no progress, no change of state nor of any host's status, for
  --stuck-after, with the reason "stuck in STATE for AGE".

A heartbeat is judged by when this process sees it renewed, on its own
clock, never by the times other hosts wrote: one pass watches a runner's
Lease until it sees a renewal or --stale-after passes (at least twice the
runner's --heartbeat-interval), so it takes that long when a runner is dead.
Ages are measured on the API server's clock, as the stamps are written.

Safe to run from every control-plane node at once: the compare-and-swap lets
exactly one of them record the transition. With --interval it repeats until
interrupted, reporting a failed pass and going on. An unparsable updated-at
is reported (exit 3), never a crash. deploy/upgrade-audit-cronjob.yaml runs it
as a CronJob.`,
		Example: "  # One pass, failing a step older than 30 minutes\n  kubectl kubeadmcfg upgrade-audit --stuck-after 30m\n\n" +
			"  # Keep auditing every 30 seconds; a dead runner is failed within a minute\n" +
			"  kubectl kubeadmcfg upgrade-audit --interval 30s --stale-after 1m",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().DurationVar(&o.StuckAfter, "stuck-after", o.StuckAfter, "Fail a step in progress without a live heartbeat that has made no progress for this long")
	cmd.Flags().DurationVar(&o.StaleAfter, "stale-after", o.StaleAfter, "Fail a step whose runner's heartbeat has not been renewed for this long")
	cmd.Flags().DurationVar(&o.Interval, "interval", o.Interval, "Repeat the audit at this interval until interrupted (0: one pass)")
	o.AddFlags(cmd, true)
	cmd.Flags().Lookup("timeout").Usage = "Give up each read and the write of a pass if they have not succeeded within this time; watching a heartbeat takes up to --stale-after more"
	return cmd
}

// Complete builds the pipeline.
func (o *AuditOptions) Complete(*cobra.Command, []string) error {
	if err := o.complete(); err != nil {
		return err
	}
	o.observer = o.engine.NewHeartbeatObserver()
	return nil
}

// Validate checks the durations and flags.
func (o *AuditOptions) Validate() error {
	if o.StuckAfter <= 0 {
		return exitcode.Usagef("--stuck-after must be positive, not %s", o.StuckAfter)
	}
	if o.StaleAfter <= 0 {
		return exitcode.Usagef("--stale-after must be positive, not %s", o.StaleAfter)
	}
	if o.Interval < 0 {
		return exitcode.Usagef("--interval must not be negative, not %s", o.Interval)
	}
	return o.validate()
}

// Run audits once, or every --interval until interrupted.
func (o *AuditOptions) Run(ctx context.Context) error {
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
func (o *AuditOptions) pass(ctx context.Context) error {
	silent, watchErr := o.silentRunners(ctx)
	check := onceEach(upgradestate.CheckProcess)
	var spared []upgradestate.Runner
	err := o.write(ctx, upgradestate.Existing(func(rec *upgradestate.Record) (bool, error) {
		spared = spared[:0]
		for _, rn := range rec.Runners {
			if _, quiet := silent[rn.ID]; quiet && rn.Lease != "" && check(rn.Process) == upgradestate.CommandRunning {
				spared = append(spared, rn)
			}
		}
		return rec.Audit(o.clock(), o.StuckAfter, silent, check)
	}))
	if err == nil {
		for _, rn := range spared {
			fmt.Fprintf(o.ErrOut, "warning: the runner %s of %s stopped (no heartbeat for %s), but its COMMAND still runs on this node "+
				"(process group %d): the step is left in progress until it ends; wait, or end it (kill -TERM -- -%d)\n",
				rn.ID, stepName(rn), silent[rn.ID].Round(time.Second), rn.PID, rn.PID)
		}
	}
	if exitcode.FromError(err) == exitcode.NotFound {
		if o.Print.Human() {
			fmt.Fprintln(o.Out, "no upgrade recorded: nothing to audit")
		}
		return nil
	}
	if err == nil && watchErr != nil {
		return exitcode.WithHint(watchErr, "steps with a runner were not audited; grant get on the heartbeat Leases (deploy/rbac.yaml)")
	}
	return err
}

// onceEach asks check once for each process, so that one pass judges a
// process one way throughout.
func onceEach(check upgradestate.ProcessCheck) upgradestate.ProcessCheck {
	seen := map[upgradestate.Process]upgradestate.CommandState{}
	return func(p upgradestate.Process) upgradestate.CommandState {
		st, ok := seen[p]
		if !ok {
			st = check(p)
			seen[p] = st
		}
		return st
	}
}

// stepName names a runner's step, with its host.
func stepName(rn upgradestate.Runner) string {
	if rn.Host != "" {
		return "host " + rn.Host + ": " + rn.State
	}
	return rn.State
}

// silentRunners watches the heartbeats of the recorded runners and
// returns those this process saw no renewal of for --stale-after (or twice
// the runner's interval, if longer), with how long. One pass watches until
// every runner is judged; with --interval, what earlier passes saw counts
// and a pass only looks once.
func (o *AuditOptions) silentRunners(ctx context.Context) (map[string]time.Duration, error) {
	cm, err := o.engine.Get(ctx) // bounded by --timeout
	if err != nil {
		return nil, nil // the write reports it
	}
	rec, ok, err := upgradestate.FromConfigMap(cm)
	if err != nil || !ok {
		return nil, nil
	}
	runners := map[string]upgradestate.Runner{}
	var leases []string
	for _, rn := range rec.Runners {
		if rn.Lease != "" {
			runners[rn.ID] = rn
			leases = append(leases, rn.Lease)
		}
	}
	if len(runners) == 0 {
		return nil, nil
	}
	limit := func(rn upgradestate.Runner) time.Duration {
		interval, _ := time.ParseDuration(rn.Interval)
		return max(o.StaleAfter, 2*interval)
	}
	longest := time.Duration(0)
	for _, rn := range runners {
		longest = max(longest, limit(rn))
	}
	poll := min(max(longest/20, 100*time.Millisecond), time.Second)
	deadline := time.Now().Add(longest + poll)
	for {
		octx, cancel := context.WithTimeout(ctx, o.Retry.Timeout)
		err := o.observer.Observe(octx, leases)
		cancel()
		if err != nil {
			return nil, err
		}
		silent, undecided := map[string]time.Duration{}, 0
		for id, rn := range runners {
			quiet, renewed := o.observer.Silence(rn.Lease, id)
			switch {
			case quiet >= limit(rn):
				silent[id] = quiet
			case !renewed && o.Interval == 0:
				undecided++
			}
		}
		if undecided == 0 || time.Now().After(deadline) {
			return silent, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}
