// Package agent is the node agent: one on each control-plane node, for as
// long as the node runs. It follows the ConfigMaps that ask its node for
// work (the rollout record, kubeadm-config) with a watch each, and carries
// out what they ask of its node, one piece of work at a time:
//
//   - a configuration rollout's turn: it applies the record's pinned target
//     to the node (with pkg/reconfigure, the code the reconfigure verb
//     runs), reports the outcome in the record, resumes its node after a
//     restart, enforces the timer of a rollout on trial (rollouts.go,
//     turn.go, resume.go, try.go);
//   - its node's state: whether the node runs what the live
//     ClusterConfiguration renders to, published on its Lease
//     (pkg/nodestate; state.go);
//   - the alarm: the condition KubeadmConfigOutOfDate on its own Node, and
//     an Event there when the node goes out of date and when it is back
//     (condition.go); and what Prometheus scrapes (metrics.go).
//
// Each kind of work is a work: the loop hands every work the newest view of
// the API, and a work does what the view asks of this node now. Every change
// to a shared record is a compare-and-swap write, so an agent acting on a
// stale copy is refused and acts again on the next one.
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/kubeadmupgrade"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// Agent defaults.
const (
	// DefaultResync is how often the agent reads the record again without
	// a change (at most every 30s): it catches a watch that stalled, and
	// retries what failed.
	DefaultResync = 30 * time.Second
	// DefaultStateResync is how often the node's state is found again
	// when nothing changed: a manifest changed by hand shows within it.
	DefaultStateResync = 5 * time.Minute
	// DefaultStopGrace is how long a node's turn may go on after the agent
	// is told to stop before it is interrupted, and so rolled back.
	DefaultStopGrace = time.Minute
)

// Config is what an agent needs. Record, Clock, Node.Config, Node.Store,
// Node.Name and Node.ManifestsDir are required.
type Config struct {
	// Node is the node the agent runs on, as every reconfiguration of it
	// sees it, built once: its Config engine reads kubeadm-config and the
	// node's mirror Pods, and puts the previous document back when a try
	// expires (its Options decide the backup and the validation of that
	// write); its Store keeps the node's backups; its UpgradeConfigMap is
	// the upgrade record a turn waits for while an upgrade is in progress.
	// Identity names the agent (default: node, process id and a random
	// suffix, so that a restart is another agent) and Now is Clock's.
	reconfigure.Node
	// Record reads and writes the rollout record (compare-and-swap, through
	// Update); its namespace also holds the agent's Lease and the Events.
	// It also writes the agent's condition on its own Node.
	Record *engine.Engine
	// Clock is the API server's clock: every stamp the agent writes, and
	// the expiry of a try, go by it.
	Clock *engine.ServerClock
	// Wait and NoEtcdSnapshot are each turn's, as reconfigure's flags are.
	Wait           time.Duration
	NoEtcdSnapshot bool
	// Upgrade reads and writes the upgrade record, in Record's namespace
	// (Node.UpgradeConfigMap): the agents carry out an upgrade
	// upgrade-apply started, and the agent's metrics show its phase. Nil:
	// this agent takes no upgrade step, and shows no upgrade.
	Upgrade *engine.Engine
	// Upgrades is what the node's upgrade steps need besides Node: the
	// kubeadm of each release (Kubeadms.Default is Node.Kubeadm when
	// empty; with a Template, a reconfiguration of a document renders with
	// the kubeadm of its release), the kubelet's restart, and kubeadm's
	// settings.
	Upgrades kubeadmupgrade.Env
	// Heartbeat is how often the Lease is renewed (DefaultHeartbeat), and
	// StaleAfter how old an earlier agent's Lease must be to be taken over
	// (DefaultStaleAfter).
	Heartbeat, StaleAfter time.Duration
	// Resync, StateResync and StopGrace default to DefaultResync,
	// DefaultStateResync and DefaultStopGrace.
	Resync, StateResync, StopGrace time.Duration
	// Version is the plugin version published in the node's state, and
	// CertificateExpires when the client certificate the agent
	// authenticates with expires (zero for a token).
	Version            string
	CertificateExpires time.Time
	// Log receives one Event per thing the agent does or finds; nil
	// discards them.
	Log func(Event)
}

// View is what the agent last saw of the ConfigMaps it follows: the newest
// copy of each it knows, from a watch, a read, or its own last write.
type View struct {
	// Rollout is the rollout record; nil when absent.
	Rollout *corev1.ConfigMap
	// Config is kubeadm-config; nil until it is first seen.
	Config *corev1.ConfigMap
	// Upgrade is the upgrade record; nil when absent.
	Upgrade *corev1.ConfigMap
}

// work is one kind of node work. Each pass of the agent's loop runs every
// work in turn; a work does what the view asks of this node now, if
// anything (a piece of work on the node goes through env.job), and says
// when it wants to look again without a change: 0 is the next resync. A
// work reaches the agent only through env.
type work interface {
	do(ctx context.Context, env *env) (again time.Duration)
}

// Agent is a running node agent. Everything but its mailboxes is owned by
// the goroutine of Run.
type Agent struct {
	*logger // the log every work writes to (env.log)

	cfg   Config
	lease *engine.HeldLease

	records, configs, upgradeRecords mailbox

	view       View
	configSeen bool // kubeadm-config was read once (View.Config is nil when it does not exist)
	works      []work
	rollouts   *rollouts
	upgrades   *upgrades
	state      *states
	condition  *conditions
	metrics    metrics // what a scrape reads (metrics.go)
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.Record == nil || cfg.Config == nil || cfg.Clock == nil || cfg.Store == nil:
		return nil, errors.New("an agent needs the record's and kubeadm-config's engines, the server clock and a backup store")
	case cfg.Name == "":
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
	def(&cfg.Heartbeat, nodestate.DefaultHeartbeat)
	def(&cfg.StaleAfter, 3*cfg.Heartbeat)
	def(&cfg.Resync, DefaultResync)
	def(&cfg.StateResync, DefaultStateResync)
	def(&cfg.StopGrace, DefaultStopGrace)
	def(&cfg.Wait, 5*time.Minute)
	cfg.Resync = min(cfg.Resync, DefaultResync)
	if cfg.Identity == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		cfg.Identity = fmt.Sprintf("agent/%s/%d-%s", cfg.Name, os.Getpid(), hex.EncodeToString(b[:]))
	}
	cfg.Now = cfg.Clock.Now
	if cfg.Upgrades.Kubeadms.Default == "" {
		cfg.Upgrades.Kubeadms.Default = cfg.Kubeadm
	}
	a := &Agent{cfg: cfg, records: newMailbox(), configs: newMailbox(), upgradeRecords: newMailbox()}
	a.logger = &logger{cfg: &a.cfg, repeated: map[string]string{}}
	a.rollouts, a.upgrades, a.state, a.condition = &rollouts{}, &upgrades{}, &states{}, &conditions{}
	// The condition is judged from the state the state work has just found.
	a.works = []work{a.rollouts, a.upgrades, a.state, a.condition}
	return a, nil
}

// Identity is how the agent is named in the record and on its Lease.
func (a *Agent) Identity() string { return a.cfg.Identity }

// Run runs the agent until ctx ends, then returns nil once the node's turn
// in progress, if any, is done or rolled back (within StopGrace and the
// rollback's own waits) and its outcome written, and the Lease is deleted.
// It returns an error when the Lease cannot be taken (another agent of the
// node is alive: exit code 4) or is taken over while it runs.
func (a *Agent) Run(ctx context.Context) (err error) {
	if held, err := a.start(ctx); !held {
		return err
	}
	fs := a.newFollowers()
	fs.start(ctx)
	defer func() {
		if ferr := fs.stop(); ferr != nil && err == nil {
			err = ferr
		}
	}()

	resync := time.NewTimer(a.cfg.Resync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return a.stop()
		case err := <-a.lease.Done():
			return a.lost(err)
		case err := <-fs.ended: // Follow ends only with ctx, or a panic
			_ = a.stop()
			return err
		case <-a.configs.ready:
			a.view.Config, _ = a.configs.take()
			a.configSeen = true
		case <-a.records.ready:
			take(&a.records, &a.view.Rollout)
		case <-a.upgradeRecords.ready:
			take(&a.upgradeRecords, &a.view.Upgrade)
		case <-resync.C:
			a.reread(ctx)
		}
		// A Lease taken over while the loop waited comes first: this agent
		// acts no more.
		select {
		case err := <-a.lease.Done():
			return a.lost(err)
		default:
		}
		next := a.pass(ctx)
		a.publish()
		if ctx.Err() != nil {
			return a.stop()
		}
		resync.Reset(next)
	}
}

// start takes the node's Lease and says the agent runs; false, with nil
// when ctx ended first, when it could not.
func (a *Agent) start(ctx context.Context) (held bool, err error) {
	lease, err := a.holdLease(ctx)
	if err != nil && ctx.Err() != nil {
		a.info("AgentStopped", "agent %s stopped before it took its lease", a.cfg.Identity)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	a.lease = lease
	a.publish()
	a.info("AgentStarted", "agent %s of node %s is running (lease %s)", a.cfg.Identity, a.cfg.Name, nodestate.LeaseName(a.cfg.Name))
	return true, nil
}

// newFollowers are the agent's followers, one per ConfigMap it follows.
func (a *Agent) newFollowers() *followers {
	fs := &followers{log: a.log, list: []follower{{a.cfg.Record, &a.records, "the rollout record"}, {a.cfg.Config, &a.configs, "kubeadm-config"}}}
	if a.cfg.Upgrade != nil {
		fs.list = append(fs.list, follower{a.cfg.Upgrade, &a.upgradeRecords, "the upgrade record"})
	}
	return fs
}

// take puts the copy in box into *seen, unless it is older.
func take(box *mailbox, seen **corev1.ConfigMap) {
	if cm, _ := box.take(); !older(cm, *seen) {
		*seen = cm
	}
}

// reread reads the rollout and upgrade records again on a resync: it
// catches a watch that stalled.
func (a *Agent) reread(ctx context.Context) {
	if cm, _, err := a.cfg.Record.Current(ctx); err == nil && !older(cm, a.view.Rollout) {
		a.view.Rollout = cm
	}
	if a.cfg.Upgrade != nil {
		if cm, _, err := a.cfg.Upgrade.Current(ctx); err == nil && !older(cm, a.view.Upgrade) {
			a.view.Upgrade = cm
		}
	}
}

// lost ends a run whose Lease was taken over (or whose renewing panicked).
func (a *Agent) lost(err error) error {
	if exitcode.FromError(err) == exitcode.Internal {
		return err
	}
	return exitcode.Conflictf("agent of node %s stops: %w; another agent of this node runs", a.cfg.Name, err)
}

// pass runs every work once, in order, and returns the time until the next
// pass without a change: Resync, or sooner when a work asks.
func (a *Agent) pass(ctx context.Context) time.Duration {
	next, env := a.cfg.Resync, a.env()
	for _, w := range a.works {
		if again := w.do(ctx, env); again > 0 {
			next = min(next, again)
		}
	}
	return next
}

// holds says whether this agent may act on its node now: it must show it
// holds the node's Lease (engine.HeldLease.Held). An agent whose renewals
// have failed for half the Lease's duration may have been taken over by
// another agent of the node that resumes its turn: it starts no work and
// writes no record until a renewal gets through again, and says so once.
func (a *Agent) holds() bool {
	err := a.lease.Held()
	if err == nil {
		a.recovered("NotActing", "")
		return true
	}
	a.warnOnce("NotActing", "", "agent %s does not act on node %s for now: %s", a.cfg.Identity, a.cfg.Name, exitcode.Message(err))
	return false
}

// holdLease takes the node's Lease. One another agent holds is judged by
// watching it, never by its renewTime: on an HA control plane the API
// servers stamp times with their own hosts' clocks. A Lease seen unchanged
// for its whole duration is abandoned (its agent was killed, or is being
// replaced) and taken over; one that goes on changing for twice the
// longer of StaleAfter and its own duration belongs to a live agent, and
// this one gives way (exit 4). Any other failure is tried again for as
// long, then returned: an API server that has just started may refuse what
// its authorizer's caches do not hold yet, and the load balancer may send
// the agent there.
func (a *Agent) holdLease(ctx context.Context) (*engine.HeldLease, error) {
	name := nodestate.LeaseName(a.cfg.Name)
	obs := &engine.LeaseObserver{Default: a.cfg.StaleAfter}
	patience := 2 * a.cfg.StaleAfter
	free := func(l *coordinationv1.Lease) bool {
		patience = 2 * max(a.cfg.StaleAfter, engine.LeaseDuration(l, a.cfg.StaleAfter))
		return obs.Abandoned(l)
	}
	start := time.Now()
	waiting, failing := false, ""
	for {
		lease, err := a.cfg.Record.HoldLease(ctx, engine.HeldLeaseSpec{
			Name: name, Holder: a.cfg.Identity,
			Labels:   map[string]string{nodestate.Label: a.cfg.Name},
			Interval: a.cfg.Heartbeat, Duration: a.cfg.StaleAfter, Now: a.cfg.Clock.Now, Free: free,
		})
		deadline := start.Add(patience)
		var held *engine.HeldByAnotherError
		switch {
		case err == nil:
			return lease, nil
		case !errors.As(err, &held) && time.Now().After(deadline):
			return nil, err
		case !errors.As(err, &held):
			if msg := exitcode.Message(err); msg != failing {
				failing = msg
				a.warn("LeaseFailed", "cannot take lease %s yet: %s; trying again for up to %s",
					name, msg, time.Until(deadline).Round(time.Second))
			}
			if err := sleep(ctx, a.cfg.Heartbeat/2); err != nil {
				return nil, err
			}
			continue
		}
		if time.Now().After(deadline) {
			return nil, exitcode.Conflictf("another agent of node %s is alive (%s holds lease %s and renews it); stop it first: %w",
				a.cfg.Name, held.Holder, held.Lease, err)
		}
		if !waiting {
			waiting = true
			a.warn("LeaseHeld", "lease %s is held by %s: waiting up to %s for it to go unrenewed for its duration",
				held.Lease, held.Holder, time.Until(deadline).Round(time.Second))
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

// stop ends a clean run: the node's condition goes Unknown (nothing checks
// it any more), and the Lease goes, so that no one takes this agent for
// lost.
func (a *Agent) stop() error {
	a.condition.stopped(a.env())
	if err := a.lease.Stop(); err != nil {
		a.warn("AgentStopped", "agent %s stopped, but its lease stays: %s", a.cfg.Identity, exitcode.Message(err))
		return nil
	}
	a.info("AgentStopped", "agent %s stopped and deleted its lease", a.cfg.Identity)
	return nil
}

// job runs one piece of work on the node (a node's turn in a rollout, its
// resume) under the agent's rules: an agent told to stop gives it
// StopGrace to finish before its context ends (and so the work is rolled
// back), and its outcome is written whatever happens to ctx: fn gets both
// the job's context and one that outlives it for the writes.
func (a *Agent) job(ctx context.Context, fn func(jctx, wctx context.Context)) {
	jctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	finished := make(chan struct{})
	watching := crash.Go(func() error {
		select {
		case <-finished:
			return nil
		case <-ctx.Done():
		}
		a.warn("Stopping", "told to stop during node %s's turn: it has %s to finish before it is interrupted and rolled back",
			a.cfg.Name, a.cfg.StopGrace)
		select {
		case <-finished:
		case <-time.After(a.cfg.StopGrace):
			cancel()
		}
		return nil
	})
	defer func() {
		close(finished)
		if err := <-watching; err != nil {
			a.warn("InternalError", "%s", exitcode.Message(err))
		}
		cancel()
	}()
	fn(jctx, context.WithoutCancel(ctx))
}

// joinNames lists names for a message: "none" when there are none.
func joinNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// stamp renders a recorded time as the record shows it.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
