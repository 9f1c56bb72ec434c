package upgrade

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

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
)

// HistoryLength is how many transitions a record keeps.
const HistoryLength = 50

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
}

// Decode reads a record from annotations. ok is false when there is no
// upgrade state at all.
func Decode(annotations map[string]string) (rec *Record, ok bool, err error) {
	state, ok := annotations[KeyState]
	if !ok {
		return nil, false, nil
	}
	rec = &Record{
		State: State(state), FromVersion: annotations[KeyFromVersion], ToVersion: annotations[KeyToVersion],
		UpdatedAt: annotations[KeyUpdatedAt], Reason: annotations[KeyReason],
		Hosts: map[string]Host{}, History: []Transition{},
	}
	if v := annotations[KeyHosts]; v != "" {
		if err := json.Unmarshal([]byte(v), &rec.Hosts); err != nil {
			return nil, true, exitcode.Invalidf("annotation %s is not a JSON object of hosts: %w", KeyHosts, err)
		}
	}
	if v := annotations[KeyHistory]; v != "" {
		if err := json.Unmarshal([]byte(v), &rec.History); err != nil {
			return nil, true, exitcode.Invalidf("annotation %s is not a JSON list of transitions: %w", KeyHistory, err)
		}
	}
	return rec, true, nil
}

// Encode writes the record into annotations.
func (r *Record) Encode(annotations map[string]string) {
	hosts, _ := json.Marshal(r.Hosts)
	if len(r.History) > HistoryLength {
		r.History = r.History[len(r.History)-HistoryLength:]
	}
	history, _ := json.Marshal(r.History)
	annotations[KeyState] = string(r.State)
	annotations[KeyFromVersion] = r.FromVersion
	annotations[KeyToVersion] = r.ToVersion
	annotations[KeyUpdatedAt] = r.UpdatedAt
	annotations[KeyReason] = r.Reason
	annotations[KeyHosts] = string(hosts)
	annotations[KeyHistory] = string(history)
}

// Clock is who acts and when; operations stamp transitions with it.
type Clock struct {
	Now time.Time
	By  string
}

func (c Clock) stamp() string { return c.Now.UTC().Format(time.RFC3339) }

func (r *Record) record(c Clock, from, to, reason, host string) {
	r.History = append(r.History, Transition{From: from, To: to, At: c.stamp(), By: c.By, Reason: reason, Host: host})
	if len(r.History) > HistoryLength {
		r.History = r.History[len(r.History)-HistoryLength:]
	}
}

func (r *Record) moveTo(c Clock, to State, reason string) {
	from := r.State
	r.State, r.UpdatedAt, r.Reason = to, c.stamp(), reason
	r.record(c, string(from), string(to), reason, "")
}

// CheckVersion checks a Kubernetes version to record.
func CheckVersion(v string) error {
	if _, err := version.ParseSemantic(v); err != nil || !strings.HasPrefix(v, "v") {
		return exitcode.Usagef("want a Kubernetes version such as v1.37.2, not %q", v)
	}
	return nil
}

// Start begins an upgrade. rec is nil when none was ever recorded. An
// upgrade that is not complete or aborted blocks a new one.
func Start(rec *Record, c Clock, from, to, reason string) (*Record, error) {
	if rec != nil && !Terminal(rec.State) {
		return nil, exitcode.Conflictf("an upgrade from %s to %s is in state %s; finish or abort it first (upgrade-set upgrade-aborting)",
			orNone(rec.FromVersion), orNone(rec.ToVersion), rec.State)
	}
	next := &Record{Hosts: map[string]Host{}, History: []Transition{}}
	if rec != nil {
		next.History = rec.History
	}
	next.FromVersion, next.ToVersion = from, to
	next.moveTo(c, Started, reason)
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
	if !Known(to) {
		return false, exitcode.Usagef("unknown state %q (one of: %s)", to, join(States()))
	}
	if expect != "" && r.State != expect {
		return false, exitcode.Conflictf("the upgrade is in %s, not %s as expected; nothing was changed", r.State, expect)
	}
	if r.State == to {
		return false, nil
	}
	if !force && !allowed(r.State, to) {
		return false, exitcode.New(exitcode.Conflict, &TransitionError{From: string(r.State), To: string(to), Allowed: join(Allowed(r.State))})
	}
	r.moveTo(c, to, reason)
	return true, nil
}

// SetHost sets a node's status under the same rules as Set.
func (r *Record) SetHost(c Clock, node string, to HostStatus, expect HostStatus, force bool) (changed bool, err error) {
	if !KnownHost(to) {
		return false, exitcode.Usagef("unknown host status %q (one of: %s)", to, join(HostStatuses()))
	}
	current := r.hostStatus(node)
	if expect != "" && current != expect {
		return false, exitcode.Conflictf("host %s is %s, not %s as expected; nothing was changed", node, current, expect)
	}
	if current == to {
		return false, nil
	}
	if !force && !allowedHost(current, to) {
		return false, exitcode.New(exitcode.Conflict, &TransitionError{Host: node, From: string(current), To: string(to), Allowed: join(AllowedHost(current))})
	}
	if to == HostNone {
		delete(r.Hosts, node)
	} else {
		r.Hosts[node] = Host{Status: to, UpdatedAt: c.stamp()}
	}
	r.record(c, string(current), string(to), "", node)
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
	failed, inProgress := FailedOf(r.State)
	if !inProgress && !Failed(r.State) {
		return false, exitcode.Conflictf("the upgrade is in %s, which is not a step in progress; nothing to fail", r.State)
	}
	for node, h := range r.Hosts {
		if hf, ok := HostFailedOf(h.Status); ok {
			r.Hosts[node] = Host{Status: hf, UpdatedAt: c.stamp()}
			r.record(c, string(h.Status), string(hf), reason, node)
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
	t, err := time.Parse(time.RFC3339, r.UpdatedAt)
	if err != nil {
		return 0, exitcode.Invalidf("annotation %s is %q, not an RFC 3339 time; set a state to repair it", KeyUpdatedAt, r.UpdatedAt)
	}
	return now.Sub(t), nil
}

// Audit fails an upgrade that has been in a step in progress for longer
// than stuckAfter. It is safe to run from every node at once: inside a
// compare-and-swap write only the first sees the state still in progress.
func (r *Record) Audit(c Clock, stuckAfter time.Duration) (changed bool, err error) {
	if !InProgress(r.State) {
		return false, nil
	}
	age, err := r.Age(c.Now)
	if err != nil {
		return false, err
	}
	if age < stuckAfter {
		return false, nil
	}
	return r.Fail(c, fmt.Sprintf("stuck in %s for %s", r.State, age.Round(time.Second)))
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

// join lists state or status names for messages.
func join[T ~string](names []T) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}
