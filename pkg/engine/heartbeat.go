package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/managed"
)

// Heartbeats: a step run by upgrade-run renews a coordination.k8s.io Lease
// while its command runs, so that an auditor can tell a runner that died
// (SIGKILL, a reboot) from one that is slow. This is apart from the write
// queue (pkg/queue): a heartbeat lives as long as a command, not a write.

// HeartbeatSlots is how many steps of one state ConfigMap can run at once
// with a heartbeat. Heartbeat Leases have fixed names, so that a Role can
// grant get, update and delete on those names alone.
const HeartbeatSlots = 64

// HeartbeatLabel names the ConfigMap a heartbeat Lease belongs to.
const HeartbeatLabel = "kubeadmcfg.io/heartbeat"

// HeartbeatName is the name of one heartbeat Lease of a ConfigMap.
func HeartbeatName(configMap string, slot int) string {
	return fmt.Sprintf("kubeadmcfg-run-%s-%02d", configMap, slot)
}

// HeartbeatNames lists the heartbeat Lease names of the engine's ConfigMap.
func (e *Engine) HeartbeatNames() []string {
	names := make([]string, HeartbeatSlots)
	for i := range names {
		names[i] = HeartbeatName(e.target.Name, i)
	}
	return names
}

func (e *Engine) leases() coordinationv1client.LeaseInterface {
	return e.client.CoordinationV1().Leases(e.target.Namespace)
}

// Heartbeat is a Lease renewed while a step runs.
type Heartbeat struct {
	leases coordinationv1client.LeaseInterface
	name   string
	uid    types.UID
	stop   context.CancelFunc
	done   <-chan error // a panic of the renewal, then closed

	mu  sync.Mutex
	err error // why renewing stopped early
}

// StartHeartbeat takes the Lease name for holder, creating it or taking
// over one an earlier runner left behind (the caller has made the slot its
// own in the state first), and renews it every interval until Stop. now
// stamps renewTime for people to read; auditors judge a heartbeat by when
// they see it change, never by that time. ctx bounds the taking only.
func (e *Engine) StartHeartbeat(ctx context.Context, name, holder string, interval time.Duration, now func() time.Time) (*Heartbeat, error) {
	leases := e.leases()
	seconds := int32(min(math.Ceil(3*interval.Seconds()), 3600))
	stamp := func() *metav1.MicroTime { t := metav1.NewMicroTime(now()); return &t }
	want := func(l *coordinationv1.Lease) {
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		l.Labels[managed.Label], l.Labels[HeartbeatLabel] = managed.By, e.target.Name
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &holder, &seconds
		l.Spec.AcquireTime, l.Spec.RenewTime = stamp(), stamp()
	}
	object := fmt.Sprintf("lease %s/%s", e.target.Namespace, name)
	var lease *coordinationv1.Lease
	for {
		fresh := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
		want(fresh)
		var err error
		lease, err = leases.Create(ctx, fresh, metav1.CreateOptions{FieldManager: managed.By})
		if apierrors.IsAlreadyExists(err) {
			// Left by an earlier runner of this slot: take it over, with a
			// compare-and-swap on the copy read.
			if lease, err = leases.Get(ctx, name, metav1.GetOptions{}); err == nil {
				want(lease)
				lease, err = leases.Update(ctx, lease, metav1.UpdateOptions{FieldManager: managed.By})
			}
		}
		if err == nil {
			break
		}
		if !IsRetryable(err) && !apierrors.IsNotFound(err) || ctx.Err() != nil {
			return nil, APIError(err, "take", object)
		}
		select {
		case <-ctx.Done():
			return nil, APIError(err, "take", object)
		case <-time.After(wait2ms() * 10):
		}
	}
	renewCtx, stop := context.WithCancel(context.Background())
	h := &Heartbeat{leases: leases, name: name, uid: lease.UID, stop: stop}
	h.done = crash.Go(func() error {
		h.renew(renewCtx, lease, holder, interval, stamp)
		return nil
	})
	return h, nil
}

// renew updates renewTime every interval with a compare-and-swap; it stops
// early if another holder has taken the Lease (an auditor judged this runner
// dead and the slot was given to another).
func (h *Heartbeat) renew(ctx context.Context, lease *coordinationv1.Lease, holder string, interval time.Duration, stamp func() *metav1.MicroTime) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		rctx, cancel := context.WithTimeout(ctx, interval)
		next := lease.DeepCopy()
		next.Spec.RenewTime = stamp()
		updated, err := h.leases.Update(rctx, next, metav1.UpdateOptions{FieldManager: managed.By})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			var current *coordinationv1.Lease
			if current, err = h.leases.Get(rctx, h.name, metav1.GetOptions{}); err == nil {
				if current.UID != h.uid || current.Spec.HolderIdentity == nil || *current.Spec.HolderIdentity != holder {
					h.fail(fmt.Errorf("the heartbeat Lease %s was taken over", h.name))
					cancel()
					return
				}
				updated = current // renewed at the next tick
			} else if apierrors.IsNotFound(err) {
				h.fail(fmt.Errorf("the heartbeat Lease %s was deleted", h.name))
				cancel()
				return
			}
		}
		cancel()
		if err == nil {
			lease = updated
		}
	}
}

func (h *Heartbeat) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err = err
}

// Err says why the heartbeat stopped before Stop, if it did: taken over,
// deleted, or a panic of the renewal (an internal error), which Stop
// collects.
func (h *Heartbeat) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Stop stops renewing and deletes the Lease, if it is still this
// heartbeat's (a bounded, best-effort clean-up: a Lease left behind is
// taken over by the next runner of its slot).
func (h *Heartbeat) Stop() {
	h.stop()
	if err := <-h.done; err != nil {
		h.fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.leases.Delete(ctx, h.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &h.uid}})
}

// HeartbeatObserver judges heartbeat Leases by what this process sees,
// never by the times written in them: a Lease is silent for as long as this
// process has seen no renewal of it by its holder, on its own monotonic
// clock, as client-go's leader election judges a leader. A host whose clock
// is off can therefore neither keep a dead runner alive nor kill a live one.
type HeartbeatObserver struct {
	leases coordinationv1client.LeaseInterface
	seen   map[string]*observation
	now    func() time.Time
}

type observation struct {
	version string               // resourceVersion, "" while absent
	first   time.Time            // when this process first read it
	renewed map[string]time.Time // holder -> when a change by it was last seen
}

// NewHeartbeatObserver starts observing the engine's heartbeat Leases.
func (e *Engine) NewHeartbeatObserver() *HeartbeatObserver {
	return &HeartbeatObserver{leases: e.leases(), seen: map[string]*observation{}, now: time.Now}
}

// Observe reads each named Lease once; a missing Lease is an observation
// too (of no heartbeat).
func (o *HeartbeatObserver) Observe(ctx context.Context, names []string) error {
	var errs []error
	for _, name := range names {
		version, holder := "", ""
		l, err := o.leases.Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			version = l.ResourceVersion
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
		case !apierrors.IsNotFound(err):
			errs = append(errs, APIError(err, "get", "lease "+name))
			continue
		}
		now := o.now()
		obs, ok := o.seen[name]
		if !ok {
			o.seen[name] = &observation{version: version, first: now, renewed: map[string]time.Time{}}
			continue
		}
		if version != obs.version {
			obs.version = version
			if holder != "" {
				obs.renewed[holder] = now
			}
		}
	}
	return errors.Join(errs...)
}

// Silence returns how long the Lease name has shown no renewal by holder,
// as this process saw it, and whether it has seen one since it started
// observing.
func (o *HeartbeatObserver) Silence(name, holder string) (quiet time.Duration, renewed bool) {
	obs, ok := o.seen[name]
	if !ok {
		return 0, false
	}
	since := obs.first
	if t, ok := obs.renewed[holder]; ok {
		since, renewed = t, true
	}
	return o.now().Sub(since), renewed
}
