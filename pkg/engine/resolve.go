package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
)

// WriteIDAnnotation carries, on every ConfigMap the engine writes, a random
// id of the command (one engine call) that made the write. It is how a
// write whose answer was lost is recognised afterwards.
const WriteIDAnnotation = "kubeadmcfg.io/write-id"

// A write whose answer is lost (the connection broke, the server died after
// committing, the deadline passed, a proxy answered 5xx) may or may not have
// landed. Applying the edit again to whatever is read next would apply it
// twice if it had: an append appends twice. Taking a copy with the same
// content for ours would count another writer's identical write as ours. So
// the engine finds out, and this is the argument that it is never wrong:
//
//  1. Every write of one call carries the call's token (WriteIDAnnotation),
//     a random id no other writer uses. A copy of the object that carries the
//     token was made by a write of this call, or from one: the write landed.
//     The token is looked for on every copy the call reads, whatever the
//     answer to the write said: a write can land and still be answered with
//     an error (a 409 for a copy client-go re-sent after the first
//     committed). And client-go is kept from re-sending writes by itself
//     (WrapNoWriteRetries): every copy that is sent again is sent by the
//     engine, which knows that the first may have landed.
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
//     the object can never be at R again. When that first change is a
//     deletion, there is nothing left to write to (not found, exit 5).
//  3. A create carries no precondition: it lands whenever the name is free,
//     and a name can be freed and taken again. The collection's
//     resourceVersion C, read while the object was absent, bounds where ours
//     can be; the history of the name from C up to now decides. Now is the
//     object's resourceVersion, which its own event reaches; or, while it is
//     absent, the collection's resourceVersion read again, reached by an
//     event or bookmark at or past it, or else by a quiet second: a watch
//     from C is sent at once all the history the watch cache holds, which
//     reaches past that read.
//     - A copy in it that carries the token: ours landed, even when it has
//     been overwritten or deleted since.
//     - No event at all, the object still absent: ours has not landed.
//     Sending again is safe while the name stays ours alone: if the first
//     lands, the second fails as a conflict, and the check repeats.
//     - The object present, created by another and never deleted since: the
//     name was taken before ours could land, and has not been free since, so
//     ours did not land.
//     - Anything else (another writer created and deleted the name while ours
//     was on its way): nothing can tell whether ours is still to come, and
//     the outcome is unknown (exit 7).
//     What stays open, and needs a concurrent deleter of the same name: a
//     create held up inside the API server beyond the point where the
//     engine looked, that lands after someone deletes the name again; and
//     an API server so loaded that it takes more than the quiet second to
//     send a history that holds our create and its deletion.
//  4. A delete carries R and the uid as preconditions: it landed if and only
//     if the first change after R is the deletion.
//  5. When the history after R is no longer available (the watch answers
//     410 Gone, as after an API server restart), nothing can tell. The
//     outcome is unknown, and the engine says so (exit 7) instead of
//     guessing either way.
//  6. Whatever else stops the call while a lost write may still land (the
//     watch refused, the re-read refused, the backup before re-sending
//     failed, the leader moved, the deadline passed) ends it with an unknown
//     outcome (exit 7), never with a code that says nothing was written. A
//     watch the server closes before it told anything is a broken
//     connection: it is opened again while the time lasts.

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
// as just read (nil when absent), without our token (1), and listRV the
// collection's resourceVersion read with it while it is absent. It returns
// the object the write made when it landed. It returns nil when it did not
// land: then c.pending is cleared if it never can, or kept when the write
// may be sent again.
func (c *call) resolve(ctx context.Context, current *corev1.ConfigMap, listRV string) (*corev1.ConfigMap, error) {
	p := c.pending
	if p.kind == pendingCreate {
		return c.resolveCreate(ctx, current, listRV)
	}
	if current != nil && current.UID == p.uid && current.ResourceVersion == p.precondition {
		return nil, nil // 2: still at R; the write may be sent again
	}
	var first watch.Event
	if err := c.watchFrom(ctx, p.precondition, false, func(ev watch.Event) bool {
		first = ev
		return true
	}); err != nil {
		return nil, err
	}
	if cm := first.Object.(*corev1.ConfigMap); cm.Annotations[WriteIDAnnotation] == c.token {
		return cm, nil
	}
	c.pending = nil // another change came first: ours can never land
	return nil, nil
}

// errCreateRace: while our create was on its way, another writer created
// and deleted the name.
var errCreateRace = errors.New("another writer created and deleted it meanwhile")

// resolveCreate is 3: it reads the history of the name from the
// collection's resourceVersion before the create up to now.
func (c *call) resolveCreate(ctx context.Context, current *corev1.ConfigMap, listRV string) (*corev1.ConfigMap, error) {
	p := c.pending
	until := listRV
	if current != nil {
		until = current.ResourceVersion
	}
	var history []watch.Event
	if until != p.precondition { // nothing can have happened between equal versions
		reached := func(rv string) bool {
			cmp, err := resourceversion.CompareResourceVersion(rv, until)
			return err == nil && cmp >= 0
		}
		if _, err := resourceversion.CompareResourceVersion(p.precondition, until); err != nil {
			return nil, c.unknown(errors.Join(p.cause, fmt.Errorf("cannot order resource versions: %w", err)))
		}
		// The object's own event reaches its resourceVersion; an absent
		// one's history may end in quiet (historyQuiet).
		err := c.watchFrom(ctx, p.precondition, current == nil, func(ev watch.Event) bool {
			cm := ev.Object.(*corev1.ConfigMap)
			if ev.Type != watch.Bookmark {
				history = append(history, ev)
			}
			return reached(cm.ResourceVersion)
		})
		if err != nil {
			return nil, err
		}
	}
	deletedSince := false
	for _, ev := range history {
		cm := ev.Object.(*corev1.ConfigMap)
		if cm.Annotations[WriteIDAnnotation] == c.token {
			return cm, nil // ours landed, whatever came after
		}
		deletedSince = deletedSince || ev.Type == watch.Deleted
	}
	switch {
	case len(history) == 0 && current == nil:
		return nil, nil // ours has not landed; a second create fails if the first lands
	case current != nil && len(history) > 0 && history[0].Type == watch.Added && !deletedSince:
		c.pending = nil // the name was another's before ours could land, and since
		return nil, nil
	}
	return nil, c.unknown(errors.Join(p.cause, errCreateRace))
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
	var first watch.EventType
	if err := c.watchFrom(ctx, p.precondition, false, func(ev watch.Event) bool {
		first = ev.Type
		return true
	}); err != nil {
		return false, err
	}
	c.pending = nil
	return first == watch.Deleted, nil
}

// errNoHistory: the watch cannot start from the resourceVersion asked for.
var errNoHistory = errors.New("the history after the lost write is no longer available")

// errWatchClosed: the server ended a watch before it told what was asked.
// Like a broken connection (which is what client-go makes of one), it is
// worth another attempt: it wraps io.ErrUnexpectedEOF, which IsRetryable
// knows.
var errWatchClosed = fmt.Errorf("the watch ended before it showed what happened: %w", io.ErrUnexpectedEOF)

// historyQuiet ends the reading of a name's history when no event, and no
// bookmark at or past the point to reach, came for that long. A watch from
// an old resourceVersion is sent at once the history the API server's watch
// cache holds, which reaches past every list read before the watch started;
// its periodic bookmarks cannot be relied on (it sends none while nothing of
// the resource changes after the watch started).
const historyQuiet = time.Second

// watchFrom watches the ConfigMap from resourceVersion rv and hands next
// every change of it (Added, Modified, Deleted), in order, until next
// returns true. With history, it also hands next every bookmark, and stops
// once the watch has been quiet for historyQuiet.
func (c *call) watchFrom(ctx context.Context, rv string, history bool, next func(watch.Event) bool) error {
	e := c.e
	opts := metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", e.target.Name).String(),
		ResourceVersion: rv,
		// Bookmarks may end a history early; nothing else uses them.
		AllowWatchBookmarks: history,
	}
	w, err := e.client.CoreV1().ConfigMaps(e.target.Namespace).Watch(ctx, opts)
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return c.unknown(errors.Join(c.pending.cause, errNoHistory))
		}
		return APIError(err, "watch", e.target.String())
	}
	defer w.Stop()
	quiet := time.NewTimer(historyQuiet)
	defer quiet.Stop()
	var silence <-chan time.Time
	if history {
		silence = quiet.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-silence:
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch %s: %w", e.target, errWatchClosed)
			}
			quiet.Reset(historyQuiet)
			switch ev.Type {
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return c.unknown(errors.Join(c.pending.cause, errNoHistory))
				}
				return APIError(err, "watch", e.target.String())
			case watch.Bookmark:
				if _, ok := ev.Object.(*corev1.ConfigMap); ok && history && next(ev) {
					return nil
				}
			case watch.Added, watch.Modified, watch.Deleted:
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == e.target.Name && next(ev) {
					return nil
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
