package controlplane

import (
	"context"
	"slices"
)

// WaitHealthy waits, for each of components that plan does not change,
// until the kubelet reports its mirror Pod Ready and its own probe keeps
// answering for Settle, within Wait each; one the kubelet reports
// crash-looping fails at once. Check looks once; WaitHealthy is for a
// component whose manifest was replaced by a run that stopped before it
// saw the component come up (a reconfiguration resumed after its process
// was killed): it compares equal now, and whether it comes up healthy is
// still the question. Name only such components: the restarts of one
// whose manifest did not change (a controller-manager that lost its API
// server for a while) would be taken for a crash loop.
func WaitHealthy(ctx context.Context, plan *Plan, components []Component, opts Options) error {
	a := newApplier(opts)
	for _, ch := range plan.Changes {
		if ch.Changed() || !slices.Contains(components, ch.Component) {
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
