package operator

import (
	"context"
	"fmt"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// Pause stops the current rollout from handing out turns; a node in
// progress still finishes. A rollout already paused is left as it is
// (Changed false).
func (o *Rollouts) Pause(ctx context.Context) (*Change, error) {
	return o.transition(ctx, func(r *rollout.Record) (bool, error) { return r.Pause(o.clock()) },
		func(s *rollout.Status) (string, string) {
			return "RolloutPaused", fmt.Sprintf("rollout %d paused by %s", s.ID, o.By)
		})
}

// Resume lets a paused rollout hand out turns again, past its canary. A
// rollout in progress is left as it is (Changed false).
func (o *Rollouts) Resume(ctx context.Context) (*Change, error) {
	return o.transition(ctx, func(r *rollout.Record) (bool, error) { return r.Resume(o.clock()) },
		func(s *rollout.Status) (string, string) {
			return "RolloutResumed", fmt.Sprintf("rollout %d resumed by %s", s.ID, o.By)
		})
}

// Confirm keeps a rollout on trial before its deadline: it succeeds, and no
// agent reverts it. One already confirmed is left as it is (Changed false).
func (o *Rollouts) Confirm(ctx context.Context) (*Change, error) {
	return o.transition(ctx, func(r *rollout.Record) (bool, error) { return r.Confirm(o.clock()) },
		func(s *rollout.Status) (string, string) {
			return "RolloutConfirmed", fmt.Sprintf("rollout %d confirmed by %s", s.ID, o.By)
		})
}
