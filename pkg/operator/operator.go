// Package operator is the operator's side of the work the node agents
// carry out: what a person or a script does through the API alone, with no
// access to the nodes. Rollouts starts a configuration rollout after a
// preflight of the nodes and their agents (pkg/nodestate), pauses, resumes,
// confirms and undoes it, and waits for its end; every change to the
// record (pkg/rollout) is one compare-and-swap write. Upgrades starts a
// Kubernetes upgrade the agents carry out (upgrade-apply) after a preflight
// of kubeadm's version rules, the agents and etcd, resumes its failed step
// and waits for its end, on the upgrade record (pkg/upgrade). The rollout,
// nodes, agent and upgrade-* verbs, and patch|edit|restore --rollout, build
// on it.
package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// Rollouts carries out an operator's requests on the rollout record, from
// the API alone: start a rollout after a preflight of the nodes and their
// agents, pause, resume, confirm and undo it, wait for its end, read it.
// Every change to the record is one compare-and-swap write through Record
// (engine.Update with Apply as the Mutate), so each transition's rules are
// checked against the record actually replaced, and of two operators who
// race exactly one wins. Each transition is also recorded as an Event on the
// record, best effort.
type Rollouts struct {
	// Record reads and writes the record's ConfigMap. Build it with
	// CreateIfMissing, so that the first start creates the record.
	Record *engine.Engine
	// Config reads kubeadm-config (its Target.Key names the document), the
	// document a start pins; an undo writes the previous document back
	// through it, so its options (backup, validation) are the caller's.
	Config *engine.Engine
	// Now is the API server's time (engine.ServerClock's Now): what the
	// record is stamped with and agents' Leases are judged by. Nil: the
	// local clock.
	Now func() time.Time
	// By names who acts, as the record and its history show it.
	By string
	// StaleAfter, when positive, is how long every agent's Lease may go
	// unrenewed before the agent is taken for lost; zero judges each Lease
	// by its own duration (nodestate.StaleAfter).
	StaleAfter time.Duration
	// PreflightWait bounds how long a preflight waits for a control-plane
	// node's components to be Ready (DefaultPreflightWait when zero); the
	// context bounds it too.
	PreflightWait time.Duration
	// Progress, when set, is told in one line what a wait waits for (the
	// preflight's, abandon's).
	Progress func(line string)
}

// Change is what an operation did to the record.
type Change struct {
	// Status is the rollout after the operation (the record's current one).
	Status *rollout.Status
	// Changed is false when the record already was as asked (a rollout
	// paused twice): nothing was written.
	Changed bool
	// ResourceVersion is the record's resourceVersion after the operation,
	// where a wait for its end starts watching.
	ResourceVersion string
	// Warnings are what went wrong without stopping the operation.
	Warnings []string
}

func (o *Rollouts) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

func (o *Rollouts) clock() rollout.Clock { return rollout.Clock{Now: o.now(), By: o.By} }

// recordName is the record as messages name it.
func (o *Rollouts) recordName() string {
	t := o.Record.Target()
	return t.Namespace + "/" + t.Name
}

// Read returns the record and the ConfigMap that holds it. A record never
// written is the empty Record with a nil ConfigMap; a damaged one is an
// error with exit code 3 that wraps a *DamagedError.
func (o *Rollouts) Read(ctx context.Context) (*rollout.Record, *corev1.ConfigMap, error) {
	cm, err := o.Record.Get(ctx)
	if exitcode.FromError(err) == exitcode.NotFound {
		return &rollout.Record{}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	r, err := rollout.FromConfigMap(cm)
	return r, cm, err
}

// Current returns the record's current (or last) rollout; none recorded is
// ErrNoRollout with exit code 5, naming where it was looked for.
func (o *Rollouts) Current(ctx context.Context) (*rollout.Status, *rollout.Record, *corev1.ConfigMap, error) {
	r, cm, err := o.Read(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if r.Status == nil {
		return nil, r, cm, o.noRollout()
	}
	return r.Status, r, cm, nil
}

func (o *Rollouts) noRollout() error {
	return exitcode.New(exitcode.NotFound, fmt.Errorf("%w in configmap %s", rollout.ErrNoRollout, o.recordName()))
}

// transition runs change on the record in one compare-and-swap write and
// records event as an Event on it when the record changed. change may be
// run more than once, on ever newer copies of the record.
func (o *Rollouts) transition(ctx context.Context, change func(r *rollout.Record) (bool, error), event func(s *rollout.Status) (reason, message string)) (*Change, error) {
	return o.transitionAs(ctx, corev1.EventTypeNormal, change, event)
}

// transitionAs is transition with an Event of eventType.
func (o *Rollouts) transitionAs(ctx context.Context, eventType string, change func(r *rollout.Record) (bool, error), event func(s *rollout.Status) (reason, message string)) (*Change, error) {
	var after *rollout.Record
	res, err := o.Record.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		r, changed, err := rollout.Apply(cm, change)
		after = r
		return changed, err
	})
	if err != nil {
		if errors.Is(err, rollout.ErrNoRollout) && exitcode.FromError(err) == exitcode.NotFound {
			return nil, o.noRollout()
		}
		return nil, err
	}
	out := &Change{Changed: res.Changed}
	if after != nil {
		out.Status = after.Status
	}
	if res.New != nil {
		out.ResourceVersion = res.New.ResourceVersion
	}
	if res.Changed && res.New != nil && out.Status != nil && event != nil {
		reason, message := event(out.Status)
		out.Warnings = append(out.Warnings, o.event(ctx, res.New, eventType, reason, message)...)
	}
	return out, nil
}

// event records a transition on the record, best effort: an Event is a
// record for people, and the transition stands without it.
func (o *Rollouts) event(ctx context.Context, cm *corev1.ConfigMap, eventType, reason, message string) []string {
	if err := o.Record.Event(ctx, cm, eventType, reason, message); err != nil {
		return []string{"the transition was recorded, but not its Event: " + err.Error()}
	}
	return nil
}

// joinNames lists names for a message: "none" when there are none.
func joinNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
