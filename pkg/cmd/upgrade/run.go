package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// defaultRunTimeout is no limit on COMMAND.
const defaultRunTimeout = 0

// RunOptions runs the command of a step and records its outcome.
type RunOptions struct {
	*Flags
	Step, Host, Expect string
	Command            []string
	RunTimeout         time.Duration
	HeartbeatInterval  time.Duration
}

// NewCmdUpgradeRun builds upgrade-run.
func NewCmdUpgradeRun(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &RunOptions{Flags: NewFlags(cluster, streams), RunTimeout: defaultRunTimeout, HeartbeatInterval: 5 * time.Second}
	cmd := &cobra.Command{
		Use:   "upgrade-run STEP [--host NODE] [--expect STATE] -- COMMAND [ARGS...]",
		Short: "Run a step's command and record its outcome",
		Long: `Move the upgrade into STEP (with --host, move NODE into the host step STEP)
with a compare-and-swap, run COMMAND, and record the outcome: the step's end
state when COMMAND exits 0; its -failed state when it exits non-zero, is
ended by a signal, outruns --run-timeout or cannot start, with the exit
status and the last lines of its output in the reason. A failed step fails
with the hosts in progress that have no runner of their own, as upgrade-fail
does; a retry (upgrade-run of the same step) is accepted from there, unless
the COMMAND of an earlier run still runs on this node (exit 4).

While COMMAND runs, the runner renews a heartbeat Lease; upgrade-audit fails
the step when the heartbeat stops for --stale-after (a runner killed with
SIGKILL, a node that rebooted) and never while it goes on. SIGINT, SIGTERM,
SIGHUP and SIGQUIT are passed on to COMMAND (which runs in its own process
group; a second signal kills it), and its outcome is recorded before the
runner exits. On a terminal COMMAND's group gets the terminal's foreground,
so that it can prompt and Ctrl-C reaches it directly. If the step was moved
by someone else meanwhile (upgrade-fail, upgrade-audit, upgrade-set --force),
the outcome is not recorded over it.

COMMAND's output passes through (its standard output to stderr with -o).
Exit code: COMMAND's, 0 only when COMMAND exited 0 and its outcome was
recorded; 128+N when a signal N ended it, 124 when --run-timeout stopped it,
126 when it cannot be run, 127 when it does not exist; when COMMAND exited 0
but the outcome could not be recorded, the code of that failure (1, 4, 6, 7).
Before COMMAND starts, errors have the plugin's usual codes (2, 4, 5, ...)
and nothing runs. --timeout bounds each state write, --run-timeout COMMAND.`,
		Example: "  # Upgrade the second master; the state follows kubeadm's outcome\n" +
			"  kubectl kubeadmcfg upgrade-run upgrading-second-master -- kubeadm upgrade node\n\n" +
			"  # A node's kubelet, as a host step, within 20 minutes\n" +
			"  kubectl kubeadmcfg upgrade-run upgrading-kubelet --host worker-1 --run-timeout 20m -- /usr/local/bin/upgrade-kubelet.sh",
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			switch {
			case dash < 0:
				return exitcode.Usagef("%s takes STEP -- COMMAND [ARGS...]; put -- before the command", cmd.CommandPath())
			case dash != 1:
				return exitcode.Usagef("%s takes one STEP before -- (got %d arguments)", cmd.CommandPath(), dash)
			case len(args) == dash:
				return exitcode.Usagef("%s needs a COMMAND after --", cmd.CommandPath())
			}
			return nil
		},
		ValidArgsFunction: func(c *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveDefault
			}
			return completeStates(o.Flags)(c, args, s)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.Host, "host", o.Host, "Run a host step: move this node into STEP, a host status of the plan")
	cmd.Flags().StringVar(&o.Expect, "expect", o.Expect, "Start only if the upgrade (or the host) is in this state")
	cmd.Flags().DurationVar(&o.RunTimeout, "run-timeout", o.RunTimeout, "Stop COMMAND (SIGTERM, then SIGKILL 10s later) if it runs longer, and record the step failed (0: no limit)")
	cmd.Flags().DurationVar(&o.HeartbeatInterval, "heartbeat-interval", o.HeartbeatInterval, "How often the heartbeat Lease is renewed while COMMAND runs")
	o.AddFlags(cmd, true)
	cmd.Flags().Lookup("timeout").Usage = "Give up each state write (the move into STEP, the outcome) if it has not succeeded within this time; --run-timeout bounds COMMAND"
	return cmd
}

// Complete reads the step and the command and builds the pipeline.
func (o *RunOptions) Complete(_ *cobra.Command, args []string) error {
	o.Step, o.Command = args[0], args[1:]
	return o.complete()
}

// Validate checks the names and durations.
func (o *RunOptions) Validate() error {
	if err := upgradestate.CheckStateName(o.Step); err != nil {
		return exitcode.Usagef("STEP: %w", err)
	}
	if o.Expect != "" && upgradestate.CheckStateName(o.Expect) != nil {
		return exitcode.Usagef("--expect: %w", upgradestate.CheckStateName(o.Expect))
	}
	if o.Host != "" && upgradestate.CheckNodeName(o.Host) != nil {
		return exitcode.Usagef("--host: %w", upgradestate.CheckNodeName(o.Host))
	}
	if len(o.Command) == 0 || o.Command[0] == "" {
		return exitcode.Usagef("COMMAND must not be empty")
	}
	if o.RunTimeout < 0 {
		return exitcode.Usagef("--run-timeout must not be negative, not %s", o.RunTimeout)
	}
	if o.HeartbeatInterval < time.Second {
		return exitcode.Usagef("--heartbeat-interval must be at least 1s, not %s", o.HeartbeatInterval)
	}
	return o.validate()
}

// RunResult is what upgrade-run prints with -o.
type RunResult struct {
	Step    string   `json:"step"`
	Host    string   `json:"host,omitempty"`
	RunID   string   `json:"runID"`
	Command []string `json:"command"`
	// Started is false when COMMAND could not start.
	Started bool `json:"started"`
	// ExitCode is the runner's exit code (see the command's help).
	ExitCode int    `json:"exitCode"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timedOut"`
	Duration string `json:"duration"`
	// Recorded is the state (or host status) recorded at the end, "" when
	// the outcome could not be recorded (RecordError says why).
	Recorded    string               `json:"recorded,omitempty"`
	RecordError string               `json:"recordError,omitempty"`
	Upgrade     *upgradestate.Status `json:"upgrade,omitempty"`
}

// Run moves the upgrade into the step, runs the command with a heartbeat,
// and records the outcome.
func (o *RunOptions) Run(ctx context.Context) error {
	// From here SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed on to the
	// command. SIGINT and SIGTERM also cancel ctx, which only the first
	// write uses: the outcome is recorded with a fresh --timeout whatever
	// happens to the runner.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, runSignals...)
	defer signal.Stop(sigs)
	outliveClosedPipes()

	id := runID(o.Retry.Identity)
	res := &RunResult{Step: o.Step, Host: o.Host, RunID: id, Command: o.Command}
	var runner upgradestate.Runner
	change, _, err := o.apply(ctx, upgradestate.Existing(func(rec *upgradestate.Record) (bool, error) {
		var err error
		runner, err = rec.BeginRun(o.clock(), upgradestate.Run{ID: id, Step: o.Step, Host: o.Host, Expect: o.Expect,
			Command: commandLine(o.Command), Interval: o.HeartbeatInterval, Leases: o.engine.HeartbeatNames(), Check: upgradestate.CheckProcess})
		return err == nil, err
	}))
	if err != nil {
		return hostStepsHint(err) // nothing ran
	}
	o.progress("%s; running: %s", o.movedFrom(change, "started"), commandLine(o.Command))

	var heartbeat *engine.Heartbeat
	if runner.Lease != "" {
		heartbeat = o.startHeartbeat(runner.Lease, id)
	}
	stdout := o.Out
	if !o.Print.Human() {
		stdout = o.ErrOut // keep -o output parseable
	}
	// On a terminal COMMAND gets its foreground; in its background (the
	// runner started with &) it cannot have it, and reads end of file.
	tty, background := proc.ForegroundTerminal(o.In)
	in := o.In
	if background {
		in = nil
	}
	var recorded <-chan error // set before execute learns that COMMAND started
	out := execute(command{args: o.Command, in: in, stdout: stdout, stderr: o.ErrOut, terminal: tty, timeout: o.RunTimeout,
		onStart: func(started proc.Identity) {
			p := upgradestate.ProcessOf(started)
			recorded = crash.Go(func() error { o.recordProcess(id, p); return nil })
		}}, sigs)
	if recorded != nil {
		if err := <-recorded; err != nil { // a panic: a bug to report, not COMMAND's outcome
			fmt.Fprintf(o.ErrOut, "warning: could not record COMMAND's pid: %s\n", exitcode.Message(err))
		}
	}
	res.Started, res.ExitCode, res.Signal, res.TimedOut = out.started, out.code, out.signal, out.timedOut
	res.Duration = out.duration.Round(time.Millisecond).String()

	// The heartbeat goes on until the outcome is recorded, so that no
	// auditor takes the runner for dead while it writes.
	end, _, recErr := o.apply(context.Background(), upgradestate.Existing(func(rec *upgradestate.Record) (bool, error) {
		return rec.EndRun(o.clock(), id, out.code == 0, out.reason(o.Command))
	}))
	if heartbeat != nil {
		heartbeat.Stop()
		if err := heartbeat.Err(); err != nil {
			fmt.Fprintf(o.ErrOut, "warning: the heartbeat stopped early: %s\n", err)
		}
	}
	if recErr == nil {
		st := end.After.Status()
		res.Upgrade = &st
		res.Recorded = string(end.After.State)
		if o.Host != "" {
			res.Recorded = string(end.After.Hosts[o.Host].Status)
		}
		o.progress("%s (%s)", o.movedFrom(end, "ended"), out.summary(o.Command))
	} else {
		res.RecordError = exitcode.Message(recErr)
	}
	if !o.Print.Human() {
		if err := o.Print.Print(o.Out, res); err != nil {
			return err
		}
	}
	return o.exit(out, res, recErr)
}

// exit maps the outcome to the runner's error and exit code.
func (o *RunOptions) exit(out *runOutcome, res *RunResult, recErr error) error {
	what := o.Step
	if o.Host != "" {
		what = "host " + o.Host + ": " + o.Step
	}
	switch {
	case out.code == 0 && recErr == nil:
		return nil
	case out.code == 0:
		return exitcode.New(exitcode.FromError(recErr), fmt.Errorf("%s: %s, but its outcome could not be recorded: %w", what, out.summary(o.Command), recErr))
	case recErr != nil:
		return exitcode.New(exitcode.Code(out.code), fmt.Errorf("%s failed: %s, and the failure could not be recorded: %w", what, out.summary(o.Command), recErr))
	}
	return exitcode.New(exitcode.Code(out.code), fmt.Errorf("%s failed: %s; recorded %s", what, out.summary(o.Command), res.Recorded))
}

// progress reports on ErrOut: standard output belongs to the command.
func (o *RunOptions) progress(format string, a ...any) {
	if o.Print.Human() {
		fmt.Fprintf(o.ErrOut, format+"\n", a...)
	}
}

func (o *RunOptions) movedFrom(c upgradestate.Change, verb string) string {
	if o.Host == "" {
		if c.Before == c.After.State {
			return fmt.Sprintf("upgrade state: %s (%s)", c.After.State, verb)
		}
		return fmt.Sprintf("upgrade state: %s -> %s", c.Before, c.After.State)
	}
	return fmt.Sprintf("host %s: %s", o.Host, cmdutil.OrDash(string(c.After.Hosts[o.Host].Status)))
}

// recordProcess records where COMMAND runs, so that an audit or a retry
// on this node can tell whether it still runs should the runner die.
func (o *RunOptions) recordProcess(id string, p upgradestate.Process) {
	if _, _, err := o.apply(context.Background(), upgradestate.Existing(func(rec *upgradestate.Record) (bool, error) {
		return rec.RecordProcess(id, p)
	})); err != nil {
		fmt.Fprintf(o.ErrOut, "warning: could not record COMMAND's pid %d: %s\n", p.PID, exitcode.Message(err))
	}
}

// startHeartbeat takes the run's Lease. Without it (no rights on Leases,
// say) the step is recorded as having no heartbeat, so that no auditor
// fails it for one: it is then audited by age, as a step set by hand.
func (o *RunOptions) startHeartbeat(lease, id string) *engine.Heartbeat {
	ctx, cancel := context.WithTimeout(context.Background(), o.Retry.Timeout)
	defer cancel()
	hb, err := o.engine.StartHeartbeat(ctx, lease, id, o.HeartbeatInterval, cmdutil.LocalNow)
	if err == nil {
		return hb
	}
	fmt.Fprintf(o.ErrOut, "warning: no heartbeat (%s); the step is audited by upgrade-audit --stuck-after instead\n", exitcode.Message(err))
	if _, _, err := o.apply(context.Background(), upgradestate.Existing(func(rec *upgradestate.Record) (bool, error) {
		return rec.DropHeartbeat(id)
	})); err != nil {
		fmt.Fprintf(o.ErrOut, "warning: could not record that the step has no heartbeat: %s\n", exitcode.Message(err))
	}
	return nil
}

// hostStepsHint says how to run the host steps of a step that has no state
// of its own: with --host.
func hostStepsHint(err error) error {
	var hostSteps *upgradestate.HostStepsError
	if !errors.As(err, &hostSteps) {
		return err
	}
	return exitcode.Usagef("%s reaches no state of its own in plan %s: run its host steps with --host NODE, then move on with upgrade-set",
		hostSteps.Step, hostSteps.Plan)
}
