package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// ConfigHashAnnotation is where the kubelet records, on a mirror Pod, the
// hash of the static Pod manifest it runs. `kubeadm upgrade` waits for it to
// change; so does reconfigure.
const ConfigHashAnnotation = "kubernetes.io/config.hash"

// Change is one component's manifest: the one running and the one rendered.
type Change struct {
	Component Component
	Path      string
	Current   *Manifest
	Rendered  *Manifest
}

// Changed reports whether the rendered manifest differs from the running one.
func (c Change) Changed() bool { return !c.Rendered.SameAs(c.Current) }

// Plan is what a reconfiguration would do to a node: every component
// considered, changed or not, in order.
type Plan struct {
	Dir     string
	Changes []Change
}

// NewPlan compares the rendered manifests with the ones in dir. Every
// component must have a manifest there already: reconfigure changes a
// control plane, it never adds a component to a node.
func NewPlan(dir string, rendered map[Component][]byte, components []Component) (*Plan, error) {
	p := &Plan{Dir: dir}
	for _, c := range components {
		path := filepath.Join(dir, c.File())
		current, err := ReadManifest(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, exitcode.New(exitcode.NotFound, &MissingError{Component: c, Path: path})
		}
		if input.Refused(err) {
			return nil, exitcode.Invalidf("the running %s manifest: %w", c.PodName(), err)
		}
		if err != nil {
			return nil, exitcode.Failuref("read the running manifest: %w", err)
		}
		data, ok := rendered[c]
		if !ok {
			return nil, exitcode.Failuref("no rendered %s manifest", c.PodName())
		}
		next, err := ParseManifest(data)
		if err != nil {
			return nil, exitcode.Failuref("kubeadm's %s manifest: %w", c.PodName(), err)
		}
		p.Changes = append(p.Changes, Change{Component: c, Path: path, Current: current, Rendered: next})
	}
	return p, nil
}

// Changed reports whether any component would change.
func (p *Plan) Changed() bool {
	for _, c := range p.Changes {
		if c.Changed() {
			return true
		}
	}
	return false
}

// Pods reads the mirror Pods the kubelet publishes; nil, nil is "none".
// engine.Engine's Pod method is one.
type Pods interface {
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
}

// ManifestBackuper keeps a copy of a manifest before it is replaced and
// returns its name. An error stops the reconfiguration before the replace.
type ManifestBackuper interface {
	BackupManifest(c Component, path string, manifest []byte) (string, error)
}

// Options tune Apply.
type Options struct {
	// Node is the node's name, which names its mirror Pods.
	Node string
	Pods Pods
	// Backup keeps each manifest before it is replaced; nil keeps none.
	Backup ManifestBackuper
	// Wait is how long each component may take to come up healthy.
	Wait time.Duration
	// NoRollback leaves a failed component as it is (debugging).
	NoRollback bool
	// Progress receives what Apply does and waits for; nil discards it.
	Progress func(Event)
	// HTTPClient probes the components (default: 5s timeout, serving
	// certificates not verified, as the kubelet's probes).
	HTTPClient *http.Client
	// Interval is the time between looks at a component (default 1s);
	// Settle is how long its probe must keep succeeding (default 2s).
	Interval, Settle time.Duration
	// Before, when set, is asked right before a changed component's
	// manifest is backed up and replaced: an error stops the run there,
	// as a component that did not come up does (the components replaced
	// before it are rolled back). An etcd member's change is checked
	// against the cluster's state then, not only before the run began.
	Before func(ctx context.Context, c Component) error
	// Ready, when set, is asked once a component runs its new manifest,
	// Ready and answering its probe, and again once a rollback has put its
	// previous manifest back and it runs that: it may wait for what the
	// manifest's probe cannot tell (an etcd member caught up with its
	// cluster), and an error is the component not healthy. It bounds its
	// own wait.
	Ready func(ctx context.Context, c Component) error
}

// EventKind says what an Event reports.
type EventKind string

// The events Apply reports, in the order they happen for a component.
const (
	EventReplacing   EventKind = "replacing"    // backed up, about to replace; Message names the backup
	EventWaiting     EventKind = "waiting"      // replaced; Message says what is awaited
	EventStatus      EventKind = "status"       // what the last look saw, once per look
	EventHealthy     EventKind = "healthy"      // the component is up on its new manifest
	EventFailed      EventKind = "failed"       // it is not; Message says why
	EventRollingBack EventKind = "rolling-back" // its previous manifest is back in place
	EventRolledBack  EventKind = "rolled-back"  // and healthy again
)

// Event is one step of Apply, for progress output.
type Event struct {
	Component Component
	Kind      EventKind
	Message   string
	Elapsed   time.Duration
	Limit     time.Duration
}

// Outcome is what Apply did to one component.
type Outcome struct {
	Component    Component     `json:"component"`
	Pod          string        `json:"pod"`
	Manifest     string        `json:"manifest"`
	Changed      bool          `json:"changed"`
	Replaced     bool          `json:"replaced"`
	Backup       string        `json:"backup,omitempty"`
	OldHash      string        `json:"oldHash,omitempty"`
	NewHash      string        `json:"newHash,omitempty"`
	HealthyAfter time.Duration `json:"healthyAfter,omitempty"`
	RolledBack   bool          `json:"rolledBack"`
}

// Apply carries plan to the node: one changed component at a time, in
// order, it backs up the running manifest, replaces it atomically, and
// waits until the kubelet runs the new one (its mirror Pod's config hash
// changes) and the manifest's own probe keeps answering. When a component
// does not come up within Options.Wait, or anything else fails once a
// manifest was replaced, the previous manifests of every component this run
// replaced are put back and waited for: the error then carries exit code 8
// (FailedError) when they are healthy again, 9 (RollbackError) when not.
// An error before the first replace is returned as it is: nothing changed.
// So is a replace that failed and left the manifest on disk as it was (a
// full disk): a component whose file never changed is neither rolled back
// nor reported down. A Wait shorter than Settle + 2 × Interval is refused
// (exit 2) before anything is read.
func Apply(ctx context.Context, plan *Plan, opts Options) ([]Outcome, error) {
	a := newApplier(opts)
	outcomes := make([]Outcome, len(plan.Changes))
	for i, ch := range plan.Changes {
		outcomes[i] = Outcome{Component: ch.Component, Pod: ch.Current.MirrorPodName(opts.Node), Manifest: ch.Path, Changed: ch.Changed()}
	}
	// A component is healthy once its probe has answered for Settle, looked
	// at every Interval: a shorter wait could never confirm one, and would
	// roll back every change, then fail to confirm the rollback too.
	if least := a.opts.Settle + 2*a.opts.Interval; a.opts.Wait < least {
		return outcomes, exitcode.Usagef("a wait of %s cannot confirm a component healthy: it takes at least %s", a.opts.Wait, least)
	}
	// Everything that can be checked is checked before the first replace:
	// the probes, and the config hash of each mirror Pod, which tells the
	// new manifest's Pod from the old one's.
	for i, ch := range plan.Changes {
		if !outcomes[i].Changed {
			continue
		}
		if _, err := ch.Rendered.Probe(); err != nil {
			return outcomes, exitcode.Failuref("%w", err)
		}
		if _, err := ch.Current.Probe(); err != nil {
			return outcomes, exitcode.Failuref("%w", err)
		}
		hash, err := a.currentHash(ctx, ch.Current)
		if err != nil {
			return outcomes, err
		}
		outcomes[i].OldHash = hash
	}
	var replaced []int
	for i, ch := range plan.Changes {
		if !outcomes[i].Changed {
			continue
		}
		if opts.Before != nil {
			if err := opts.Before(ctx, ch.Component); err != nil {
				return outcomes, a.fail(ctx, plan, outcomes, replaced, err)
			}
		}
		if opts.Backup != nil {
			name, err := opts.Backup.BackupManifest(ch.Component, ch.Path, ch.Current.Raw)
			if err != nil {
				return outcomes, a.fail(ctx, plan, outcomes, replaced, fmt.Errorf("back up the %s manifest: %w", ch.Component.PodName(), err))
			}
			outcomes[i].Backup = name
		}
		a.emit(Event{Component: ch.Component, Kind: EventReplacing, Message: outcomes[i].Backup})
		if err := replaceManifest(ch.Path, ch.Rendered.Raw); err != nil {
			err = fmt.Errorf("replace %s: %w", ch.Path, err)
			// A write that failed before the rename (a full disk) left the
			// running manifest as it was: nothing to roll back, and nothing
			// that may be down. Otherwise the rename may have happened.
			if holds(ch.Path, ch.Current.Raw) {
				return outcomes, a.fail(ctx, plan, outcomes, replaced, fmt.Errorf("%w (the manifest on disk is unchanged)", err))
			}
			replaced = append(replaced, i)
			return outcomes, a.fail(ctx, plan, outcomes, replaced, err)
		}
		replaced = append(replaced, i)
		outcomes[i].Replaced = true
		old := outcomes[i].OldHash
		start := time.Now()
		newHash, took, err := a.wait(ctx, ch.Component, ch.Rendered, "the new manifest", func(h string) bool { return h != old }, true)
		outcomes[i].NewHash = newHash
		if err == nil {
			err = a.ready(ctx, ch.Component)
			took = time.Since(start)
		}
		if err != nil {
			a.emit(Event{Component: ch.Component, Kind: EventFailed, Message: err.Error(), Elapsed: took, Limit: opts.Wait})
			return outcomes, a.fail(ctx, plan, outcomes, replaced, err)
		}
		outcomes[i].HealthyAfter = took
		a.emit(Event{Component: ch.Component, Kind: EventHealthy, Elapsed: took, Limit: opts.Wait})
	}
	return outcomes, nil
}

// fail rolls back the components replaced so far and returns the error
// that says how that went.
func (a *applier) fail(ctx context.Context, plan *Plan, outcomes []Outcome, replaced []int, cause error) error {
	if len(replaced) == 0 {
		return cause
	}
	components := make([]Component, len(replaced))
	for j, i := range replaced {
		components[j] = plan.Changes[i].Component
	}
	if a.opts.NoRollback {
		return exitcode.New(exitcode.Failure, &NotRolledBackError{Err: cause, Changed: components})
	}
	// The rollback runs even when ctx was cancelled (an interrupt): the node
	// must not be left half-changed. Each wait is still bounded by Wait.
	ctx = context.WithoutCancel(ctx)
	var down []Component
	var errs []error
	for k := len(replaced) - 1; k >= 0; k-- {
		ch := plan.Changes[replaced[k]]
		// A put-back that reports an error after its rename (the directory
		// sync) still put the previous manifest back: judge by the file.
		if err := replaceManifest(ch.Path, ch.Current.Raw); err != nil && !holds(ch.Path, ch.Current.Raw) {
			down = append(down, ch.Component)
			errs = append(errs, fmt.Errorf("put back %s: %w", ch.Path, err))
			continue
		}
		a.emit(Event{Component: ch.Component, Kind: EventRollingBack, Limit: a.opts.Wait})
	}
	for _, i := range replaced {
		ch := plan.Changes[i]
		if containsComponent(down, ch.Component) {
			continue
		}
		old := outcomes[i].OldHash
		start := time.Now()
		_, _, err := a.wait(ctx, ch.Component, ch.Current, "its previous manifest again", func(h string) bool { return h == old }, false)
		if err == nil {
			err = a.ready(ctx, ch.Component)
		}
		if err != nil {
			down = append(down, ch.Component)
			errs = append(errs, err)
			a.emit(Event{Component: ch.Component, Kind: EventFailed, Message: err.Error(), Elapsed: time.Since(start), Limit: a.opts.Wait})
			continue
		}
		outcomes[i].RolledBack = true
		a.emit(Event{Component: ch.Component, Kind: EventRolledBack})
	}
	if len(down) > 0 {
		return exitcode.New(exitcode.RollbackFailed, &RollbackError{Err: cause, Down: down, RollbackErr: errors.Join(errs...)})
	}
	return exitcode.New(exitcode.RolledBack, &FailedError{Err: cause, RolledBack: components})
}

// holds reports whether the file at path holds exactly data.
func holds(path string, data []byte) bool {
	got, err := input.ReadFile(path)
	return err == nil && bytes.Equal(got, data)
}

func containsComponent(cs []Component, c Component) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// applier holds what one Apply needs.
type applier struct {
	opts   Options
	client *http.Client
}

func newApplier(opts Options) *applier {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Settle < 0 {
		opts.Settle = 0
	} else if opts.Settle == 0 {
		opts.Settle = 2 * time.Second
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{
			Timeout: 5 * time.Second,
			// The kubelet does not verify a probed component's certificate
			// either: the question is whether it is up, not who it is.
			Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // health probe, as the kubelet's
		}
	}
	return &applier{opts: opts, client: client}
}

// ready asks Options.Ready, when set, whether c is healthy beyond its
// probe.
func (a *applier) ready(ctx context.Context, c Component) error {
	if a.opts.Ready == nil {
		return nil
	}
	return a.opts.Ready(ctx, c)
}

func (a *applier) emit(e Event) {
	if a.opts.Progress != nil {
		a.opts.Progress(e)
	}
}
