package upgrade

import (
	"fmt"
	"slices"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
)

// Where a runner's COMMAND runs, and what a later audit or retry can know
// of it. A runner that dies cannot say whether its COMMAND still runs, so
// the runner records the process (its pid, which is also its process
// group's id, and the node's boot) as soon as COMMAND starts. On the same
// node, boot and PID namespace, whoever comes later checks the process
// group; anywhere else nothing can be seen, and the runner's parent-death
// signal (Linux) is what ends COMMAND with its runner.

// Process is a runner's COMMAND as the runner recorded it.
type Process struct {
	// PID is COMMAND's process id, also the id of its process group, which
	// holds what it started unless they left it.
	PID int `json:"pid,omitempty"`
	// StartTicks is when it started, in clock ticks since boot, so that a
	// pid used again is not taken for it.
	StartTicks uint64 `json:"startTicks,omitempty"`
	// BootID is the node's boot id: another boot, or another node, cannot
	// see the process.
	BootID string `json:"bootID,omitempty"`
	// PIDNamespace names the PID namespace the pid is in: a container on
	// the same node (the audit's CronJob) sees other pids.
	PIDNamespace string `json:"pidNamespace,omitempty"`
}

// CommandState is what can be known, where the question is asked, of the
// COMMAND of a runner.
type CommandState int

const (
	// CommandUnknown is a COMMAND that runs (or ran) on another node, boot
	// or PID namespace, or that recorded no process.
	CommandUnknown CommandState = iota
	// CommandEnded is a COMMAND whose process group has nothing left.
	CommandEnded
	// CommandRunning is a COMMAND whose process group still has a process.
	CommandRunning
)

// ProcessCheck tells what can be known here of a recorded process. A nil
// check knows nothing.
type ProcessCheck func(Process) CommandState

// CheckProcess is this node's ProcessCheck: whether the process group of
// a process recorded on this node, boot and PID namespace still has a
// process. A process recorded anywhere else, or off Linux, is unknown.
func CheckProcess(p Process) CommandState {
	switch proc.GroupState(p.identity()) {
	case proc.Running:
		return CommandRunning
	case proc.Ended:
		return CommandEnded
	}
	return CommandUnknown
}

// identity is the process as proc names it.
func (p Process) identity() proc.Identity {
	return proc.Identity{Host: proc.Host{BootID: p.BootID, PIDNamespace: p.PIDNamespace}, PID: p.PID, StartTicks: p.StartTicks}
}

// ProcessOf is the record of a child proc started.
func ProcessOf(id proc.Identity) Process {
	return Process{PID: id.PID, StartTicks: id.StartTicks, BootID: id.BootID, PIDNamespace: id.PIDNamespace}
}

// MaxLostRunners bounds the runners kept as lost; the oldest go first.
const MaxLostRunners = 16

// RecordProcess records where the COMMAND of the run id runs, in its
// runner, or in the lost runner if the step was taken from it meanwhile.
func (r *Record) RecordProcess(id string, p Process) (changed bool, err error) {
	for _, list := range [][]Runner{r.Runners, r.Lost} {
		for i := range list {
			if list[i].ID == id {
				if list[i].Process == p {
					return false, nil
				}
				list[i].Process = p
				return true, nil
			}
		}
	}
	return false, nil // long gone: nothing to record it on
}

// lose drops runners that did not record their own outcome (the audit
// found their heartbeat stopped, or someone moved their step) and keeps
// them as lost, so that a retry can check that their COMMAND has ended.
func (r *Record) lose(drop func(Runner) bool) {
	for _, rn := range r.Runners {
		if drop(rn) {
			r.Lost = append(r.Lost, rn)
		}
	}
	if len(r.Lost) > MaxLostRunners {
		r.Lost = r.Lost[len(r.Lost)-MaxLostRunners:]
	}
	r.Runners = slices.DeleteFunc(r.Runners, drop)
}

// checkLost refuses a run of the step (host, state) while the COMMAND of an
// earlier run of it, whose runner is lost, is seen running; those seen
// ended are forgotten. Those that cannot be seen from here are kept for a
// retry where they can.
func (r *Record) checkLost(host, state string, check ProcessCheck) error {
	if check == nil {
		return nil
	}
	var ended []string
	for _, l := range r.Lost {
		if l.Host != host || l.State != state {
			continue
		}
		switch check(l.Process) {
		case CommandRunning:
			return &LiveCommandError{Runner: l}
		case CommandEnded:
			ended = append(ended, l.ID)
		}
	}
	r.Lost = slices.DeleteFunc(r.Lost, func(l Runner) bool { return slices.Contains(ended, l.ID) })
	return nil
}

// LiveCommandError refuses a run: the COMMAND of an earlier run of the same
// step still runs on this node, although its runner is gone. It is typed
// so that a caller can say how to end it.
type LiveCommandError struct {
	Runner Runner
}

func (e *LiveCommandError) Error() string {
	what := e.Runner.State
	if e.Runner.Host != "" {
		what = "host " + e.Runner.Host + ": " + what
	}
	return fmt.Sprintf("%s: process group %d still runs on this node: the COMMAND of an earlier run (by %s since %s: %s), which no longer holds the step; "+
		"wait for it to end, or end it (kill -TERM -- -%d), then retry", what, e.Runner.PID, e.Runner.ID, e.Runner.StartedAt, e.Runner.Command, e.Runner.PID)
}
