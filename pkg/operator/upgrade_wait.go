package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// How an upgrade the agents carry out ended, as a wait for it judges each
// copy of the record.

// ErrStoppedWaitingForUpgrade is a wait that ended before its upgrade did:
// the upgrade goes on in the cluster, carried out by the agents, and its
// outcome is not known (exit 7).
var ErrStoppedWaitingForUpgrade = errors.New("stopped waiting before the upgrade ended")

// UpgradeFailedError is an upgrade stopped on a node's failure: exit 8
// when the node is back on its previous version (its outcome RolledBack),
// 9 when it is not (RollbackFailed; Failed, past the point where
// kubeadm-config says the new version, from where recovery is forward; or
// a step failed by someone else than its agent, upgrade-fail or the
// audit).
type UpgradeFailedError struct {
	Version string
	// State is the record's state: the step's -failed state, or the
	// kubelets' step with the node's host status failed.
	State upgrade.State
	// Node is the node that failed ("" when the failed step is no node's
	// work), Step its step, Phase the phase it failed in.
	Node, Step, Phase string
	// Outcome is the node's, as its agent recorded it ("" or Running when
	// someone else failed the step).
	Outcome string
	// Why is the node's message, or the record's reason.
	Why string
	// Untouched are the nodes after it that the upgrade has not begun.
	Untouched []string
	// Abort is the plan's abort state, the way to end the upgrade here.
	Abort upgrade.State
}

// Code is the exit code: 8 when the node is back on its previous version.
func (e *UpgradeFailedError) Code() exitcode.Code {
	if e.Outcome == upgrade.NodeRolledBack {
		return exitcode.RolledBack
	}
	return exitcode.RollbackFailed
}

func (e *UpgradeFailedError) Error() string {
	where := "in " + string(e.State)
	if e.Node != "" {
		where = "at node " + e.Node + " (" + e.Step
		if e.Phase != "" {
			where += ", phase " + e.Phase
		}
		where += ")"
	}
	var how string
	switch e.Outcome {
	case upgrade.NodeRolledBack:
		how = "the node is back on its previous version"
	case upgrade.NodeRollbackFailed:
		how = "and it was not put back on its previous version, or not wholly (recovery is forward)"
	case upgrade.NodeFailed:
		how = "past the point where kubeadm-config says " + e.Version + ", so it was not put back (recovery is forward)"
	default:
		how = "failed by someone else than its agent, and not put back"
	}
	msg := fmt.Sprintf("the upgrade to %s failed %s, %s", e.Version, where, how)
	if e.Why != "" {
		msg += ": " + e.Why
	}
	if e.Outcome == upgrade.NodeRolledBack {
		msg += "; the nodes after it are untouched: " + joinNames(e.Untouched)
	}
	return msg
}

// UpgradeWaitOptions tune Wait.
type UpgradeWaitOptions struct {
	// Progress, when set, is called with the record as first read and on
	// every change after.
	Progress func(rec *upgrade.Record)
}

// Wait follows the record with a watch until the upgrade the agents carry
// out, follow (the record's Agents when it started), ends, and returns the
// record as last seen with an error whose exit code says how it ended:
//   - nil: it is complete, every control-plane node runs its version
//     (the workers are not the agents' work);
//   - 8 or 9, an *UpgradeFailedError: a node failed, back on its previous
//     version (8) or not (9); a failed step an upgrade-resume asked to run
//     again is waited for;
//   - 4: it was aborted, or taken out of the agents' hands (a record of
//     another upgrade, or one no longer the agents');
//   - 7 (ErrStoppedWaitingForUpgrade): the outcome is unknown: ctx ended
//     first, the watch broke, or the record was deleted;
//   - 3: the record is damaged.
func (o *Upgrades) Wait(ctx context.Context, follow *upgrade.Agents, opts UpgradeWaitOptions) (*upgrade.Record, error) {
	rec, cm, err := o.Read(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, o.stoppedWaiting(follow, nil, err)
		}
		return nil, err
	}
	if rec == nil {
		return nil, o.stoppedWaiting(follow, nil, errors.New("no upgrade is recorded"))
	}
	if opts.Progress != nil {
		opts.Progress(rec)
	}
	if done, err := UpgradeEnded(rec, follow); done {
		return rec, err
	}
	last, finished := rec, false
	var judged error
	werr := o.Record.Watch(ctx, cm.ResourceVersion, func(ev watch.EventType, cm *corev1.ConfigMap) (bool, error) {
		if ev == watch.Deleted {
			judged = o.stoppedWaiting(follow, last, errors.New("the upgrade record was deleted"))
			return true, judged
		}
		rec, ok, err := upgrade.FromConfigMap(cm)
		if err != nil {
			judged = err
			return true, err
		}
		if !ok {
			judged = o.stoppedWaiting(follow, last, errors.New("the upgrade record holds no upgrade"))
			return true, judged
		}
		last = rec
		if opts.Progress != nil {
			opts.Progress(rec)
		}
		finished, judged = UpgradeEnded(rec, follow)
		return finished, judged
	})
	switch {
	case judged != nil: // the handler's verdict, which Watch returned
		return last, judged
	case werr != nil:
		return last, o.stoppedWaiting(follow, last, werr)
	case !finished:
		return last, o.stoppedWaiting(follow, last, ctx.Err())
	}
	return last, nil
}

// stoppedWaiting is a wait that ended before the upgrade did, for cause.
func (o *Upgrades) stoppedWaiting(follow *upgrade.Agents, last *upgrade.Record, cause error) error {
	where := ""
	if last != nil && SameUpgrade(last.Agents, follow) {
		where = ", " + UpgradeSummary(last)
	}
	why := ""
	if cause != nil {
		why = ": " + cause.Error()
	}
	return exitcode.New(exitcode.OutcomeUnknown, fmt.Errorf("%w (upgrade to %s%s)%s; it goes on in the cluster without this command",
		ErrStoppedWaitingForUpgrade, follow.Version, where, why))
}

// SameUpgrade reports whether a and b are the agents' part of the same
// upgrade: started by the same operator at the same time, to the same
// version.
func SameUpgrade(a, b *upgrade.Agents) bool {
	return a != nil && b != nil && a.Version == b.Version && a.StartedAt == b.StartedAt && a.By == b.By
}

// UpgradeEnded says whether the upgrade follow has ended in rec, and how,
// as the error Wait returns (see Wait). A failed step whose node has not
// yet run the resume asked of it goes on.
func UpgradeEnded(rec *upgrade.Record, follow *upgrade.Agents) (done bool, err error) {
	a := rec.Agents
	switch {
	case a == nil:
		return true, exitcode.Conflictf("the upgrade to %s is no longer carried out by the agents: the record holds an upgrade from %s to %s in %s, driven by hand",
			follow.Version, rec.FromVersion, rec.ToVersion, rec.State)
	case !SameUpgrade(a, follow):
		return true, exitcode.Conflictf("the upgrade to %s started by %s at %s is no longer the recorded one: an upgrade to %s started by %s at %s is",
			follow.Version, follow.By, follow.StartedAt, a.Version, a.By, a.StartedAt)
	}
	p := rec.PlanOf()
	if p.Abort != nil && (rec.State == p.Abort.Name || rec.State == p.Abort.Failed || rec.State == p.Abort.Reaches) {
		return true, exitcode.Conflictf("the upgrade to %s was aborted: it is in %s (%s)", a.Version, rec.State, orDash(rec.Reason))
	}
	if step, steps := p.Position(rec.State); step > steps {
		return true, nil // complete, or past it
	}
	f, failed := failureOf(rec)
	if !failed || f.retrying {
		return false, nil
	}
	why := f.progress.Message
	if why == "" {
		why = rec.Reason
	}
	e := &UpgradeFailedError{Version: a.Version, State: rec.State, Node: f.node, Step: f.step, Phase: f.progress.Phase,
		Outcome: f.progress.Outcome, Why: why}
	if p.Abort != nil {
		e.Abort = p.Abort.Name
	}
	if f.node != "" {
		nodes := p.WorkNodes()
		for _, n := range nodes[slices.Index(nodes, f.node)+1:] {
			if a.Progress(n).Outcome == "" {
				e.Untouched = append(e.Untouched, n)
			}
		}
	}
	return true, exitcode.New(e.Code(), e)
}

// failure is where an upgrade the agents carry out stands on a failure.
type failure struct {
	// node failed its step (node is "" for a failed step that is no
	// node's work).
	node, step string
	progress   upgrade.NodeProgress
	// retrying: an upgrade-resume asked the node to run its step again,
	// and it has not yet begun.
	retrying bool
}

// FailedStep names the failure an upgrade the agents carry out stands on:
// the node that failed ("" when the failed step is no node's work) and its
// step, which upgrade-resume has its agent run again; ok is false when
// nothing failed.
func FailedStep(rec *upgrade.Record) (node, step string, ok bool) {
	f, ok := failureOf(rec)
	return f.node, f.step, ok
}

// failureOf finds the failure an upgrade stands on: its state a step's
// -failed state, or a node's host status failed. ok is false when nothing
// failed.
func failureOf(rec *upgrade.Record) (f failure, ok bool) {
	p, a := rec.PlanOf(), rec.Agents
	if a == nil {
		return failure{}, false
	}
	failedHost := rec.FailedHost()
	switch st := p.StepOf(rec.State); {
	case p.Failed(rec.State) && st.Work == upgrade.WorkControlPlane:
		f = failure{node: st.Node, step: string(st.Name)}
	case p.Failed(rec.State) && failedHost != "":
		f = failure{node: failedHost, step: hostStepOf(p, rec.Hosts[failedHost].Status)}
	case p.Failed(rec.State) && st.Work == upgrade.WorkKubelets:
		// The kubelets' step failed with no host failed: its retry is
		// the first node's to begin.
		f = failure{node: firstName(p.WorkNodes()), step: string(st.Name)}
	case p.Failed(rec.State):
		f = failure{step: string(st.Name)}
	case failedHost != "":
		f = failure{node: failedHost, step: hostStepOf(p, rec.Hosts[failedHost].Status)}
	default:
		return failure{}, false
	}
	retryBy := f.node
	if retryBy == "" {
		retryBy = firstName(p.WorkNodes())
	}
	f.progress = a.Progress(f.node)
	f.retrying = a.Resume > a.Progress(retryBy).Attempt
	return f, true
}

// hostStepOf names the host step of a host status.
func hostStepOf(p *upgrade.Plan, s upgrade.HostStatus) string {
	if h := p.HostStepOf(s); h != nil {
		return string(h.Name)
	}
	return string(s)
}

// UpgradeSummary says where an upgrade the agents carry out stands in one
// line: its state, how many nodes have their control plane done (their
// control-plane step) and how many their kubelet, and the node in progress
// with its phase. A node's two pieces of work are counted apart: a node
// whose control plane runs the new version waits for the kubelets' step,
// and says so, rather than counting as not done at all.
func UpgradeSummary(rec *upgrade.Record) string {
	a := rec.Agents
	if a == nil {
		return string(rec.State)
	}
	p := rec.PlanOf()
	nodes := p.WorkNodes()
	at, _ := p.Position(rec.State) // 0 in the abort branch
	planes, planesDone := 0, 0
	for _, n := range nodes {
		st := controlPlaneStep(p, n)
		if st == nil {
			continue
		}
		planes++
		if own, _ := p.Position(st.Name); rec.State == st.Reaches || at > own {
			planesDone++
		}
	}
	out := fmt.Sprintf("%s, %d of %d control planes", rec.State, planesDone, planes)
	if ks := p.KubeletStep(); ks != nil {
		kubelets := 0
		for _, n := range nodes {
			if rec.Hosts[n].Status == ks.Reaches {
				kubelets++
			}
		}
		out += fmt.Sprintf(" and %d of %d kubelets", kubelets, len(nodes))
	}
	out += " done"
	for _, n := range a.Nodes {
		if n.Outcome == upgrade.NodeRunning {
			out += fmt.Sprintf(", node %s in %s", n.Node, n.Step)
			if n.Phase != "" {
				out += " phase " + n.Phase
			}
		}
	}
	if a.Resume > 0 {
		out += fmt.Sprintf(", resume %d", a.Resume)
	}
	return out
}

// controlPlaneStep is node's control-plane step in p, nil when it has none.
func controlPlaneStep(p *upgrade.Plan, node string) *upgrade.Step {
	for i := range p.Steps {
		if st := &p.Steps[i]; st.Work == upgrade.WorkControlPlane && st.Node == node {
			return st
		}
	}
	return nil
}

func firstName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
