package operator

import (
	"context"
	"fmt"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// Start pins the live document of kubeadm-config, byte for byte with its
// resourceVersion, and starts a rollout of it over spec's nodes, once
// Preflight passes. The nodes' previous document is the record's last good
// target, when there is one; it is exactly what the live document replaced
// when kubeadm-config's stamp says so (engine.Replaced). When it is not, a
// try is refused and the rollout is started with a warning that its undo
// would drop the writes made since (rollout.Record.Start). spec's target
// fields are ignored.
func (o *Rollouts) Start(ctx context.Context, spec rollout.Spec) (*Change, error) {
	spec, err := o.Preflight(ctx, spec)
	if err != nil {
		return nil, err
	}
	cm, err := o.Config.Get(ctx)
	if err != nil {
		return nil, err
	}
	doc, err := engine.DocumentOf(cm, o.Config.Target())
	if err != nil {
		return nil, err
	}
	spec.Target, spec.TargetResourceVersion, spec.Source = []byte(doc), cm.ResourceVersion, rollout.SourceLive
	spec.Previous, spec.PreviousResourceVersion = nil, ""
	spec.Replaced, _ = engine.Replaced(cm, o.Config.Target())
	return o.StartPinned(ctx, spec)
}

// StartPinned starts the rollout of spec as it is: its target (and previous)
// document already pinned, its nodes already checked by Preflight. It is the
// second half of a write followed by a rollout (patch --rollout): Preflight
// before the write, StartPinned with the bytes written after it. The record
// is written with compare-and-swap and created when missing, so of two
// starts that race exactly one wins; the other is refused (exit 4) naming
// the winner.
func (o *Rollouts) StartPinned(ctx context.Context, spec rollout.Spec) (*Change, error) {
	ch, err := o.transition(ctx, func(r *rollout.Record) (bool, error) {
		return true, r.Start(o.clock(), spec)
	}, func(s *rollout.Status) (string, string) {
		return "RolloutStarted", fmt.Sprintf("rollout %d started by %s: %s (%s, resourceVersion %s) over %s",
			s.ID, s.StartedBy, rollout.Short(s.Target.Hash), s.Target.Source, s.Target.ResourceVersion, strings.Join(s.Order, ", "))
	})
	if err != nil {
		return nil, err
	}
	if s := ch.Status; s.Untracked != nil {
		ch.Warnings = append([]string{fmt.Sprintf("rollout %d's previous document is not known exactly: %s; an undo of it would drop those writes too, and is refused unless forced",
			s.ID, s.Untracked.Drops(*s.Previous))}, ch.Warnings...)
	}
	return ch, nil
}
