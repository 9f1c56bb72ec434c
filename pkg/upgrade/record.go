package upgrade

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Annotation keys on the state ConfigMap.
const (
	Prefix         = "kubeadmcfg.io/"
	KeyState       = Prefix + "state"
	KeyFromVersion = Prefix + "from-version"
	KeyToVersion   = Prefix + "to-version"
	KeyUpdatedAt   = Prefix + "updated-at"
	KeyReason      = Prefix + "reason"
	KeyHosts       = Prefix + "hosts"
	KeyHistory     = Prefix + "history"
	KeyRunners     = Prefix + "runners"
	KeyLostRunners = Prefix + "lost-runners"
	KeyPlan        = Prefix + "plan"
)

// HistoryLength is how many transitions a record keeps.
const HistoryLength = 50

// MaxReasonBytes bounds a reason as stored; a longer one is cut, marked
// with "...".
const MaxReasonBytes = 1024

// MaxAnnotationBytes is the API server's limit on all of an object's
// annotations together; a write over it is refused (422).
const MaxAnnotationBytes = apivalidation.TotalAnnotationSizeLimitB

// Host is one node's status.
type Host struct {
	Status    HostStatus `json:"status"`
	UpdatedAt string     `json:"updatedAt"`
}

// Transition is one entry of the history.
type Transition struct {
	From   string `json:"from"`
	To     string `json:"to"`
	At     string `json:"at"`
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
	Host   string `json:"host,omitempty"`
}

// Record is the upgrade state as stored in the annotations, and as
// upgrade-status prints it with -o json.
type Record struct {
	State       State           `json:"state"`
	FromVersion string          `json:"fromVersion"`
	ToVersion   string          `json:"toVersion"`
	UpdatedAt   string          `json:"updatedAt"`
	Reason      string          `json:"reason"`
	Hosts       map[string]Host `json:"hosts"`
	History     []Transition    `json:"history"`
	// Runners are the steps being run by upgrade-run, with their heartbeats.
	Runners []Runner `json:"runners"`
	// Lost are runners whose step was taken from them before they recorded
	// its outcome (the audit found their heartbeat stopped, or someone moved
	// the step): their COMMAND may still run, so a retry of their step
	// checks, where it can, that it has ended.
	Lost []Runner `json:"lostRunners,omitempty"`
	// Plan is the plan the upgrade follows (the default plan for an upgrade
	// recorded without one). It is stored, but printed apart.
	Plan *Plan `json:"-"`
	// Agents is set when the node agents carry the upgrade out
	// (upgrade-apply), with where each node is; nil for an upgrade driven
	// by hand.
	Agents *Agents `json:"agents,omitempty"`
}

// Clock is who acts and when; operations stamp transitions with it. Now
// should be the API server's time (engine.ServerClock), so that every
// host's stamps and every auditor's ages share one clock.
type Clock struct {
	Now time.Time
	By  string
}

func (c Clock) stamp() string { return c.Now.UTC().Format(time.RFC3339) }

// BoundReason cuts a reason to MaxReasonBytes, at a character boundary.
func BoundReason(s string) string {
	if len(s) <= MaxReasonBytes {
		return s
	}
	const mark = "..."
	cut := MaxReasonBytes - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

func (r *Record) record(c Clock, from, to, reason, host string) {
	r.History = append(r.History, Transition{From: from, To: to, At: c.stamp(), By: c.By, Reason: BoundReason(reason), Host: host})
	if len(r.History) > HistoryLength {
		r.History = r.History[len(r.History)-HistoryLength:]
	}
}

// moveTo changes the state; the runners of the state left are lost.
func (r *Record) moveTo(c Clock, to State, reason string) {
	from := r.State
	r.State, r.UpdatedAt, r.Reason = to, c.stamp(), BoundReason(reason)
	r.record(c, string(from), string(to), reason, "")
	r.lose(func(rn Runner) bool { return rn.Host == "" && State(rn.State) != to })
}

// setHost changes a node's status; its runners of another status are lost.
func (r *Record) setHost(c Clock, node string, to HostStatus, reason string) {
	current := r.hostStatus(node)
	if to == HostNone {
		delete(r.Hosts, node)
	} else {
		r.Hosts[node] = Host{Status: to, UpdatedAt: c.stamp()}
	}
	r.record(c, string(current), string(to), reason, node)
	r.lose(func(rn Runner) bool { return rn.Host == node && HostStatus(rn.State) != to })
}

// CheckVersion checks a Kubernetes version to record: a release such as
// v1.37.2, or a pre-release such as v1.38.0-rc.1, spelt as Kubernetes
// names its releases. Whitespace anywhere and build metadata
// (v1.37.2+build) are refused (a *VersionError, exit 2): the version is
// compared with others as parsed, but names the kubeadm of the release on
// each node as spelt, and no release has build metadata.
func CheckVersion(v string) error {
	parsed, err := version.ParseSemantic(v)
	switch {
	case err != nil || !strings.HasPrefix(v, "v") || strings.ContainsFunc(v, unicode.IsSpace):
		return exitcode.New(exitcode.Usage, &VersionError{Version: v})
	case parsed.BuildMetadata() != "":
		return exitcode.New(exitcode.Usage, &VersionError{Version: v, Why: "build metadata names no release"})
	}
	return nil
}

// CheckAgentsVersion checks the target of an upgrade the agents carry out:
// a version CheckVersion accepts that is a release. A pre-release is
// refused (a *PreReleaseError, exit 2) before anything is written: the
// UpgradeConfiguration the agents hand kubeadm allows no release candidate
// or experimental upgrade, so kubeadm's own version policy would refuse it
// on the first node.
func CheckAgentsVersion(v string) error {
	if err := CheckVersion(v); err != nil {
		return err
	}
	if parsed, _ := version.ParseSemantic(v); parsed.PreRelease() != "" {
		return exitcode.New(exitcode.Usage, &PreReleaseError{Version: v})
	}
	return nil
}

// VersionError is a string that is not a Kubernetes version to record.
type VersionError struct {
	Version string
	// Why says more than that it is not one, when there is more to say.
	Why string
}

func (e *VersionError) Error() string {
	msg := fmt.Sprintf("want a Kubernetes version such as v1.37.2, not %q", e.Version)
	if e.Why != "" {
		msg += ": " + e.Why
	}
	return msg
}

// PreReleaseError is a pre-release given as the target of an upgrade the
// agents carry out.
type PreReleaseError struct {
	Version string
}

func (e *PreReleaseError) Error() string {
	return fmt.Sprintf("%s is a pre-release, which the agents' kubeadm upgrade refuses (it allows no release candidate or experimental upgrade): "+
		"upgrade to a release, or drive a pre-release by hand with upgrade-start and upgrade-run", e.Version)
}

// Start begins an upgrade that follows plan (an instantiated plan; nil for
// the default). rec is nil when none was ever recorded. An upgrade that is
// not over under its own plan blocks a new one.
func Start(rec *Record, plan *Plan, c Clock, from, to, reason string) (*Record, error) {
	if rec != nil && !rec.plan().Over(rec.State) {
		busy := &InProgressError{From: rec.FromVersion, To: rec.ToVersion, State: rec.State}
		if a := rec.plan().Abort; a != nil {
			busy.Abort = a.Name
		}
		return nil, exitcode.New(exitcode.Conflict, busy)
	}
	next := &Record{Hosts: map[string]Host{}, History: []Transition{}, Runners: []Runner{}, Plan: plan}
	if rec != nil {
		next.History = rec.History
	}
	next.FromVersion, next.ToVersion = from, to
	next.moveTo(c, next.plan().Start, reason)
	next.History[len(next.History)-1].From = ""
	return next, nil
}

func orNone(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// Set moves the upgrade to state to. expect, when set, must be the current
// state, so a late report cannot overwrite a state an operator forced. force
// skips the transition rule (not expect). changed is false when the upgrade
// is already in to.
func (r *Record) Set(c Clock, to State, expect State, force bool, reason string) (changed bool, err error) {
	p := r.plan()
	if !p.Known(to) {
		return false, exitcode.Usagef("unknown state %q in plan %s (one of: %s)", to, p.Name, join(p.States()))
	}
	if expect != "" && r.State != expect {
		return false, exitcode.Conflictf("the upgrade is in %s, not %s as expected; nothing was changed", r.State, expect)
	}
	if r.State == to {
		return false, nil
	}
	if !force && !p.graph().allowed(r.State, to) {
		return false, exitcode.New(exitcode.Conflict, &TransitionError{From: string(r.State), To: string(to), Allowed: join(p.Allowed(r.State))})
	}
	r.moveTo(c, to, reason)
	return true, nil
}

// SetHost sets a node's status under the same rules as Set.
func (r *Record) SetHost(c Clock, node string, to HostStatus, expect HostStatus, force bool) (changed bool, err error) {
	p := r.plan()
	if !p.KnownHost(to) {
		return false, exitcode.Usagef("unknown host status %q in plan %s (one of: %s)", to, p.Name, join(p.HostStatuses()))
	}
	current := r.hostStatus(node)
	if expect != "" && current != expect {
		return false, exitcode.Conflictf("host %s is %s, not %s as expected; nothing was changed", node, current, expect)
	}
	if current == to {
		return false, nil
	}
	if !force && !p.allowedHost(current, to) {
		return false, exitcode.New(exitcode.Conflict, &TransitionError{Host: node, From: string(current), To: string(to), Allowed: join(p.AllowedHost(current))})
	}
	r.setHost(c, node, to, "")
	return true, nil
}

func (r *Record) hostStatus(node string) HostStatus {
	if h, ok := r.Hosts[node]; ok && h.Status != "" {
		return h.Status
	}
	return HostNone
}

// Fail moves an in-progress upgrade to exactly its own failed state and, in
// the same write, every host that is in progress to its failed status, so
// the retry is accepted. An upgrade already failed is left as it is (its
// hosts are still failed); one that is not in progress is refused.
func (r *Record) Fail(c Clock, reason string) (changed bool, err error) {
	return r.fail(c, reason, nil)
}

// fail is Fail, sparing the hosts spare names (nil spares none).
func (r *Record) fail(c Clock, reason string, spare func(node string) bool) (changed bool, err error) {
	p := r.plan()
	failed, inProgress := p.FailedOf(r.State)
	if !inProgress && !p.Failed(r.State) {
		return false, exitcode.Conflictf("the upgrade is in %s, which is not a step in progress; nothing to fail", r.State)
	}
	for _, node := range slices.Sorted(maps.Keys(r.Hosts)) {
		h := r.Hosts[node]
		if spare != nil && spare(node) {
			continue
		}
		if hf, ok := p.HostFailedOf(h.Status); ok {
			r.setHost(c, node, hf, reason)
			changed = true
		}
	}
	if inProgress {
		r.moveTo(c, failed, reason)
		changed = true
	}
	return changed, nil
}

// Age returns how long the upgrade has been in its state.
func (r *Record) Age(now time.Time) (time.Duration, error) {
	t, err := r.updatedAt()
	if err != nil {
		return 0, err
	}
	return now.Sub(t), nil
}

func (r *Record) updatedAt() (time.Time, error) {
	t, err := time.Parse(time.RFC3339, r.UpdatedAt)
	if err != nil {
		return time.Time{}, exitcode.Invalidf("annotation %s is %q, not an RFC 3339 time; set a state to repair it", KeyUpdatedAt, r.UpdatedAt)
	}
	return t, nil
}

// LastProgress is when the upgrade last moved: its state, or any host's
// status, whichever changed last. A long step whose hosts keep reporting is
// progressing.
func (r *Record) LastProgress() (time.Time, error) {
	last, err := r.updatedAt()
	if err != nil {
		return time.Time{}, err
	}
	for _, h := range r.Hosts {
		if t, err := time.Parse(time.RFC3339, h.UpdatedAt); err == nil && t.After(last) {
			last = t
		}
	}
	return last, nil
}

// InProgressError is an upgrade that is not over under its own plan: a new
// one cannot start until it is finished or aborted.
type InProgressError struct {
	From, To string
	State    State
	// Abort is the plan's abort state, the way to end the upgrade early;
	// "" when the plan has none, and only a forced move ends it.
	Abort State
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("an upgrade from %s to %s is in state %s; finish or abort it first", orNone(e.From), orNone(e.To), e.State)
}

// TransitionError is a transition the rules do not allow.
type TransitionError struct {
	Host     string // the node, for a host status
	From, To string
	Allowed  string // what From may go to, listed
}

func (e *TransitionError) Error() string {
	if e.Host != "" {
		return fmt.Sprintf("host %s: %s -> %s is not allowed; from %s it may go to: %s", e.Host, e.From, e.To, e.From, orNone(e.Allowed))
	}
	return fmt.Sprintf("%s -> %s is not allowed; from %s the upgrade may go to: %s", e.From, e.To, e.From, orNone(e.Allowed))
}
