package agent

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// The Events an agent records on its Node, one per transition of its
// condition between out of date and in date.
const (
	EventOutOfDate = "KubeadmConfigOutOfDate"
	EventInSync    = "KubeadmConfigInSync"
)

// conditions is the work of keeping the condition KubeadmConfigOutOfDate
// on the agent's own Node (nodestate.OutOfDate judges it from the node's
// state, found by the state work just before, and its last turn), and an
// Event on the Node when it goes out of date and when it is back. The
// Node is written only when the condition's status, reason or message
// change: never on a resync that finds nothing new.
type conditions struct {
	read    bool                   // the Node's condition was read (at start, and again after a failed write)
	uid     types.UID              // the Node's, for its Events
	shown   *corev1.NodeCondition  // the condition as the Node shows it, as last read or written
	verdict corev1.ConditionStatus // True or False as the last Event (or the Node at start) told; "" when none did
	current nodestate.Condition    // what the agent judges now, for the metrics
	refused int                    // writes refused in a row: retried with a backoff
}

// do judges the condition and writes it when it changed.
func (w *conditions) do(ctx context.Context, e *env) time.Duration {
	if !e.configSeen {
		// Nothing to judge before kubeadm-config was first read: the state
		// would say it was not found.
		return 0
	}
	w.current = nodestate.OutOfDate(e.cfg.Name, e.nodeState(), lastRollout(e.view.Rollout), upgradeInProgress(e.view.Upgrade))
	if !e.holds() {
		return w.backoff(e)
	}
	if !w.readNode(ctx, e) {
		return w.backoff(e)
	}
	if !w.write(ctx, e, w.current) {
		return w.backoff(e)
	}
	w.refused = 0
	return 0
}

// readNode reads the condition the Node shows, once: a restarted agent
// finds what its predecessor wrote, and neither writes it again nor
// repeats its Event.
func (w *conditions) readNode(ctx context.Context, e *env) bool {
	if w.read {
		return true
	}
	c, uid, err := e.cfg.Record.NodeCondition(ctx, e.cfg.Name, nodestate.ConditionType)
	if err != nil {
		e.log.warnOnce("ConditionFailed", "read", "cannot read the condition %s of node %s: %s; trying again",
			nodestate.ConditionType, e.cfg.Name, exitcode.Message(err))
		return false
	}
	e.log.recovered("ConditionFailed", "read")
	w.read, w.uid, w.shown = true, uid, c
	if c != nil && (c.Status == corev1.ConditionTrue || c.Status == corev1.ConditionFalse) {
		w.verdict = c.Status
	}
	return true
}

// write puts c on the Node unless it shows it already, keeping the time of
// the last transition unless the status changes, and records the Event of
// a transition once the Node shows it.
func (w *conditions) write(ctx context.Context, e *env, c nodestate.Condition) bool {
	if s := w.shown; s != nil && s.Status == c.Status && s.Reason == c.Reason && s.Message == c.Message {
		return true
	}
	now := metav1.NewTime(e.cfg.Clock.Now().Truncate(time.Second))
	next := corev1.NodeCondition{Type: nodestate.ConditionType, Status: c.Status, Reason: c.Reason, Message: c.Message,
		LastHeartbeatTime: now, LastTransitionTime: now}
	if s := w.shown; s != nil && s.Status == c.Status {
		next.LastTransitionTime = s.LastTransitionTime
	}
	uid, err := e.cfg.Record.SetNodeCondition(ctx, e.cfg.Name, next)
	if err != nil {
		e.log.warnOnce("ConditionFailed", "write", "cannot set the condition %s of node %s: %s; trying again",
			nodestate.ConditionType, e.cfg.Name, exitcode.Message(err))
		return false
	}
	e.log.recovered("ConditionFailed", "write")
	w.uid, w.shown = uid, &next
	e.log.info("NodeCondition", "node %s: %s=%s (%s): %s", e.cfg.Name, nodestate.ConditionType, c.Status, c.Reason, c.Message)
	w.transition(ctx, e, c)
	return true
}

// transition records an Event on the Node when c changes the verdict:
// out of date (from in date, or from nothing known), or back in date from
// out of date. Unknown is no verdict: an agent that could not tell for a
// while says nothing again when it finds what it found before.
func (w *conditions) transition(ctx context.Context, e *env, c nodestate.Condition) {
	switch {
	case c.Status == corev1.ConditionTrue && w.verdict != corev1.ConditionTrue:
		w.nodeEvent(ctx, e, corev1.EventTypeWarning, EventOutOfDate, c.Message)
	case c.Status == corev1.ConditionFalse && w.verdict == corev1.ConditionTrue:
		w.nodeEvent(ctx, e, corev1.EventTypeNormal, EventInSync, c.Message)
	}
	if c.Status != corev1.ConditionUnknown {
		w.verdict = c.Status
	}
}

// nodeEvent records an Event on the Node, best effort, as the record's.
func (w *conditions) nodeEvent(ctx context.Context, e *env, eventType, reason, message string) {
	if err := e.cfg.Record.NodeEvent(context.WithoutCancel(ctx), e.cfg.Name, w.uid, e.cfg.Identity, eventType, reason, "Check", message); err != nil {
		e.log.warn("EventFailed", "the %s Event on node %s could not be recorded: %s", reason, e.cfg.Name, exitcode.Message(err))
	}
}

// stopped leaves the condition Unknown when the agent stops cleanly (with
// its own bound: the agent is on its way out). A killed agent cannot: the
// agent-down alert covers it (docs/agent.md).
func (w *conditions) stopped(e *env) {
	if e.lease == nil || e.lease.Held() != nil {
		return // another agent of the node may be writing it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if w.readNode(ctx, e) {
		w.write(ctx, e, nodestate.Stopped(e.cfg.Name, e.cfg.Identity))
	}
}

// backoff is the wait before trying again after a failed read or write:
// one second, doubling, up to Resync.
func (w *conditions) backoff(e *env) time.Duration {
	w.refused++
	return min(time.Second<<min(w.refused-1, 10), e.cfg.Resync)
}

// lastRollout is the rollout record's current or last rollout, nil when
// none was recorded or the record cannot be read (a damaged record tells
// nothing about turns).
func lastRollout(cm *corev1.ConfigMap) *rollout.Status {
	if cm == nil {
		return nil
	}
	r, err := rollout.FromConfigMap(cm)
	if err != nil {
		return nil
	}
	return r.Status
}

// upgradeInProgress is the upgrade the upgrade record cm says is in
// progress (reconfigure.UpgradeInProgress: from its start until complete
// or aborted), nil when none is, or the record cannot be read (the rollout
// work reports a damaged record).
func upgradeInProgress(cm *corev1.ConfigMap) *nodestate.Upgrade {
	if cm == nil {
		return nil
	}
	rec, ok, err := upgrade.FromConfigMap(cm)
	if err != nil || !ok || !reconfigure.UpgradeInProgress(rec) {
		return nil
	}
	return &nodestate.Upgrade{From: rec.FromVersion, To: rec.ToVersion, State: string(rec.State)}
}
