package rollout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The node agent: one on each control-plane node, for as long as the node
// runs. It follows the rollout record and kubeadm-config with a watch each,
// applies the record's pinned target to its node on the node's turn (with
// pkg/reconfigure, the code the reconfigure verb runs), reports the outcome
// in the record, resumes its node after a restart, enforces the timer of a
// rollout on trial, and publishes its node's state on its Lease.

// Agent defaults.
const (
	// DefaultResync is how often the agent reads the record again without
	// a change (the issue allows at most every 30s): it catches a watch
	// that stalled, and retries what failed.
	DefaultResync = 30 * time.Second
	// DefaultStateResync is how often the node's state is found again
	// when nothing changed: a manifest changed by hand shows within it.
	DefaultStateResync = 5 * time.Minute
	// DefaultStopGrace is how long a node's turn may go on after the agent
	// is told to stop before it is interrupted, and so rolled back.
	DefaultStopGrace = time.Minute
)

// AgentConfig is what an agent needs. Record, Config, Clock, Store,
// Node.Name and ManifestsDir are required.
type AgentConfig struct {
	// Record reads and writes the rollout record (compare-and-swap, through
	// Update); its namespace also holds the agent's Lease and the Events.
	Record *engine.Engine
	// Config reads kubeadm-config and the node's mirror Pods, and puts the
	// previous document back when a try expires: its Options decide the
	// backup and the validation of that write.
	Config *engine.Engine
	// Clock is the API server's clock: every stamp the agent writes, and
	// the expiry of a try, go by it.
	Clock *engine.ServerClock
	// Store keeps the node's backups, as reconfigure's; Keep bounds them,
	// Server is recorded in them.
	Store  *backup.Store
	Keep   int
	Server string
	// Node, ManifestsDir, Kubeadm and Wait are reconfigure's, and so is
	// UpgradeConfigMap: a node's turn waits while the upgrade record says
	// an upgrade is in progress, and fails when it would change versions.
	Node             clusterconfig.NodeConfig
	ManifestsDir     string
	Kubeadm          string
	Wait             time.Duration
	UpgradeConfigMap string
	// CertificatesDir and NoEtcdSnapshot are reconfigure's too: where the
	// node's etcd client certificate is, and whether a turn that changes
	// the node's etcd member skips the snapshot before it.
	CertificatesDir string
	NoEtcdSnapshot  bool
	// Heartbeat is how often the Lease is renewed (DefaultHeartbeat), and
	// StaleAfter how old an earlier agent's Lease must be to be taken over
	// (DefaultStaleAfter).
	Heartbeat, StaleAfter time.Duration
	// Resync, StateResync and StopGrace default to DefaultResync,
	// DefaultStateResync and DefaultStopGrace.
	Resync, StateResync, StopGrace time.Duration
	// Identity names this agent in the record and its Lease (default:
	// node, process id and a random suffix, so that a restart is another
	// agent).
	Identity string
	// Version is the plugin version published in the node's state.
	Version string
	// Log receives one AgentEvent per thing the agent does or finds; nil
	// discards them.
	Log func(AgentEvent)
}

// AgentEvent is one thing the agent did or found, for its log. Transitions
// of the record are also Kubernetes Events on it, with the same reason.
type AgentEvent struct {
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

// Agent is a running node agent.
type Agent struct {
	cfg   AgentConfig
	lease *engine.HeldLease

	records, configs mailbox

	// Owned by Run's goroutine.
	record      *corev1.ConfigMap // the record as last seen; nil when absent
	live        *corev1.ConfigMap // kubeadm-config as last seen
	damagedRV   string            // the damaged record version already reported
	stateRV     string            // the kubeadm-config version the state was found for
	stateAt     time.Time         // when it was found (local monotonic clock)
	lastState   *NodeState
	lastTurnErr string
}

// NewAgent checks cfg and fills its defaults.
func NewAgent(cfg AgentConfig) (*Agent, error) {
	switch {
	case cfg.Record == nil || cfg.Config == nil || cfg.Clock == nil || cfg.Store == nil:
		return nil, errors.New("an agent needs the record's and kubeadm-config's engines, the server clock and a backup store")
	case cfg.Node.Name == "":
		return nil, exitcode.Usagef("an agent needs its node's name")
	case cfg.ManifestsDir == "":
		// Not the working directory: a turn would lock and change whatever
		// directory the agent was started in.
		return nil, exitcode.Usagef("an agent needs its node's static Pod manifests directory")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Heartbeat, DefaultHeartbeat)
	def(&cfg.StaleAfter, 3*cfg.Heartbeat)
	def(&cfg.Resync, DefaultResync)
	def(&cfg.StateResync, DefaultStateResync)
	def(&cfg.StopGrace, DefaultStopGrace)
	def(&cfg.Wait, 5*time.Minute)
	cfg.Resync = min(cfg.Resync, DefaultResync)
	if cfg.Identity == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		cfg.Identity = fmt.Sprintf("agent/%s/%d-%s", cfg.Node.Name, os.Getpid(), hex.EncodeToString(b[:]))
	}
	return &Agent{cfg: cfg, records: newMailbox(), configs: newMailbox()}, nil
}

// Identity is how the agent is named in the record and on its Lease.
func (a *Agent) Identity() string { return a.cfg.Identity }

// Run runs the agent until ctx ends, then returns nil once the node's turn
// in progress, if any, is done or rolled back (within StopGrace and the
// rollback's own waits) and its outcome written, and the Lease is deleted.
// It returns an error when the Lease cannot be taken (another agent of the
// node is alive: exit code 4) or is taken over while it runs.
func (a *Agent) Run(ctx context.Context) (err error) {
	lease, err := a.holdLease(ctx)
	if err != nil && ctx.Err() != nil {
		a.log(false, "AgentStopped", "agent %s stopped before it took its lease", a.cfg.Identity)
		return nil
	}
	if err != nil {
		return err
	}
	a.lease = lease
	a.log(false, "AgentStarted", "agent %s of node %s is running (lease %s)", a.cfg.Identity, a.cfg.Node.Name, AgentLeaseName(a.cfg.Node.Name))

	follow, stopFollowing := context.WithCancel(ctx)
	var following []<-chan error
	for _, f := range []struct {
		e    *engine.Engine
		box  *mailbox
		what string
	}{{a.cfg.Record, &a.records, "the rollout record"}, {a.cfg.Config, &a.configs, "kubeadm-config"}} {
		following = append(following, crash.Go(func() error {
			return f.e.Follow(follow, f.box.put, func(err error) {
				a.log(true, "WatchFailed", "following %s: %s; reading it again", f.what, exitcode.Message(err))
			})
		}))
	}
	defer func() {
		stopFollowing()
		for _, c := range following {
			// A follower ends with nil when told to stop; anything else
			// is a panic recovered in it, which ends the agent (exit 10).
			if ferr := <-c; ferr != nil && err == nil {
				err = ferr
			}
		}
	}()

	resync := time.NewTimer(a.cfg.Resync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return a.stop()
		case err := <-lease.Done():
			if exitcode.FromError(err) == exitcode.Internal {
				return err
			}
			return exitcode.Conflictf("agent of node %s stops: %w; another agent of this node runs", a.cfg.Node.Name, err)
		case err := <-following[0]: // Follow ends only with ctx, or a panic
			return a.internal(err)
		case err := <-following[1]:
			return a.internal(err)
		case <-a.configs.ready:
			a.live, _ = a.configs.take()
			a.refreshState(ctx, false)
			a.act(ctx) // a turn waits for kubeadm-config's uid, which its backups record
		case <-a.records.ready:
			if cm, _ := a.records.take(); !older(cm, a.record) {
				a.record = cm
			}
			a.act(ctx)
		case <-resync.C:
			if cm, _, err := a.cfg.Record.Current(ctx); err == nil && !older(cm, a.record) {
				a.record = cm
			}
			a.act(ctx)
			a.refreshState(ctx, false)
		}
		if ctx.Err() != nil {
			return a.stop()
		}
		resync.Reset(a.nextResync())
	}
}

// holdLease takes the node's Lease. One an earlier agent renewed lately
// (it was just killed, or is being replaced) is waited for until it goes
// stale, for up to twice StaleAfter; an agent that goes on renewing it is
// alive, and this one gives way (exit 4). Any other failure is tried again
// for as long, then returned: an API server that has just started may
// refuse what its authorizer's caches do not hold yet, and the load
// balancer may send the agent there.
func (a *Agent) holdLease(ctx context.Context) (*engine.HeldLease, error) {
	deadline := time.Now().Add(2 * a.cfg.StaleAfter)
	waiting, failing := false, ""
	for {
		lease, err := a.cfg.Record.HoldLease(ctx, engine.HeldLeaseSpec{
			Name: AgentLeaseName(a.cfg.Node.Name), Holder: a.cfg.Identity,
			Labels:   map[string]string{AgentLabel: a.cfg.Node.Name},
			Interval: a.cfg.Heartbeat, Duration: a.cfg.StaleAfter, Now: a.cfg.Clock.Now,
			Free: func(l *coordinationv1.Lease) bool { return !Alive(l, a.cfg.Clock.Now(), a.cfg.StaleAfter) },
		})
		var held *engine.HeldByAnotherError
		switch {
		case err == nil:
			return lease, nil
		case !errors.As(err, &held) && time.Now().After(deadline):
			return nil, err
		case !errors.As(err, &held):
			if msg := exitcode.Message(err); msg != failing {
				failing = msg
				a.log(true, "LeaseFailed", "cannot take lease %s yet: %s; trying again for up to %s",
					AgentLeaseName(a.cfg.Node.Name), msg, time.Until(deadline).Round(time.Second))
			}
			if err := sleep(ctx, a.cfg.Heartbeat/2); err != nil {
				return nil, err
			}
			continue
		}
		if time.Now().After(deadline) {
			return nil, exitcode.Conflictf("another agent of node %s is alive (%s holds lease %s and renews it); stop it first: %w",
				a.cfg.Node.Name, held.Holder, held.Lease, err)
		}
		if !waiting {
			waiting = true
			a.log(true, "LeaseHeld", "lease %s is held by %s, renewed lately: waiting up to %s for it to go stale",
				held.Lease, held.Holder, 2*a.cfg.StaleAfter)
		}
		if err := sleep(ctx, a.cfg.Heartbeat/2); err != nil {
			return nil, err
		}
	}
}

// sleep waits d, or until ctx ends (an error: the agent was told to stop
// before it started).
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return exitcode.Failuref("stopped before the agent's lease was taken")
	case <-time.After(d):
		return nil
	}
}

// internal ends a run on a goroutine's panic, the Lease deleted as on a
// stop, so that the next agent takes over at once.
func (a *Agent) internal(err error) error {
	_ = a.stop()
	return err
}

// stop ends a clean run: the Lease goes, so that no one takes this agent
// for lost.
func (a *Agent) stop() error {
	if err := a.lease.Stop(); err != nil {
		a.log(true, "AgentStopped", "agent %s stopped, but its lease stays: %s", a.cfg.Identity, exitcode.Message(err))
		return nil
	}
	a.log(false, "AgentStopped", "agent %s stopped and deleted its lease", a.cfg.Identity)
	return nil
}

// nextResync is the time until the next read without a change: Resync,
// or sooner when a try expires before.
func (a *Agent) nextResync() time.Duration {
	next := a.cfg.Resync
	if r := a.decoded(); r != nil && r.Status != nil && r.Status.Phase == AwaitingConfirm && r.Status.Try != nil {
		until := r.Status.Try.Deadline.Sub(a.cfg.Clock.Now()) + time.Second
		next = max(min(next, until), 100*time.Millisecond)
	}
	return next
}

// decoded is the record last seen, decoded; nil when absent or damaged.
func (a *Agent) decoded() *Record {
	if a.record == nil {
		return nil
	}
	r, err := FromConfigMap(a.record)
	if err != nil {
		return nil
	}
	return r
}

// clock is who acts, and when, on the server's clock.
func (a *Agent) clock() Clock { return Clock{Now: a.cfg.Clock.Now(), By: a.cfg.Identity} }

// log hands an event to the log.
func (a *Agent) log(warning bool, reason, format string, args ...any) {
	a.logErr(nil, warning, reason, fmt.Sprintf(format, args...))
}

// logErr hands an event caused by err to the log.
func (a *Agent) logErr(err error, warning bool, reason, message string) {
	if a.cfg.Log != nil {
		a.cfg.Log(AgentEvent{Time: a.cfg.Clock.Now(), Warning: warning, Reason: reason, Message: message, Err: err})
	}
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
