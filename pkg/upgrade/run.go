package upgrade

import (
	"fmt"
	"slices"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Runner is a step being run by upgrade-run: the process that moved the
// upgrade (or a host) into the step and will record its outcome. While it
// runs it renews its heartbeat Lease; an auditor that sees the heartbeat stop
// fails the step, so a runner killed with SIGKILL cannot leave it stuck,
// unless it sees the runner's COMMAND still running on its node.
type Runner struct {
	// ID names this run (identity/pid/random); the heartbeat Lease's holder.
	ID string `json:"id"`
	// State is the step: the in-progress state, or the host status with Host.
	State string `json:"state"`
	Host  string `json:"host,omitempty"`
	// Lease is the heartbeat Lease's name, "" when the runner could not
	// take one (its step is then audited by age, as a step set by hand).
	Lease string `json:"lease,omitempty"`
	// Interval is how often the heartbeat is renewed (a Go duration).
	Interval  string `json:"interval"`
	Command   string `json:"command"`
	StartedAt string `json:"startedAt"`
	// Process is where COMMAND runs, recorded once it started (empty
	// before, or when the record could not be written).
	Process
}

// MaxCommandBytes bounds the command line a runner records.
const MaxCommandBytes = 256

// Run asks to run a step.
type Run struct {
	// ID names the run; it must be unique (the heartbeat's holder).
	ID string
	// Step is the in-progress state to move the upgrade to, or with Host the
	// in-progress host status to move that node to.
	Step   string
	Host   string
	Expect string
	// Command is what runs, for the record.
	Command  string
	Interval time.Duration
	// Leases are the heartbeat Lease names to choose from, in order; the
	// first no other runner holds is taken.
	Leases []string
	// Check tells whether the COMMAND of an earlier run of the step, whose
	// runner is lost, still runs: then the run is refused (nil: unchecked).
	Check ProcessCheck
}

// BeginRun moves the upgrade (or run.Host) into run.Step under the plan's
// rules, checking run.Expect, and records the runner with a heartbeat Lease
// no other runner holds. A step the upgrade is already in is taken over
// when no runner holds it (it was set by hand); one being run is refused,
// and so is one whose earlier run's COMMAND run.Check sees still running
// (a LiveCommandError), so that a retry never runs beside it.
func (r *Record) BeginRun(c Clock, run Run) (Runner, error) {
	p := r.plan()
	rn := Runner{ID: run.ID, State: run.Step, Host: run.Host, Interval: run.Interval.String(),
		Command: boundCommand(run.Command), StartedAt: c.stamp()}
	if run.Host == "" {
		to := State(run.Step)
		st := p.StepOf(to)
		switch {
		case !p.Known(to):
			return Runner{}, exitcode.Usagef("unknown state %q in plan %s (one of: %s)", to, p.Name, join(p.States()))
		case st == nil || st.Name != to:
			return Runner{}, exitcode.Usagef("%s is not a step of plan %s; run one of: %s", to, p.Name, join(p.runnable()))
		case st.Reaches == "":
			return Runner{}, exitcode.New(exitcode.Usage, &HostStepsError{Step: to, Plan: p.Name})
		case run.Expect != "" && r.State != State(run.Expect):
			return Runner{}, exitcode.Conflictf("the upgrade is in %s, not %s as expected; nothing was changed", r.State, run.Expect)
		}
		if r.State == to {
			if held := r.runnerOf("", run.Step); held != nil {
				return Runner{}, exitcode.Conflictf("%s is already being run by %s since %s (command: %s); wait for it, or for upgrade-audit to fail it",
					to, held.ID, held.StartedAt, held.Command)
			}
		} else if !p.graph().allowed(r.State, to) {
			return Runner{}, exitcode.New(exitcode.Conflict, &TransitionError{From: string(r.State), To: string(to), Allowed: join(p.Allowed(r.State))})
		}
		if err := r.checkLost("", run.Step, run.Check); err != nil {
			return Runner{}, exitcode.New(exitcode.Conflict, err)
		}
		if err := r.takeLease(&rn, run.Leases); err != nil {
			return Runner{}, err
		}
		if r.State != to {
			r.moveTo(c, to, "upgrade-run: "+rn.Command)
		}
	} else {
		to := HostStatus(run.Step)
		current := r.hostStatus(run.Host)
		switch {
		case !p.KnownHost(to):
			return Runner{}, exitcode.Usagef("unknown host status %q in plan %s (one of: %s)", to, p.Name, join(p.HostStatuses()))
		case func() bool { _, ok := p.HostFailedOf(to); return !ok }():
			return Runner{}, exitcode.Usagef("%s is not a host step of plan %s; run one of: %s", to, p.Name, join(p.hostRunnable()))
		case run.Expect != "" && current != HostStatus(run.Expect):
			return Runner{}, exitcode.Conflictf("host %s is %s, not %s as expected; nothing was changed", run.Host, current, run.Expect)
		}
		if current == to {
			if held := r.runnerOf(run.Host, run.Step); held != nil {
				return Runner{}, exitcode.Conflictf("host %s: %s is already being run by %s since %s (command: %s); wait for it, or for upgrade-audit to fail it",
					run.Host, to, held.ID, held.StartedAt, held.Command)
			}
		} else if !p.allowedHost(current, to) {
			return Runner{}, exitcode.New(exitcode.Conflict, &TransitionError{Host: run.Host, From: string(current), To: string(to), Allowed: join(p.AllowedHost(current))})
		}
		if err := r.checkLost(run.Host, run.Step, run.Check); err != nil {
			return Runner{}, exitcode.New(exitcode.Conflict, err)
		}
		if err := r.takeLease(&rn, run.Leases); err != nil {
			return Runner{}, err
		}
		if current != to {
			r.setHost(c, run.Host, to, "upgrade-run: "+rn.Command)
		}
	}
	r.Runners = append(r.Runners, rn)
	return rn, nil
}

// takeLease gives rn the first Lease no runner holds.
func (r *Record) takeLease(rn *Runner, leases []string) error {
	if len(leases) == 0 {
		return nil
	}
	for _, l := range leases {
		if !slices.ContainsFunc(r.Runners, func(o Runner) bool { return o.Lease == l }) {
			rn.Lease = l
			return nil
		}
	}
	return exitcode.Conflictf("all %d heartbeat Leases are held by running steps; wait for one to finish", len(leases))
}

// EndRun records the outcome of the run id: the step's reached state (or
// status) when ok, otherwise its failed one, as upgrade-fail would record it
// (for the upgrade's step, every host in progress fails with it). It is
// refused when the run no longer holds its step: someone moved the upgrade
// while the command ran, and that decision stands.
func (r *Record) EndRun(c Clock, id string, ok bool, reason string) (changed bool, err error) {
	rn := r.runnerByID(id)
	if rn == nil {
		return false, exitcode.Conflictf("the step is no longer held by this run: someone moved it meanwhile (the upgrade is in %s); its outcome was not recorded", r.State)
	}
	run := *rn
	r.dropRunners(func(o Runner) bool { return o.ID == id }) // ended, not lost
	p := r.plan()
	if run.Host == "" {
		st := p.StepOf(State(run.State))
		if ok {
			r.moveTo(c, st.Reaches, reason)
			return true, nil
		}
		// Hosts with runners of their own carry on: their runners report.
		return r.fail(c, reason, r.hasRunner)
	}
	to, _ := p.HostFailedOf(HostStatus(run.State))
	if ok {
		to, _ = p.HostReachesOf(HostStatus(run.State))
	}
	r.setHost(c, run.Host, to, reason)
	return true, nil
}

// DropHeartbeat records that the run id has no heartbeat after all (it
// could not take its Lease): its step is then audited by age.
func (r *Record) DropHeartbeat(id string) (changed bool, err error) {
	for i := range r.Runners {
		if r.Runners[i].ID == id && r.Runners[i].Lease != "" {
			r.Runners[i].Lease = ""
			return true, nil
		}
	}
	return false, nil
}

// RunnerByID returns the runner of the run id, or nil.
func (r *Record) RunnerByID(id string) *Runner { return r.runnerByID(id) }

func (r *Record) runnerByID(id string) *Runner {
	for i := range r.Runners {
		if r.Runners[i].ID == id {
			return &r.Runners[i]
		}
	}
	return nil
}

// hasRunner reports whether a node's step is run by a runner with a heartbeat.
func (r *Record) hasRunner(node string) bool {
	return slices.ContainsFunc(r.Runners, func(o Runner) bool { return o.Host == node && o.Lease != "" })
}

func (r *Record) runnerOf(host, state string) *Runner {
	for i := range r.Runners {
		if rn := &r.Runners[i]; rn.Host == host && rn.State == state {
			return rn
		}
	}
	return nil
}

func (r *Record) dropRunners(drop func(Runner) bool) {
	r.Runners = slices.DeleteFunc(r.Runners, drop)
}

// runnable lists the steps upgrade-run can run without --host.
func (p *Plan) runnable() []State {
	var out []State
	for _, s := range p.allSteps() {
		if s.Reaches != "" {
			out = append(out, s.Name)
		}
	}
	return out
}

func (p *Plan) hostRunnable() []HostStatus {
	var out []HostStatus
	for _, h := range p.HostSteps {
		out = append(out, h.Name)
	}
	return out
}

func boundCommand(s string) string {
	if len(s) <= MaxCommandBytes {
		return s
	}
	return s[:MaxCommandBytes-3] + "..."
}

// Audit fails what is stuck, as upgrade-fail would:
//
//   - a step whose runner's heartbeat has stopped (silent lists them, by
//     runner ID, with how long the auditor saw no renewal by its own clock)
//     and whose COMMAND check does not see running: the upgrade's step
//     fails with every host in progress; a host's step fails that host
//     alone; the runner is kept as lost;
//   - a step in progress with no live heartbeat (set by hand, or its runner
//     had none) that has made no progress (no change of state or of any
//     host) for stuckAfter, measured on c.Now, the API server's clock.
//
// A runner not in silent is alive, and so is a silent one whose COMMAND
// check sees running (on the auditor's own node): its step is never
// failed, however long it runs. Where check cannot see the COMMAND, a
// silent runner is taken for dead with it, as its parent-death signal
// makes it on Linux. Audit is safe from every node at once: inside a
// compare-and-swap write only the first auditor sees the step still in
// progress.
func (r *Record) Audit(c Clock, stuckAfter time.Duration, silent map[string]time.Duration, check ProcessCheck) (changed bool, err error) {
	p := r.plan()
	live := func(o Runner) bool {
		_, quiet := silent[o.ID]
		return o.Lease != "" && (!quiet || (check != nil && check(o.Process) == CommandRunning))
	}
	for _, rn := range slices.Clone(r.Runners) {
		quiet, stale := silent[rn.ID]
		if !stale || rn.Lease == "" || live(rn) || r.runnerByID(rn.ID) == nil {
			continue
		}
		reason := fmt.Sprintf("the runner of %s stopped: no heartbeat from %s for %s", rn.State, rn.ID, quiet.Round(time.Second))
		if rn.Host == "" {
			if r.State == State(rn.State) && p.InProgress(r.State) {
				alive := func(node string) bool {
					return slices.ContainsFunc(r.Runners, func(o Runner) bool { return o.Host == node && live(o) })
				}
				if _, err := r.fail(c, reason, alive); err != nil {
					return changed, err
				}
			}
			r.lose(func(o Runner) bool { return o.ID == rn.ID })
			changed = true
			continue
		}
		if r.hostStatus(rn.Host) == HostStatus(rn.State) {
			if hf, ok := p.HostFailedOf(HostStatus(rn.State)); ok {
				r.setHost(c, rn.Host, hf, reason)
			}
		}
		r.lose(func(o Runner) bool { return o.ID == rn.ID })
		changed = true
	}
	if !p.InProgress(r.State) {
		return changed, nil
	}
	for _, rn := range r.Runners {
		if rn.Lease != "" {
			return changed, nil // a live heartbeat: the step is under way
		}
	}
	last, err := r.LastProgress()
	if err != nil {
		return changed, err
	}
	age := c.Now.Sub(last)
	if age < stuckAfter {
		return changed, nil
	}
	failed, err := r.Fail(c, fmt.Sprintf("stuck in %s for %s", r.State, age.Round(time.Second)))
	return changed || failed, err
}

// HostStepsError is a step that reaches no state of its own: its work is
// done by the host steps, one per node, so it cannot be run as a whole. It
// is typed so that the caller can say how to run a host step.
type HostStepsError struct {
	Step State
	Plan string
}

func (e *HostStepsError) Error() string {
	return fmt.Sprintf("%s reaches no state of its own in plan %s: run its host steps, then move on with upgrade-set", e.Step, e.Plan)
}
