package controlplane

import (
	"context"
)

// WaitHealthy waits, for each component of plan that does not change,
// until the kubelet reports its mirror Pod Ready and its own probe keeps
// answering for Settle, within Wait each; one the kubelet reports
// crash-looping fails at once. Check looks once; WaitHealthy is for a
// component whose manifest was replaced by a run that stopped before it
// saw the component come up (a reconfiguration resumed after its process
// was killed): it compares equal now, and whether it comes up healthy is
// still the question.
func WaitHealthy(ctx context.Context, plan *Plan, opts Options) error {
	a := newApplier(opts)
	for _, ch := range plan.Changes {
		if ch.Changed() {
			continue
		}
		if _, took, err := a.wait(ctx, ch.Component, ch.Current, "its manifest", func(string) bool { return true }, true); err != nil {
			a.emit(Event{Component: ch.Component, Kind: EventFailed, Message: err.Error(), Elapsed: took, Limit: opts.Wait})
			return err
		}
		a.emit(Event{Component: ch.Component, Kind: EventHealthy, Limit: opts.Wait})
	}
	return nil
}
