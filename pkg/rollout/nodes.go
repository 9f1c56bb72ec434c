package rollout

import (
	"fmt"
	"slices"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// A node's turn: the only way a node is started, one at a time, in order.

// Turn returns the node whose turn it is, if anyone's: the rollout hands out
// turns (Progressing or Reverting), no node is in progress, every node
// before it in the order is done successfully, and it is Pending. An agent
// starts its node only on its turn, so no two nodes are ever in progress
// and no node goes after one that failed.
func (s *Status) Turn() (node string, ok bool) {
	if s == nil {
		return "", false
	}
	next, err := s.turn()
	return next, err == nil
}

// turn is Turn, with why nobody's turn it is.
func (s *Status) turn() (string, error) {
	if s.Phase != running(s.Kind) {
		return "", fmt.Errorf("rollout %d is %s", s.ID, s.Phase)
	}
	for _, n := range s.Nodes {
		switch {
		case n.Phase.Done():
			continue
		case n.Phase == NodePending:
			return n.Name, nil
		default:
			return "", fmt.Errorf("node %s is %s", n.Name, n.Phase)
		}
	}
	return "", fmt.Errorf("every node of rollout %d is done", s.ID)
}

// Lookup returns a copy of node's entry, so that an agent finds its own;
// ok is false when the rollout does not include node. The entry changes
// only through the transitions.
func (s *Status) Lookup(node string) (entry Node, ok bool) {
	if n := s.find(node); n != nil {
		return *n, true
	}
	return Node{}, false
}

func (s *Status) find(node string) *Node {
	if s == nil {
		return nil
	}
	for i := range s.Nodes {
		if s.Nodes[i].Name == node {
			return &s.Nodes[i]
		}
	}
	return nil
}

// entry returns node's entry in rollout id, refusing a report about another
// rollout (a late agent after an undo) or a node the rollout does not name.
func (r *Record) entry(id int64, node string) (*Node, error) {
	s := r.Status
	if s == nil {
		return nil, exitcode.New(exitcode.NotFound, ErrNoRollout)
	}
	if s.ID != id {
		return nil, exitcode.Conflictf("rollout %d is no longer the current one (rollout %d is); nothing was changed for node %s", id, s.ID, node)
	}
	n := s.find(node)
	if n == nil {
		return nil, exitcode.Conflictf("node %s is not part of rollout %d (its nodes: %s)", node, id, joinNames(s.Order))
	}
	return n, nil
}

// BeginNode starts node's turn in rollout id: Pending -> InProgress, with
// the agent, the time, the components it plans to change and the config
// backup that holds its manifests from before, all in the same write. It
// is refused unless it is node's turn.
func (r *Record) BeginNode(c Clock, id int64, node string, components []string, backup string) error {
	n, err := r.entry(id, node)
	if err != nil {
		return err
	}
	if n.Phase == NodeInProgress {
		return exitcode.Conflictf("node %s is already in progress in rollout %d (started by %s at %s); resume it instead of starting it again",
			node, id, n.Agent, stamp(n.StartedAt))
	}
	turn, err := r.Status.turn()
	if err != nil {
		return exitcode.Conflictf("it is not node %s's turn in rollout %d: %w", node, id, err)
	}
	if turn != node {
		return exitcode.Conflictf("it is not node %s's turn in rollout %d: node %s goes first", node, id, turn)
	}
	*n = Node{Name: n.Name, Phase: NodeInProgress, Components: slices.Clone(components), Agent: c.By,
		StartedAt: c.now(), Starts: n.Starts + 1, Backup: backup}
	return nil
}

// ResumeNode is a restarted agent taking over node, which it finds in
// progress: it counts a resume, not a start, and names the new agent.
func (r *Record) ResumeNode(c Clock, id int64, node string) error {
	n, err := r.entry(id, node)
	if err != nil {
		return err
	}
	if n.Phase != NodeInProgress {
		return exitcode.Conflictf("node %s is %s in rollout %d, not in progress: there is nothing to resume", node, n.Phase, id)
	}
	n.Resumes++
	n.Agent = c.By
	return nil
}

// Outcome is how a node's turn ended, as its agent reports it.
type Outcome struct {
	// Phase is NodeUpdated, NodeUnchanged, NodeRolledBack or
	// NodeRollbackFailed.
	Phase NodePhase
	// Components are those the turn changed (or tried to).
	Components []string
	Message    string
}

// FinishNode ends node's turn in rollout id and moves the rollout on; only
// the agent that began or last resumed the turn may (c.By must be the
// entry's agent), so that no agent reports another node's outcome, nor an
// agent that was taken over the outcome of a turn now someone else's. A
// node done successfully may pause it (the canary), end it (the last node:
// Succeeded, or AwaitingConfirm with the try's deadline set), or let the
// next node go; a node that rolled back, or whose rollback failed, fails
// it, and the nodes after it stay Pending.
func (r *Record) FinishNode(c Clock, id int64, node string, o Outcome) error {
	n, err := r.entry(id, node)
	if err != nil {
		return err
	}
	switch o.Phase {
	case NodeUpdated, NodeUnchanged, NodeRolledBack, NodeRollbackFailed:
	default:
		return exitcode.Usagef("a node's outcome is one of %s, %s, %s, %s, not %q",
			NodeUpdated, NodeUnchanged, NodeRolledBack, NodeRollbackFailed, o.Phase)
	}
	if n.Phase != NodeInProgress {
		return exitcode.Conflictf("node %s is %s in rollout %d, not in progress; its outcome %s was not recorded", node, n.Phase, id, o.Phase)
	}
	if n.Agent != c.By {
		return exitcode.Conflictf("node %s is in progress in rollout %d for %s, not %s: only the agent that began or resumed a node's turn reports its outcome",
			node, id, n.Agent, c.By)
	}
	n.Phase, n.FinishedAt, n.Components, n.Message = o.Phase, c.now(), slices.Clone(o.Components), upgrade.BoundReason(o.Message)
	s := r.Status
	switch o.Phase {
	case NodeRolledBack:
		r.finish(c, Failed, because(fmt.Sprintf("node %s failed and was rolled back", node), o.Message))
		return nil
	case NodeRollbackFailed:
		r.finish(c, Failed, because(fmt.Sprintf("node %s failed and so did its rollback, a component of it may be down", node), o.Message))
		return nil
	}
	done := 0
	for _, e := range s.Nodes {
		if e.Phase.Done() {
			done++
		}
	}
	switch {
	case done == len(s.Nodes):
		r.nodesDone(c)
	case s.Canary > 0 && done == s.Canary && s.Phase == running(s.Kind):
		s.Phase, s.Message = Paused, fmt.Sprintf("paused after %d of %d nodes (canary); resume to go on", done, len(s.Nodes))
	}
	return nil
}

// nodesDone moves a rollout whose every node is done to where it waits or
// ends.
func (r *Record) nodesDone(c Clock) {
	s := r.Status
	switch {
	case s.Kind == KindRollout && s.Try != nil:
		s.Try.Deadline = c.now().Add(s.Try.Duration.Duration)
		s.Phase, s.Message = AwaitingConfirm, fmt.Sprintf("every node is done; confirm by %s, or it is reverted", stamp(s.Try.Deadline))
	case s.Kind != KindRollout && !s.DocumentRestored:
		s.Message = "every node is done; waiting for kubeadm-config to be put back"
	default:
		r.finish(c, Succeeded, "")
	}
}

// because joins what happened and why, when the agent said why.
func because(what, why string) string {
	if why == "" {
		return what
	}
	return what + ": " + why
}
