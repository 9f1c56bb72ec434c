package cmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// The runner's own exit codes, as GNU timeout and the shells use them.
const (
	exitRunTimeout    = 124 // --run-timeout passed and the command was stopped
	exitCannotInvoke  = 126 // the command exists but cannot be run
	exitNotFound      = 127 // no such command
	exitSignalBase    = 128 // + the signal that ended the command
	runKillAfter      = 10 * time.Second
	runTailLines      = 5
	runTailBytes      = 512
	defaultRunTimeout = 0
)

// UpgradeRunOptions runs the command of a step and records its outcome.
type UpgradeRunOptions struct {
	*UpgradeFlags
	Step, Host, Expect string
	Command            []string
	RunTimeout         time.Duration
	HeartbeatInterval  time.Duration
}

// NewCmdUpgradeRun builds upgrade-run.
func NewCmdUpgradeRun(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeRunOptions{UpgradeFlags: NewUpgradeFlags(cluster, streams), RunTimeout: defaultRunTimeout, HeartbeatInterval: 5 * time.Second}
	cmd := &cobra.Command{
		Use:   "upgrade-run STEP [--host NODE] [--expect STATE] -- COMMAND [ARGS...]",
		Short: "Run a step's command and record its outcome",
		Long: `Move the upgrade into STEP (with --host, move NODE into the host step STEP)
with a compare-and-swap, run COMMAND, and record the outcome: the step's end
state when COMMAND exits 0; its -failed state when it exits non-zero, is
ended by a signal, outruns --run-timeout or cannot start, with the exit
status and the last lines of its output in the reason. A failed step fails
with the hosts in progress that have no runner of their own, as upgrade-fail
does; a retry (upgrade-run of the same step) is accepted from there.

While COMMAND runs, the runner renews a heartbeat Lease; upgrade-audit fails
the step when the heartbeat stops for --stale-after (a runner killed with
SIGKILL, a node that rebooted) and never while it goes on. SIGINT and
SIGTERM are passed on to COMMAND (which runs in its own process group), and
its outcome is recorded before the runner exits. If the step was moved by
someone else meanwhile (upgrade-fail, upgrade-audit, upgrade-set --force),
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
			return completeStates(o.UpgradeFlags)(c, args, s)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), o, cmd, args)
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
func (o *UpgradeRunOptions) Complete(_ *cobra.Command, args []string) error {
	o.Step, o.Command = args[0], args[1:]
	return o.complete()
}

// Validate checks the names and durations.
func (o *UpgradeRunOptions) Validate() error {
	if err := upgrade.CheckStateName(o.Step); err != nil {
		return exitcode.Usagef("STEP: %w", err)
	}
	if o.Expect != "" && upgrade.CheckStateName(o.Expect) != nil {
		return exitcode.Usagef("--expect: %w", upgrade.CheckStateName(o.Expect))
	}
	if o.Host != "" && upgrade.CheckNodeName(o.Host) != nil {
		return exitcode.Usagef("--host: %w", upgrade.CheckNodeName(o.Host))
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
	Recorded    string          `json:"recorded,omitempty"`
	RecordError string          `json:"recordError,omitempty"`
	Upgrade     *upgrade.Status `json:"upgrade,omitempty"`
}

// Run moves the upgrade into the step, runs the command with a heartbeat,
// and records the outcome.
func (o *UpgradeRunOptions) Run(ctx context.Context) error {
	// From here SIGINT and SIGTERM are passed on to the command. They also
	// cancel ctx, which only the first write uses: the outcome is recorded
	// with a fresh --timeout whatever happens to the runner.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, runSignals...)
	defer signal.Stop(sigs)

	id := runID(o.Retry.Identity)
	res := &RunResult{Step: o.Step, Host: o.Host, RunID: id, Command: o.Command}
	var runner upgrade.Runner
	change, _, err := o.apply(ctx, upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
		var err error
		runner, err = rec.BeginRun(o.clock(), upgrade.Run{ID: id, Step: o.Step, Host: o.Host, Expect: o.Expect,
			Command: commandLine(o.Command), Interval: o.HeartbeatInterval, Leases: o.engine.HeartbeatNames()})
		return err == nil, err
	}))
	if err != nil {
		return err // nothing ran
	}
	o.progress("%s; running: %s", o.movedFrom(change, "started"), commandLine(o.Command))

	var heartbeat *engine.Heartbeat
	if runner.Lease != "" {
		heartbeat = o.startHeartbeat(runner.Lease, id)
	}
	out := o.execute(sigs)
	res.Started, res.ExitCode, res.Signal, res.TimedOut = out.started, out.code, out.signal, out.timedOut
	res.Duration = out.duration.Round(time.Millisecond).String()

	// The heartbeat goes on until the outcome is recorded, so that no
	// auditor takes the runner for dead while it writes.
	end, _, recErr := o.apply(context.Background(), upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
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
func (o *UpgradeRunOptions) exit(out *runOutcome, res *RunResult, recErr error) error {
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
func (o *UpgradeRunOptions) progress(format string, a ...any) {
	if o.Print.Human() {
		fmt.Fprintf(o.ErrOut, format+"\n", a...)
	}
}

func (o *UpgradeRunOptions) movedFrom(c upgrade.Change, verb string) string {
	if o.Host == "" {
		if c.Before == c.After.State {
			return fmt.Sprintf("upgrade state: %s (%s)", c.After.State, verb)
		}
		return fmt.Sprintf("upgrade state: %s -> %s", c.Before, c.After.State)
	}
	return fmt.Sprintf("host %s: %s", o.Host, orDash(string(c.After.Hosts[o.Host].Status)))
}

// startHeartbeat takes the run's Lease. Without it (no rights on Leases,
// say) the step is recorded as having no heartbeat, so that no auditor
// fails it for one: it is then audited by age, as a step set by hand.
func (o *UpgradeRunOptions) startHeartbeat(lease, id string) *engine.Heartbeat {
	ctx, cancel := context.WithTimeout(context.Background(), o.Retry.Timeout)
	defer cancel()
	hb, err := o.engine.StartHeartbeat(ctx, lease, id, o.HeartbeatInterval, localNow)
	if err == nil {
		return hb
	}
	fmt.Fprintf(o.ErrOut, "warning: no heartbeat (%s); the step is audited by upgrade-audit --stuck-after instead\n", exitcode.Message(err))
	if _, _, err := o.apply(context.Background(), upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
		return rec.DropHeartbeat(id)
	})); err != nil {
		fmt.Fprintf(o.ErrOut, "warning: could not record that the step has no heartbeat: %s\n", exitcode.Message(err))
	}
	return nil
}

// runOutcome is how the command ended.
type runOutcome struct {
	started  bool
	startErr error
	exit     int    // the command's exit status, when it exited
	signal   string // the signal that ended it
	timedOut bool
	passed   os.Signal // a signal passed on from the runner
	code     int       // the runner's exit code
	duration time.Duration
	tail     string
}

// execute runs the command in its own process group, passes on signals,
// enforces --run-timeout, and keeps the last lines of its output.
func (o *UpgradeRunOptions) execute(sigs <-chan os.Signal) *runOutcome {
	out := &runOutcome{}
	select {
	case sig := <-sigs: // interrupted between the first write and the start
		out.passed, out.signal = sig, sig.String()
		out.code = exitSignalBase + signalNumber(sig)
		return out
	default:
	}
	tail := &tailBuffer{}
	stdout := o.Out
	if !o.Print.Human() {
		stdout = o.ErrOut
	}
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.In, io.MultiWriter(stdout, tail), io.MultiWriter(o.ErrOut, tail)
	cmd.WaitDelay = 5 * time.Second // a child that keeps the output open cannot hold the runner
	ownProcessGroup(cmd)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		out.startErr, out.code = err, exitCannotInvoke
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			out.code = exitNotFound
		}
		return out
	}
	out.started = true
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timeout, kill <-chan time.Time
	if o.RunTimeout > 0 {
		t := time.NewTimer(o.RunTimeout)
		defer t.Stop()
		timeout = t.C
	}
	var waitErr error
wait:
	for {
		select {
		case sig := <-sigs:
			out.passed = sig
			signalGroup(cmd.Process, sig)
		case <-timeout:
			out.timedOut = true
			signalGroup(cmd.Process, syscall.SIGTERM)
			kill = time.After(runKillAfter)
		case <-kill:
			killGroup(cmd.Process)
		case waitErr = <-done:
			break wait
		}
	}
	out.duration = time.Since(start)
	out.tail = tail.last(runTailLines, runTailBytes)
	ps := cmd.ProcessState
	if ps == nil { // the wait itself failed: the outcome is unknown, so a failure
		out.startErr, out.code = waitErr, 1
		return out
	}
	if sig, n, ok := exitSignal(ps); ok {
		out.signal, out.code = sig.String(), exitSignalBase+n
	} else {
		out.exit, out.code = ps.ExitCode(), ps.ExitCode()
	}
	if out.timedOut {
		out.code = exitRunTimeout // as GNU timeout: stopped is failed, whatever it exited with
	}
	return out
}

// summary says in a few words how the command ended.
func (out *runOutcome) summary(command []string) string {
	name := command[0]
	switch {
	case out.started && out.startErr != nil:
		return fmt.Sprintf("%s: the runner lost track of it: %s", name, out.startErr)
	case out.startErr != nil:
		return fmt.Sprintf("%s could not start: %s", name, out.startErr)
	case !out.started:
		return fmt.Sprintf("%s was not started: the runner got %s first", name, out.signal)
	case out.timedOut:
		return fmt.Sprintf("%s did not finish within --run-timeout and was stopped after %s", name, out.duration.Round(time.Second))
	case out.signal != "":
		by := ""
		if out.passed != nil {
			by = fmt.Sprintf(" (%s passed on from the runner)", out.passed)
		}
		return fmt.Sprintf("%s was killed by signal %s%s after %s", name, out.signal, by, out.duration.Round(time.Second))
	case out.code == 0:
		return fmt.Sprintf("%s succeeded in %s", name, out.duration.Round(time.Second))
	}
	return fmt.Sprintf("%s exited %d after %s", name, out.exit, out.duration.Round(time.Second))
}

// reason is what is recorded: the summary and the last lines of output.
func (out *runOutcome) reason(command []string) string {
	r := "upgrade-run: " + out.summary(command)
	if out.tail != "" {
		r += "; last output: " + out.tail
	}
	return upgrade.BoundReason(r)
}

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return int(syscall.SIGTERM)
}

// runID names one run: who, which process, and a random part, so that two
// runs never share a heartbeat.
func runID(identity string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", identity, os.Getpid(), hex.EncodeToString(b))
}

// commandLine shows a command as a shell would take it back.
func commandLine(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		quoted[i] = a
	}
	return strings.Join(quoted, " ")
}

// tailBuffer keeps the end of what is written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailKeep = 8 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*tailKeep {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailKeep:]...)
	}
	return len(p), nil
}

// last returns the last n non-empty lines, joined with " | ", at most
// limit bytes (the end kept).
func (t *tailBuffer) last(n, limit int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lines []string
	for _, l := range strings.Split(string(t.buf), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s := strings.Join(lines, " | ")
	if len(s) > limit {
		s = "..." + s[len(s)-limit+3:]
	}
	return strings.ToValidUTF8(s, "")
}
