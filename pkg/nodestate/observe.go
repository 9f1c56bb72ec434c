package nodestate

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Judging a Lease without comparing clocks. On an HA control plane each API
// server has its own host's clock: a renewTime stamped through one server
// and read against another's Date is off by their skew, which no reader can
// know. A reader that acts on an agent's liveness (a rollout's preflight,
// rollout abandon) therefore watches the Lease instead: changed while
// watched, its agent renewed it and is alive; unchanged for its whole
// duration, measured on the reader's own monotonic clock, it is lost. The
// etcd lock judges its holder the same way.

// Verdict is what watching a Lease has shown so far.
type Verdict string

// The verdicts.
const (
	// Watching: unchanged so far, for less than its duration.
	Watching Verdict = "watching"
	// Renewed: it changed while watched; its agent is alive.
	Renewed Verdict = "renewed"
	// Silent: unchanged for its whole duration while watched; its agent is
	// lost.
	Silent Verdict = "silent"
)

// Observer remembers the Leases it was shown, and when, on this process's
// clock. Its zero value is ready; it is not safe for concurrent use.
type Observer struct {
	seen map[string]*sighting // by Lease name
}

type sighting struct {
	version string    // resourceVersion and renewTime, as first seen unchanged
	since   time.Time // when first seen so (this process's monotonic clock)
	renewed bool
}

// Observe records l as seen at at, a reading of this process's clock
// (time.Now(), whose monotonic part is what counts), and says what
// watching it has shown, with how long it has been seen unchanged. The
// duration it must stay unchanged is StaleAfter(l, staleAfter). A Lease
// once seen renewed stays Renewed.
func (o *Observer) Observe(l *coordinationv1.Lease, at time.Time, staleAfter time.Duration) (Verdict, time.Duration) {
	if o.seen == nil {
		o.seen = map[string]*sighting{}
	}
	version := l.ResourceVersion
	if rt := l.Spec.RenewTime; rt != nil {
		version += "/" + rt.UTC().Format(time.RFC3339Nano)
	}
	s, ok := o.seen[l.Name]
	switch {
	case !ok:
		s = &sighting{version: version, since: at}
		o.seen[l.Name] = s
	case s.version != version:
		s.version, s.since, s.renewed = version, at, true
	}
	quiet := at.Sub(s.since)
	switch {
	case s.renewed:
		return Renewed, quiet
	case quiet >= StaleAfter(l, staleAfter):
		return Silent, quiet
	}
	return Watching, quiet
}
