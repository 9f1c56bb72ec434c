package engine

import (
	"context"
	"errors"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Following one ConfigMap's changes for as long as the caller wants, across
// watches the server ends and history it has compacted.

// Watch follows the ConfigMap from resourceVersion fromRV and calls handle
// with every change (Added, Modified, Deleted) until handle returns stop or
// an error, or ctx ends (which returns nil). A watch the server ends is
// resumed where it left off.
//
// When the history from there is gone (410 Gone: etcd compacted it, or the
// API server's watch cache no longer holds it), the ConfigMap is listed
// again by name and handle gets the copy read as one Modified event (Added
// after a deletion; Deleted, with the last copy seen, when it is gone),
// unless it has not changed; the watch then goes on from that list. The
// changes in between are folded into that one event, as an informer folds
// them. The list takes list on the ConfigMap's name, as the watch takes
// watch.
func (e *Engine) Watch(ctx context.Context, fromRV string, handle func(watch.EventType, *corev1.ConfigMap) (stop bool, err error)) error {
	f := &follower{e: e, rv: fromRV, exists: true, handle: handle}
	for {
		expired, err := f.watch(ctx)
		if err != nil || !expired || ctx.Err() != nil {
			return err
		}
		if stop, err := f.relist(ctx); stop || err != nil {
			return err
		}
	}
}

// follower is the state of one Watch: the last copy it handed over.
type follower struct {
	e      *Engine
	rv     string            // the resourceVersion the next watch starts from
	last   *corev1.ConfigMap // the last copy handed over; nil before the first
	exists bool              // false after a deletion was handed over
	handle func(watch.EventType, *corev1.ConfigMap) (bool, error)
}

// deliver hands one change to the handler and remembers it.
func (f *follower) deliver(t watch.EventType, cm *corev1.ConfigMap) (bool, error) {
	f.last, f.exists = cm, t != watch.Deleted
	return f.handle(t, cm)
}

// watch follows the ConfigMap with a RetryWatcher until the handler stops
// (nil), an error, or the history from f.rv is gone (expired).
func (f *follower) watch(ctx context.Context) (expired bool, err error) {
	e := f.e
	cms := e.client.CoreV1().ConfigMaps(e.target.Namespace)
	// The watch requests run in the RetryWatcher's goroutine: a panic there
	// (in this function or the client's transport) stops the watch and is
	// this call's error. The RetryWatcher gets a watch that never delivers,
	// and stops on the ended context: an error would be logged on stderr.
	wctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	lw := &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (w watch.Interface, err error) {
			defer crash.Recover(func(p error) {
				stop(p)
				w, err = watch.NewProxyWatcher(make(chan watch.Event)), nil
			})
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", e.target.Name).String()
			w, err = cms.Watch(ctx, opts)
			if isGone(err) {
				// The RetryWatcher asks again, from the same point, for
				// ever, when a 410 comes as the answer to the request; as
				// an event, it ends the watch, and history is read anew.
				status := apierrors.NewResourceExpired(err.Error()).ErrStatus
				ch := make(chan watch.Event, 1)
				ch <- watch.Event{Type: watch.Error, Object: &status}
				return watch.NewProxyWatcher(ch), nil
			}
			return w, err
		},
	}
	w, err := watchtools.NewRetryWatcherWithContext(wctx, f.rv, lw)
	if err != nil {
		return false, APIError(err, "watch", e.target.String())
	}
	defer w.Stop()
	for {
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return false, nil
			}
			return false, context.Cause(wctx)
		case ev, ok := <-w.ResultChan():
			if !ok {
				if wctx.Err() != nil {
					continue // the case above says why
				}
				return false, exitcode.Failuref("the watch on %s ended", e.target)
			}
			if ev.Type == watch.Error {
				if isGone(apierrors.FromObject(ev.Object)) {
					return true, nil
				}
				return false, exitcode.Failuref("watch %s: %v", e.target, ev.Object)
			}
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			f.rv = cm.ResourceVersion
			if stop, err := f.deliver(ev.Type, cm); stop || err != nil {
				return false, err
			}
		}
	}
}

// relist reads the ConfigMap again after its history was compacted, hands
// the handler what changed, and sets where the next watch starts.
func (f *follower) relist(ctx context.Context) (stop bool, err error) {
	e := f.e
	var list *corev1.ConfigMapList
	delay := backoff
	for {
		list, err = e.client.CoreV1().ConfigMaps(e.target.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", e.target.Name).String()})
		if err == nil || !IsRetryable(err) {
			break
		}
		select {
		case <-ctx.Done():
			return true, nil
		case <-time.After(delay.Step()):
		}
	}
	if err != nil {
		return false, APIError(err, "list", e.target.String())
	}
	seenRV := f.rv
	f.rv = list.ResourceVersion
	switch {
	case len(list.Items) == 0 && f.exists:
		last := f.last
		if last == nil {
			last = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.target.Namespace, Name: e.target.Name}}
		}
		return f.deliver(watch.Deleted, last)
	case len(list.Items) == 0:
		return false, nil
	case !f.exists:
		return f.deliver(watch.Added, &list.Items[0])
	case list.Items[0].ResourceVersion != seenRV:
		return f.deliver(watch.Modified, &list.Items[0])
	}
	return false, nil
}

// isGone reports a 410: the history asked for has been compacted.
func isGone(err error) bool {
	var status apierrors.APIStatus
	return err != nil && (apierrors.IsGone(err) || apierrors.IsResourceExpired(err) ||
		errors.As(err, &status) && status.Status().Code == http.StatusGone)
}
