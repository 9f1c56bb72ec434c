package agent

import (
	"context"
	"fmt"
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
}

// info and warn hand an event to the log.
func (a *Agent) info(reason, format string, args ...any) {
	a.logErr(nil, false, reason, fmt.Sprintf(format, args...))
}

func (a *Agent) warn(reason, format string, args ...any) {
	a.logErr(nil, true, reason, fmt.Sprintf(format, args...))
}

// warnOnce logs a failure that is tried again, once per distinct message
// for the same reason and subject (what failed): an agent whose writes the
// API keeps refusing does not flood its log. recovered forgets it once the
// failure is over, so that the next one is logged.
func (a *Agent) warnOnce(reason, about, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if a.repeated[reason+"/"+about] == msg {
		return
	}
	a.repeated[reason+"/"+about] = msg
	a.logErr(nil, true, reason, msg)
}

func (a *Agent) recovered(reason, about string) { delete(a.repeated, reason+"/"+about) }

// logErr hands an event caused by err to the log.
func (a *Agent) logErr(err error, warning bool, reason, message string) {
	if a.cfg.Log != nil {
		a.cfg.Log(Event{Time: a.cfg.Clock.Now(), Warning: warning, Reason: reason, Message: message, Err: err})
	}
}

// event logs what happened and records it as an Event on cm (the record),
// best effort: a failure to record it is a warning.
func (a *Agent) event(ctx context.Context, cm *corev1.ConfigMap, warning bool, reason, message string) {
	a.eventErr(ctx, cm, nil, warning, reason, message)
}

// eventErr is event, for an event caused by err.
func (a *Agent) eventErr(ctx context.Context, cm *corev1.ConfigMap, err error, warning bool, reason, message string) {
	a.logErr(err, warning, reason, message)
	if cm == nil {
		return
	}
	eventType := corev1.EventTypeNormal
	if warning {
		eventType = corev1.EventTypeWarning
	}
	if err := a.cfg.Record.Event(context.WithoutCancel(ctx), cm, eventType, reason, message); err != nil {
		a.warn("EventFailed", "the %s Event could not be recorded: %s", reason, exitcode.Message(err))
	}
}
