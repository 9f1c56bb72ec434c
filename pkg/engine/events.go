package engine

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/managed"
)

// Event records a transition of cm as a Kubernetes Event on it, so that
// `kubectl describe configmap` shows the history of the objects the plugin
// keeps state in. eventType is corev1.EventTypeNormal or
// corev1.EventTypeWarning; reason is a CamelCase word ("NodeStarted"). An
// Event is a record for people, not state: a caller goes on when it cannot
// be written, and reports the error as a warning.
func (e *Engine) Event(ctx context.Context, cm *corev1.ConfigMap, eventType, reason, message string) error {
	ctx, cancel := context.WithTimeout(ctx, min(e.opts.Timeout, 5*time.Second))
	defer cancel()
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: cm.Name + ".",
			Namespace:    cm.Namespace,
			Labels:       map[string]string{managed.Label: managed.By},
		},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "v1", Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name,
			UID: cm.UID, ResourceVersion: cm.ResourceVersion,
		},
		Type: eventType, Reason: reason, Message: message,
		Source:         corev1.EventSource{Component: managed.By, Host: Hostname()},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if err := e.createEvent(ctx, ev); err != nil {
		return APIError(err, "create", fmt.Sprintf("event on configmap %s/%s", cm.Namespace, cm.Name))
	}
	return nil
}

// NodeReportingController names the agents as the reporter of the Events
// they record on their Nodes.
const NodeReportingController = "kubeadmcfg.io/agent"

// NodeEvent records an Event on node (of UID uid), as Event does on a
// ConfigMap: `kubectl describe node` shows it. It is created in the
// engine's namespace (kube-system, where the agents may create Events),
// not in default as the kubelet's: an Event on a cluster-wide object may
// live in kube-system when it carries an eventTime and says who reports it
// (reportingController, reportingInstance: instance) and what it did
// (action).
func (e *Engine) NodeEvent(ctx context.Context, node string, uid types.UID, instance, eventType, reason, action, message string) error {
	ctx, cancel := context.WithTimeout(ctx, min(e.opts.Timeout, 5*time.Second))
	defer cancel()
	now := time.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: node + ".",
			Namespace:    e.target.Namespace,
			Labels:       map[string]string{managed.Label: managed.By},
		},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node, UID: uid},
		Type:           eventType, Reason: reason, Message: message, Action: action,
		Source:              corev1.EventSource{Component: managed.By, Host: node},
		FirstTimestamp:      metav1.NewTime(now),
		LastTimestamp:       metav1.NewTime(now),
		EventTime:           metav1.NewMicroTime(now),
		Count:               1,
		ReportingController: NodeReportingController,
		ReportingInstance:   boundInstance(instance),
	}
	if err := e.createEvent(ctx, ev); err != nil {
		return APIError(err, "create", "event on node "+node)
	}
	return nil
}

// createEvent creates ev, again should an API server that is shutting
// down refuse it (refusedRetry). The name is chosen here, once, not by the
// server (generateName): a 503 can also come from a proxy after the API
// server created the Event, and the attempt after it then finds the Event
// by its name (AlreadyExists) instead of recording it twice.
func (e *Engine) createEvent(ctx context.Context, ev *corev1.Event) error {
	if ev.Name == "" {
		ev.Name, ev.GenerateName = ev.GenerateName+newToken(), ""
	}
	attempt := 0
	return refusedRetry(ctx, func() error {
		attempt++
		_, err := e.client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{FieldManager: managed.By})
		if attempt > 1 && apierrors.IsAlreadyExists(err) {
			return nil // an earlier attempt created it
		}
		return err
	})
}

// refusedRetry calls call, again after an answer that an API server
// shutting down gives (503, or 429 with Retry-After), as one behind a load
// balancer may while it restarts. A 503 may also come from a proxy after
// the request ran: call must be safe to repeat (a patch of one condition,
// an Event created under its own name). A few attempts, within ctx.
func refusedRetry(ctx context.Context, call func() error) error {
	const attempts = 4
	var err error
	for i := range attempts {
		if err = call(); err == nil {
			return nil
		}
		if !apierrors.IsServiceUnavailable(err) && !apierrors.IsTooManyRequests(err) || i == attempts-1 {
			break
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(i+1) * 250 * time.Millisecond):
		}
	}
	return err
}

// boundInstance fits a reporting instance in the 128 characters an Event
// allows.
func boundInstance(s string) string {
	const limit = 128
	if len(s) > limit {
		return s[:limit]
	}
	return s
}
