package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Giving up on a node that never comes back: its agent is gone (the node
// died, was reset or deleted), so its entry would stay InProgress or
// Pending for ever, and no undo or start could happen again.

// Abandonment is a node an operator gave up on in a rollout.
type Abandonment struct {
	Node string `json:"node"`
	// Phase is what the node was when abandoned: InProgress (its state is
	// unknown) or Pending (untouched by this rollout).
	Phase NodePhase `json:"phase"`
	By    string    `json:"by"`
	At    time.Time `json:"at"`
}

// Abandon gives up on node, whose agent is gone: the caller checked that
// no agent of it is alive (pkg/operator watches its Lease). In a rollout
// (kind rollout), an InProgress or Pending node becomes RollbackFailed,
// "abandoned by WHO: state unknown", and the rollout ends Failed, so that
// undo and start work again; an undo of it leaves a node abandoned in
// progress out (LeftOut). In a take-back (an undo or a revert) the node is
// dropped from the order instead, so that the other nodes still go back
// (failing a revert would leave an undo of it as the only way on, and that
// brings the tried document back). Refused (exit 4) unless the rollout is
// active and the node in progress or pending, and in a rollout while
// another node is in progress. A node already abandoned: changed false.
func (r *Record) Abandon(c Clock, node string) (changed bool, err error) {
	s := r.Status
	switch {
	case s == nil:
		return false, exitcode.New(exitcode.NotFound, ErrNoRollout)
	case slices.ContainsFunc(s.Abandoned, func(a Abandonment) bool { return a.Node == node }):
		return false, nil
	case !s.Phase.Active():
		return false, exitcode.Conflictf("rollout %d is %s: it waits for no node, so there is none to abandon", s.ID, s.Phase)
	}
	n := s.find(node)
	switch {
	case n == nil:
		return false, exitcode.Conflictf("node %s is not part of rollout %d (its nodes: %s)", node, s.ID, joinNames(s.Order))
	case n.Phase != NodeInProgress && n.Phase != NodePending:
		return false, exitcode.Conflictf("node %s is %s in rollout %d: only a node in progress or pending can be abandoned", node, n.Phase, s.ID)
	}
	if other := s.inProgress(); s.Kind == KindRollout && other != nil && other.Name != node {
		return false, exitcode.Conflictf("node %s is in progress in rollout %d: wait for its turn to end, or abandon it first", other.Name, s.ID)
	}
	s.Abandoned = append(s.Abandoned, Abandonment{Node: node, Phase: n.Phase, By: c.By, At: c.now()})
	if s.Kind == KindRollout {
		n.Phase, n.FinishedAt, n.Message = NodeRollbackFailed, c.now(), "abandoned by "+c.By+": state unknown"
		r.finish(c, Failed, fmt.Sprintf("node %s was abandoned by %s: its state is unknown", node, c.By))
		return true, nil
	}
	s.Nodes = slices.DeleteFunc(s.Nodes, func(e Node) bool { return e.Name == node })
	s.Order = slices.DeleteFunc(s.Order, func(name string) bool { return name == node })
	if s.allDone() {
		r.nodesDone(c)
	}
	return true, nil
}

// abandoned reports whether node was abandoned in this rollout, and in
// which phase.
func (s *Status) abandoned(node string) (NodePhase, bool) {
	for _, a := range s.Abandoned {
		if a.Node == node {
			return a.Phase, true
		}
	}
	return "", false
}

// leftOut lists, last first, the nodes of s an undo of it does not take
// back: abandoned while in progress, their state unknown.
func (s *Status) leftOut() []string {
	var names []string
	for i := len(s.Nodes) - 1; i >= 0; i-- {
		if phase, ok := s.abandoned(s.Nodes[i].Name); ok && phase == NodeInProgress {
			names = append(names, s.Nodes[i].Name)
		}
	}
	return names
}

// abandonNote is what a take-back's history entry adds about the nodes it
// did not wait for.
func (s *Status) abandonNote() string {
	var notes []string
	if len(s.LeftOut) > 0 {
		notes = append(notes, "left out: "+strings.Join(s.LeftOut, ", ")+" (abandoned, its state unknown)")
	}
	if s.Kind != KindRollout && len(s.Abandoned) > 0 {
		var names []string
		for _, a := range s.Abandoned {
			names = append(names, fmt.Sprintf("%s (by %s, its state unknown)", a.Node, a.By))
		}
		notes = append(notes, "abandoned: "+strings.Join(names, ", "))
	}
	return strings.Join(notes, "; ")
}
