package agent

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Event is one thing the agent did or found, for its log. Transitions of
// the record are also Kubernetes Events on it, with the same reason.
type Event struct {
	// Time is on the API server's clock.
	Time    time.Time
	Warning bool
	// Reason is a CamelCase word: NodeStarted, NodeUpdated, TryExpired,
	// RecordDamaged, ...
	Reason  string
	Message string
	// Err is the error of pkg/reconfigure the message tells of, if any, so
	// that the caller can add the flag that fixes it.
	Err error
	// Rollout is the id of the rollout the event concerns, as the rollout
	// record numbers them (0: none). Upgrade is the target version of the
	// upgrade it concerns, Step the upgrade's step (its state, or the
	// node's host status in the kubelets' step) and Phase the phase of
	// that step the node was in ("": none). The message says them in its
	// own words; these let a log that keeps fields (JSON) be searched by
	// them.
	Rollout              int64
	Upgrade, Step, Phase string
}

// logger hands the agent's events to Config.Log, with what the work acting
// now concerns, and records those that are Kubernetes Events too. Works
// log through it (env.log); it is shared by the whole agent.
type logger struct {
	cfg      *Config
	repeated map[string]string     // the message last logged of a failure that repeats, by key
	scoped   atomic.Pointer[scope] // what the events logged now concern
}

// scope is what the events logged now concern besides the agent's node:
// the rollout whose record the rollouts work acts on; the upgrade, step
// and phase the upgrades work runs. A work sets it while it acts, so that
// every event its calls lead to (a turn's progress, a write that failed,
// an Event that could not be recorded) carries it without each call site
// saying it. Works set it on the loop's goroutine; it is read on whichever
// goroutine logs (a job's stop watcher runs on its own).
type scope struct {
	rollout              int64
	upgrade, step, phase string
}

// within has the events logged from now on concern s, until done is called,
// which puts back what they concerned before.
func (l *logger) within(s scope) (done func()) {
	before := l.scoped.Swap(&s)
	return func() { l.scoped.Store(before) }
}

// inPhase has the events logged from now on concern phase of the upgrade
// step in progress, until the upgrades work's within is done.
func (l *logger) inPhase(phase string) {
	s := l.currentScope()
	s.phase = phase
	l.scoped.Store(&s)
}

// currentScope is what the events logged now concern.
func (l *logger) currentScope() scope {
	if s := l.scoped.Load(); s != nil {
		return *s
	}
	return scope{}
}

// info and warn hand an event to the log.
func (l *logger) info(reason, format string, args ...any) {
	l.logErr(nil, false, reason, fmt.Sprintf(format, args...))
}

func (l *logger) warn(reason, format string, args ...any) {
	l.logErr(nil, true, reason, fmt.Sprintf(format, args...))
}

// warnOnce logs a failure that is tried again, once per distinct message
// for the same reason and subject (what failed): an agent whose writes the
// API keeps refusing does not flood its log. recovered forgets it once the
// failure is over, so that the next one is logged.
func (l *logger) warnOnce(reason, about, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if l.repeated[reason+"/"+about] == msg {
		return
	}
	l.repeated[reason+"/"+about] = msg
	l.logErr(nil, true, reason, msg)
}

func (l *logger) recovered(reason, about string) { delete(l.repeated, reason+"/"+about) }

// logErr hands an event caused by err to the log, with what the work
// acting now concerns.
func (l *logger) logErr(err error, warning bool, reason, message string) {
	s := l.currentScope()
	l.log(Event{Warning: warning, Reason: reason, Message: message, Err: err,
		Rollout: s.rollout, Upgrade: s.upgrade, Step: s.step, Phase: s.phase})
}

// log hands e to the log as it is, stamped with the server's time.
func (l *logger) log(e Event) {
	if l.cfg.Log != nil {
		e.Time = l.cfg.Clock.Now()
		l.cfg.Log(e)
	}
}

// event logs what happened and records it as an Event on cm (the record),
// best effort: a failure to record it is a warning.
func (l *logger) event(ctx context.Context, cm *corev1.ConfigMap, warning bool, reason, message string) {
	l.eventErr(ctx, cm, nil, warning, reason, message)
}

// eventErr is event, for an event caused by err.
func (l *logger) eventErr(ctx context.Context, cm *corev1.ConfigMap, err error, warning bool, reason, message string) {
	l.logErr(err, warning, reason, message)
	if cm == nil {
		return
	}
	eventType := corev1.EventTypeNormal
	if warning {
		eventType = corev1.EventTypeWarning
	}
	if err := l.cfg.Record.Event(context.WithoutCancel(ctx), cm, eventType, reason, message); err != nil {
		l.warn("EventFailed", "the %s Event could not be recorded: %s", reason, exitcode.Message(err))
	}
}

// upgradeEvent logs and records an Event on the upgrade record.
func (l *logger) upgradeEvent(ctx context.Context, cm *corev1.ConfigMap, warning bool, reason, message string) {
	l.logErr(nil, warning, reason, message)
	eventType := corev1.EventTypeNormal
	if warning {
		eventType = corev1.EventTypeWarning
	}
	if err := l.cfg.Upgrade.Event(context.WithoutCancel(ctx), cm, eventType, reason, message); err != nil {
		l.warn("EventFailed", "the %s Event could not be recorded: %s", reason, exitcode.Message(err))
	}
}
