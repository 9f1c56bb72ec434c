package nodestate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// What the API says about each node's agent, read from the agents' Leases
// and judged on the API server's clock: a rollout's preflight, `rollout
// status` and `nodes` all see the agents through it.

// Liveness is how an agent looks from the API.
type Liveness string

// The liveness of an agent.
const (
	// AgentAlive: its Lease was renewed within its duration.
	AgentAlive Liveness = "alive"
	// AgentLost: its Lease exists but went unrenewed for longer.
	AgentLost Liveness = "lost"
	// AgentNone: the node has no agent Lease.
	AgentNone Liveness = "none"
)

// Agent is a node's agent as its Lease shows it.
type Agent struct {
	Node     string   `json:"node"`
	Liveness Liveness `json:"liveness"`
	// Lease is the agent's Lease; empty when the node has none.
	Lease string `json:"lease,omitempty"`
	// LastSeen is how long ago, on the API server's clock, the Lease was
	// renewed; nil when it never was.
	LastSeen *metav1.Duration `json:"lastSeen,omitempty"`
	// State is what the agent last published about its node; nil when it
	// published nothing, or what it published does not decode (StateError
	// says why).
	State      *State `json:"state,omitempty"`
	StateError string `json:"stateError,omitempty"`
}

// Seen shows the agent as tables do: "alive (3s)", "lost (45s)", "none".
func (a Agent) Seen() string {
	if a.Liveness == AgentNone || a.LastSeen == nil {
		return string(a.Liveness)
	}
	return fmt.Sprintf("%s (%s)", a.Liveness, duration.HumanDuration(a.LastSeen.Duration))
}

// Judge reads one Lease as an agent's, on the API server's clock now:
// alive when renewed within StaleAfter(l, staleAfter), its own duration
// unless staleAfter overrides it. ok is false when it is not an agent's
// Lease.
func Judge(l *coordinationv1.Lease, now time.Time, staleAfter time.Duration) (Agent, bool) {
	node, state, ok, err := FromLease(l)
	if !ok {
		return Agent{}, false
	}
	a := Agent{Node: node, Lease: l.Name, Liveness: AgentLost, State: state}
	if err != nil {
		a.StateError = err.Error()
	}
	if age, seen := LastSeen(l, now); seen {
		a.LastSeen = &metav1.Duration{Duration: max(age, 0).Truncate(time.Second)}
	}
	if Alive(l, now, staleAfter) {
		a.Liveness = AgentAlive
	}
	return a, true
}

// AgentFor returns node's agent from agents, or one of liveness none.
func AgentFor(agents map[string]Agent, node string) Agent {
	if a, ok := agents[node]; ok {
		return a
	}
	return Agent{Node: node, Liveness: AgentNone}
}

// NodeNames is every node either list names, once each, sorted: the
// control-plane nodes, and any other node an agent reports on.
func NodeNames(controlPlane []string, agents map[string]Agent) []string {
	names := slices.Clone(controlPlane)
	for n := range agents {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Sync is whether a node runs what the live ClusterConfiguration renders
// to, as its agent last found.
type Sync string

// The answers.
const (
	SyncYes     Sync = "yes"
	SyncNo      Sync = "no"
	SyncUnknown Sync = "unknown"
)

// SyncWith judges the agent's published state against the live document of
// hash liveHash: a state found for another document says nothing about this
// one. why says what differs, or why it is not known.
func (a Agent) SyncWith(liveHash string) (sync Sync, why string) {
	s := a.State
	switch {
	case a.Liveness == AgentNone:
		return SyncUnknown, "no agent"
	case a.StateError != "":
		return SyncUnknown, a.StateError
	case s == nil:
		return SyncUnknown, "the agent has published no state"
	case s.Error != "":
		return SyncUnknown, s.Error
	case liveHash != "" && s.LiveHash != "" && s.LiveHash != liveHash:
		return SyncUnknown, fmt.Sprintf("checked against an older document (resourceVersion %s)", s.LiveResourceVersion)
	case s.InSync:
		return SyncYes, ""
	}
	if len(s.Differs) == 0 {
		return SyncNo, "none"
	}
	return SyncNo, strings.Join(s.Differs, ", ")
}
