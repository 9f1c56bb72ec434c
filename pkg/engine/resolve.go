package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// WriteIDAnnotation carries, on every ConfigMap the engine writes, a random
// id of the command (one engine call) that made the write. It is how a
// write whose answer was lost is recognised afterwards.
const WriteIDAnnotation = "kubeadmcfg.io/write-id"

// A write whose answer is lost (the connection broke, the server died after
// committing, the deadline passed) may or may not have landed. Applying the
// edit again to whatever is read next would apply it twice if it had: an
// append appends twice. Taking a copy with the same content for ours would
// count another writer's identical write as ours. So the engine finds out,
// and this is the argument that it is never wrong:
//
//  1. Every write of one call carries the call's token (WriteIDAnnotation),
//     a random id no other writer uses. A copy of the object that carries the
//     token was made by a write of this call, or from one: the write landed.
//  2. An update carries the resourceVersion R it read as its precondition.
//     The API server accepts it only while the object is at R, so of all the
//     writes ever sent with precondition R at most one succeeds, and if one
//     does, it makes the first change after R.
//     - If the object is still at R, the lost write has not landed. Sending
//     again with the same precondition is safe: at most one of the two can
//     succeed, both carry the token, and the check repeats.
//     - If the object has moved past R, the first change after R is the only
//     one that can be ours, and a watch from R shows it. If it carries the
//     token, the write landed; if not, it did not and never will, because
//     the object can never be at R again.
//  3. A create carries no resourceVersion. The collection's resourceVersion,
//     read while the object was absent, plays R's part: the first event for
//     the name after it is the only creation that can be ours.
//  4. A delete carries R and the uid as preconditions: it landed if and only
//     if the first change after R is the deletion.
//  5. When the history after R is no longer available (the watch answers
//     410 Gone, as after an API server restart), nothing can tell. The
//     outcome is unknown, and the engine says so (exit 7) instead of
//     guessing either way.

type pendingKind int

const (
	pendingUpdate pendingKind = iota
	pendingCreate
	pendingDelete
)

// pending is a write whose answer was lost.
type pending struct {
	kind pendingKind
	uid  types.UID
	// precondition is the resourceVersion the write carried; for a create,
	// the collection's resourceVersion read before it.
	precondition string
	cause        error
}

func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// resolve finds out whether the lost write landed; current is the object
// as just read (nil when absent). It returns the object the write made when
// it landed. It returns nil when it did not land: then c.pending is cleared
// if it never can, or kept when the write may be sent again with the same
// precondition.
func (c *call) resolve(ctx context.Context, current *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	p := c.pending
	if current != nil && current.Annotations[WriteIDAnnotation] == c.token {
		return current, nil // 1: a copy carries our token
	}
	if p.kind == pendingUpdate && current != nil && current.UID == p.uid && current.ResourceVersion == p.precondition {
		return nil, nil // 2: still at R; the write may be sent again
	}
	if p.kind == pendingCreate && current == nil {
		return nil, nil // 3: still absent; a second create fails if the first lands
	}
	first, err := c.firstChangeAfter(ctx, p.precondition)
	if err != nil {
		return nil, err
	}
	if first.Annotations[WriteIDAnnotation] == c.token {
		return first, nil
	}
	c.pending = nil // another change came first: ours can never land
	return nil, nil
}

// resolveDelete finds out whether a lost delete landed (4). done is true
// when it did; false with no error when the delete may be tried again on
// current (read with getErr).
func (c *call) resolveDelete(ctx context.Context, current *corev1.ConfigMap, getErr error) (done bool, err error) {
	p := c.pending
	if getErr == nil && current.UID == p.uid && current.ResourceVersion == p.precondition {
		return false, nil // still at R: the delete may be sent again
	}
	if getErr != nil && !apierrors.IsNotFound(getErr) {
		return false, APIError(getErr, "get", c.e.target.String())
	}
	first, err := c.firstChangeAfterEvent(ctx, p.precondition)
	if err != nil {
		return false, err
	}
	c.pending = nil
	return first == watch.Deleted, nil
}

// errNoHistory: the watch cannot start from the resourceVersion asked for.
var errNoHistory = errors.New("the history after the lost write is no longer available")

// firstChangeAfter returns the object as the first change after
// resourceVersion rv left it.
func (c *call) firstChangeAfter(ctx context.Context, rv string) (*corev1.ConfigMap, error) {
	obj, _, err := c.watchFirst(ctx, rv)
	return obj, err
}

func (c *call) firstChangeAfterEvent(ctx context.Context, rv string) (watch.EventType, error) {
	_, ev, err := c.watchFirst(ctx, rv)
	return ev, err
}

// watchFirst watches the ConfigMap from rv and returns the first event.
func (c *call) watchFirst(ctx context.Context, rv string) (*corev1.ConfigMap, watch.EventType, error) {
	e := c.e
	w, err := e.client.CoreV1().ConfigMaps(e.target.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", e.target.Name).String(),
		ResourceVersion: rv,
	})
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return nil, "", c.unknown(errors.Join(c.pending.cause, errNoHistory))
		}
		return nil, "", APIError(err, "watch", e.target.String())
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, "", APIError(errors.New("the watch ended before the first change"), "watch", e.target.String())
			}
			switch ev.Type {
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return nil, "", c.unknown(errors.Join(c.pending.cause, errNoHistory))
				}
				return nil, "", APIError(err, "watch", e.target.String())
			case watch.Added, watch.Modified, watch.Deleted:
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == e.target.Name {
					return cm, ev.Type, nil
				}
			}
		}
	}
}

// collectionVersion reads the resourceVersion of the namespace's ConfigMaps
// while the target is absent: the point a lost create is judged from (3).
func (c *call) collectionVersion(ctx context.Context) (string, error) {
	e := c.e
	list, err := e.client.CoreV1().ConfigMaps(e.target.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", e.target.Name).String(),
	})
	if err != nil {
		return "", err
	}
	return list.ResourceVersion, nil
}
