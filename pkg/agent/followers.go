package agent

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// followers are the agent's watches, one per followed ConfigMap: each puts
// the newest copy it sees in its mailbox, which the loop takes from.
type followers struct {
	list []follower
	// log receives a failure of a watch, beside whatever work runs, and
	// about none: no scope.
	log func(Event)

	cancel context.CancelFunc
	wg     sync.WaitGroup
	// ended receives each follower's end: nil when told to stop, a panic
	// recovered in one otherwise (Follow ends only with its context),
	// which ends the agent (exit 10).
	ended chan error
}

// follower is one followed ConfigMap: its engine, the mailbox its copies
// go to, and how a message names it.
type follower struct {
	e    *engine.Engine
	box  *mailbox
	what string
}

// start starts every follower, until ctx ends or stop is called.
func (fs *followers) start(ctx context.Context) {
	ctx, fs.cancel = context.WithCancel(ctx)
	fs.ended = make(chan error, len(fs.list))
	for _, f := range fs.list {
		fs.wg.Add(1)
		crash.Go(func() error {
			defer fs.wg.Done()
			defer crash.Recover(func(err error) { fs.ended <- err })
			fs.ended <- f.follow(ctx, fs.log)
			return nil
		})
	}
}

// stop stops the followers, waits for them to end and returns the first
// panic among the ends the loop did not take, if any.
func (fs *followers) stop() error {
	fs.cancel()
	fs.wg.Wait()
	var first error
	for {
		select {
		case err := <-fs.ended:
			if first == nil && err != nil {
				first = err
			}
		default:
			return first
		}
	}
}

// follow follows f's ConfigMap until ctx ends. A watch fails every second
// or so while the API server is away: said once per distinct failure,
// until a read works.
func (f follower) follow(ctx context.Context, log func(Event)) error {
	failed := ""
	return f.e.Follow(ctx, func(cm *corev1.ConfigMap) {
		failed = ""
		f.box.put(cm)
	}, func(err error) {
		if msg := exitcode.Message(err); msg != failed {
			failed = msg
			log(Event{Warning: true, Reason: "WatchFailed", Message: fmt.Sprintf("following %s: %s; reading it again", f.what, msg)})
		}
	})
}

// older reports whether cm is an older copy than seen: a watch event
// taken after a fresh read may be. resourceVersions are compared as the
// decimal numbers the API server hands out; anything else counts as new.
func older(cm, seen *corev1.ConfigMap) bool {
	if cm == nil || seen == nil || cm.UID != seen.UID {
		return false
	}
	a, errA := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	b, errB := strconv.ParseUint(seen.ResourceVersion, 10, 64)
	return errA == nil && errB == nil && a < b
}

// mailbox holds the latest copy of a ConfigMap a watch delivered: the
// agent acts on the newest copy, never on a queue of stale ones.
type mailbox struct {
	mu     *sync.Mutex
	cm     *corev1.ConfigMap
	filled bool
	ready  chan struct{}
}

func newMailbox() mailbox { return mailbox{mu: &sync.Mutex{}, ready: make(chan struct{}, 1)} }

func (m *mailbox) put(cm *corev1.ConfigMap) {
	m.mu.Lock()
	m.cm, m.filled = cm, true
	m.mu.Unlock()
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

func (m *mailbox) take() (*corev1.ConfigMap, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cm, ok := m.cm, m.filled
	m.filled = false
	return cm, ok
}
