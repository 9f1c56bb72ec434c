// Package nodestate is what the agent of a control-plane node publishes
// about it, and how everyone else reads it, from the API alone: each agent
// holds one Lease named after its node, renewed on the API server's clock,
// whose annotation carries the node's State (whether the node runs what the
// live ClusterConfiguration renders to). The agent writes it; the
// operator's verbs (a rollout's preflight, rollout status, nodes) read it
// and judge each agent alive or lost by its Lease. It holds values only and
// makes no API call.
package nodestate

import (
	"encoding/json"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Label marks an agent's Lease; its value is the node's name, so one
// selector lists every agent.
const Label = "kubeadmcfg.io/agent"

// Annotation holds the node's State as JSON on the agent's Lease.
const Annotation = "kubeadmcfg.io/node-state"

// DefaultHeartbeat is how often an agent renews its Lease, and
// DefaultStaleAfter how long a Lease may go unrenewed before the agent is
// taken for lost: three missed renewals. An agent writes its own duration
// (three of its heartbeats) in leaseDurationSeconds, and readers judge
// each Lease by it; DefaultStaleAfter is for a Lease that carries none.
const (
	DefaultHeartbeat  = 10 * time.Second
	DefaultStaleAfter = 3 * DefaultHeartbeat
)

// LeaseName is the name of the Lease the agent of node holds. Lease
// names are DNS subdomains, as node names are, so every node name fits
// once the prefix leaves room (253 characters in all).
func LeaseName(node string) string { return "kubeadmcfg-agent-" + node }

// State is what an agent last found on its node: whether the node runs
// what the live ClusterConfiguration renders to, and if not, which
// components differ.
type State struct {
	// AgentVersion is the plugin version the agent runs.
	AgentVersion string `json:"agentVersion"`
	// InSync is true when every component's running manifest is what the
	// live ClusterConfiguration (LiveHash, at LiveResourceVersion) renders
	// to on this node.
	InSync bool `json:"inSync"`
	// Differs names the components whose running manifest differs.
	Differs             []string `json:"differs,omitempty"`
	LiveHash            string   `json:"liveHash,omitempty"`
	LiveResourceVersion string   `json:"liveResourceVersion,omitempty"`
	// LastKnownGood is the backup this node last ran healthy on.
	LastKnownGood string `json:"lastKnownGood,omitempty"`
	// CheckedAt is when the state was found, on the API server's clock
	// (RFC 3339).
	CheckedAt string `json:"checkedAt"`
	// KubeadmVersions are the Kubernetes versions whose kubeadm the agent
	// finds on its node (its --kubeadm-template with {version} matched),
	// sorted: an upgrade's preflight refuses a target missing on a node.
	KubeadmVersions []string `json:"kubeadmVersions,omitempty"`
	// Etcd is the health of the node's local etcd member, as the agent
	// last checked it; nil on a node without a local member.
	Etcd *EtcdHealth `json:"etcd,omitempty"`
	// CertificateExpires is when the client certificate the agent
	// authenticates with expires (RFC 3339): a certificate made with
	// kubeadm kubeconfig user is renewed by nobody but its recipe. Empty
	// for a token, which its issuer renews (a ServiceAccount's).
	CertificateExpires string `json:"certificateExpires,omitempty"`
	// Error says why the state could not be found, when it could not;
	// InSync is then false and Differs empty.
	Error string `json:"error,omitempty"`
}

// EtcdHealth is what the agent last found of its node's etcd member.
type EtcdHealth struct {
	// Member names the member (name and ID), as etcd reports it.
	Member string `json:"member,omitempty"`
	// Healthy is true when the member answered and its cluster passed
	// the checks a change of it would need (every member healthy, no
	// alarm); Error says why not.
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
}

// CertificateWarning is how long before its agent's certificate expires a
// node is warned about: what `nodes` says, and what monitoring alerts on.
const CertificateWarning = 30 * 24 * time.Hour

// CertificateExpiry is when the agent's certificate expires; ok is false
// when the state names none (or an unreadable time).
func (s *State) CertificateExpiry() (t time.Time, ok bool) {
	if s == nil || s.CertificateExpires == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s.CertificateExpires)
	return t, err == nil
}

// FromLease reads the node and the state an agent Lease carries. ok is false
// for a Lease that is not an agent's; a state that does not decode is an
// error (exit 3), never taken for "in sync".
func FromLease(l *coordinationv1.Lease) (node string, state *State, ok bool, err error) {
	node, ok = l.Labels[Label]
	if !ok || l.Name != LeaseName(node) {
		return "", nil, false, nil
	}
	raw, published := l.Annotations[Annotation]
	if !published {
		return node, nil, true, nil
	}
	var s State
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return node, nil, true, exitcode.Invalidf("lease %s/%s: annotation %s is not a node state: %w", l.Namespace, l.Name, Annotation, err)
	}
	return node, &s, true, nil
}

// SetState stores s on the agent's Lease.
func SetState(l *coordinationv1.Lease, s State) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode the node state: %w", err)
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[Annotation] = string(raw)
	return nil
}

// LastSeen is how long ago, on the API server's clock now, the agent's
// Lease was last renewed. ok is false when it carries no renewTime.
func LastSeen(l *coordinationv1.Lease, now time.Time) (age time.Duration, ok bool) {
	if l.Spec.RenewTime == nil {
		return 0, false
	}
	return now.Sub(l.Spec.RenewTime.Time), true
}

// Alive reports whether the agent renewed its Lease within
// StaleAfter(l, staleAfter) of now. now must be the API server's time
// (engine.ServerClock): the agent stamps renewTime with the server's clock
// too, so no host's own clock decides. (An HA control plane has one clock
// per API server: Observer judges a Lease without comparing them.)
func Alive(l *coordinationv1.Lease, now time.Time, staleAfter time.Duration) bool {
	age, ok := LastSeen(l, now)
	return ok && age <= StaleAfter(l, staleAfter)
}

// StaleAfter is how long l may go unrenewed before its agent is taken for
// lost: override when positive, else the Lease's own leaseDurationSeconds
// (three of its agent's heartbeats, whatever the agent's
// --heartbeat-interval), else DefaultStaleAfter.
func StaleAfter(l *coordinationv1.Lease, override time.Duration) time.Duration {
	switch {
	case override > 0:
		return override
	case l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0:
		return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return DefaultStaleAfter
}
