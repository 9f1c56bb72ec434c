package engine

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// Following one ConfigMap for as long as a process runs: the node agent
// follows the rollout record and kubeadm-config this way, with one watch
// each and no polling.

// followBackoff bounds the pause between a watch that ended and the next
// read, so that an API server that is down is not hammered.
const (
	followMinBackoff = 500 * time.Millisecond
	followMaxBackoff = 30 * time.Second
)

// Follow calls handle with the ConfigMap as it is now (nil when it does not
// exist), then with every change of it, until ctx ends (it then returns
// nil). Between reads it watches (Watch, a RetryWatcher), so it costs one
// watch while nothing changes. When the watch ends (its resourceVersion
// expired, the API server went away), the ConfigMap is read again, after a
// growing pause, and handle sees the copy read. onError hears of every read
// or watch that failed; Follow itself goes on.
//
// Each read lists the ConfigMap by name (the collection's resourceVersion
// starts the watch): that takes list on the name, as watch does.
func (e *Engine) Follow(ctx context.Context, handle func(cm *corev1.ConfigMap), onError func(error)) error {
	pause := followMinBackoff
	for {
		cm, rv, err := e.Current(ctx)
		if err == nil {
			handle(cm)
			start := time.Now()
			err = e.Watch(ctx, rv, func(t watch.EventType, cm *corev1.ConfigMap) (bool, error) {
				if t == watch.Deleted {
					cm = nil
				}
				handle(cm)
				return false, nil
			})
			if time.Since(start) > followMaxBackoff {
				pause = followMinBackoff // the watch ran well: start over
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("the watch ended")
		}
		if onError != nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, followMaxBackoff)
	}
}

// Current reads the ConfigMap (nil when it does not exist) and the
// resourceVersion a watch of it starts from, bounded by the timeout: a
// follower reads it again this way without waiting for a change. It lists
// the ConfigMap by name: the list's resourceVersion is the collection's,
// newer than the object's own, which an API server that restarted since
// the object last changed may no longer serve a watch from.
func (e *Engine) Current(ctx context.Context) (*corev1.ConfigMap, string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	list, err := e.client.CoreV1().ConfigMaps(e.target.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", e.target.Name).String()})
	if err != nil {
		return nil, "", APIError(err, "list", e.target.String())
	}
	if len(list.Items) > 0 {
		return &list.Items[0], list.ResourceVersion, nil
	}
	return nil, list.ResourceVersion, nil
}
