package rollout

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The invariants of a status. The transitions keep them; decoding checks
// them, so that a record edited by hand into something the transitions
// could never make is reported as damaged and no agent acts on it; encoding
// checks them, so that none is ever written.

// check returns every invariant s breaks, in one error.
func (s *Status) check() error {
	var errs []string
	add := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }

	if s.ID < 1 {
		add("id must be at least 1, not %d", s.ID)
	}
	switch s.Kind {
	case KindRollout, KindUndo, KindRevert:
	default:
		add("kind must be one of %s, %s, %s, not %q", KindRollout, KindUndo, KindRevert, s.Kind)
	}
	switch s.Phase {
	case Progressing, Reverting:
		if s.Phase != running(s.Kind) {
			add("phase %s is not a phase of a rollout of kind %s", s.Phase, s.Kind)
		}
	case Paused, Succeeded, Failed:
	case AwaitingConfirm:
		if s.Try == nil || s.Try.Deadline.IsZero() {
			add("phase AwaitingConfirm needs a try with a deadline")
		}
	default:
		add("phase must be one of %s, %s, %s, %s, %s, %s, not %q", Progressing, Paused, AwaitingConfirm, Reverting, Succeeded, Failed, s.Phase)
	}
	if err := checkHash(s.Target.Hash); err != nil {
		add("target.hash %v", err)
	}
	if s.Previous != nil {
		if err := checkHash(s.Previous.Hash); err != nil {
			add("previous.hash %v", err)
		}
	} else if s.Kind != KindRollout {
		add("a rollout of kind %s needs a previous document", s.Kind)
	} else if s.Try != nil {
		add("a rollout on trial needs a previous document to revert to")
	}
	if u := s.Untracked; u != nil {
		switch {
		case s.Kind != KindRollout || s.Previous == nil:
			add("untracked needs a rollout of kind %s with a previous document", KindRollout)
		case s.Try != nil:
			add("a rollout on trial needs its previous document known exactly, not untracked writes")
		case len(u.Fields) > MaxUntrackedFields || u.FieldsOmitted < 0:
			add("untracked lists %d fields (and %d omitted), at most %d", len(u.Fields), u.FieldsOmitted, MaxUntrackedFields)
		}
	}
	if s.Try != nil && (s.Kind != KindRollout || s.Try.Duration.Duration <= 0) {
		add("try needs a rollout of kind %s and a positive duration", KindRollout)
	}
	if s.Kind == KindRollout && len(s.Nodes) == 0 {
		add("a rollout of kind %s needs at least one node", KindRollout)
	}
	if s.Canary < 0 || s.Canary > 0 && s.Canary >= len(s.Nodes) {
		add("canary must be from 0 to %d, not %d", max(0, len(s.Nodes)-1), s.Canary)
	}
	errs = append(errs, s.checkNodes()...)
	errs = append(errs, s.checkAbandoned()...)
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// checkNodes checks the order and the node entries: never two nodes in
// progress, no node past one not done successfully, no node started twice.
func (s *Status) checkNodes() []string {
	var errs []string
	add := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	names := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		names[i] = n.Name
	}
	if !slices.Equal(names, s.Order) {
		add("order [%s] does not list the nodes [%s]", strings.Join(s.Order, ", "), strings.Join(names, ", "))
	}
	var inProgress, failed []string
	blocker := "" // the first node not done successfully
	for i, n := range s.Nodes {
		switch {
		case n.Name == "":
			add("nodes[%d] has no name", i)
		case slices.Contains(names[:i], n.Name):
			add("node %s is listed twice", n.Name)
		}
		abandonedFrom, abandoned := s.abandoned(n.Name)
		switch {
		case n.Phase == NodePending:
			if n.Starts != 0 || n.Resumes != 0 {
				add("node %s is Pending but was started", n.Name)
			}
		case abandoned && abandonedFrom == NodePending && n.Phase == NodeRollbackFailed:
			// Given up on before its turn: never started, wherever it stood.
			if n.Starts != 0 || n.Resumes != 0 {
				add("node %s was abandoned pending, but was started", n.Name)
			}
		case n.Phase == NodeInProgress, n.Phase == NodeUpdated, n.Phase == NodeUnchanged, n.Phase == NodeRolledBack, n.Phase == NodeRollbackFailed:
			if n.Starts != 1 {
				add("node %s is %s with %d starts: a node starts exactly once", n.Name, n.Phase, n.Starts)
			}
			if blocker != "" {
				add("node %s is %s, but %s before it is not done", n.Name, n.Phase, blocker)
			}
		default:
			add("node %s: phase must be one of %s, %s, %s, %s, %s, %s, not %q", n.Name, NodePending, NodeInProgress,
				NodeUpdated, NodeUnchanged, NodeRolledBack, NodeRollbackFailed, n.Phase)
		}
		if n.Resumes < 0 {
			add("node %s has %d resumes", n.Name, n.Resumes)
		}
		switch n.Phase {
		case NodeInProgress:
			inProgress = append(inProgress, n.Name)
		case NodeRolledBack, NodeRollbackFailed:
			failed = append(failed, n.Name)
		}
		if blocker == "" && !n.Phase.Done() {
			blocker = n.Name
		}
	}
	if len(inProgress) > 1 {
		add("nodes %s are in progress at once", strings.Join(inProgress, ", "))
	}
	if len(inProgress) > 0 && !s.Phase.Active() {
		add("node %s is in progress in a rollout that is %s", inProgress[0], s.Phase)
	}
	if len(failed) > 0 && s.Phase != Failed {
		add("node %s is %s, but the rollout is %s, not Failed", failed[0], s.find(failed[0]).Phase, s.Phase)
	}
	if (s.Phase == Succeeded || s.Phase == AwaitingConfirm) && blocker != "" {
		add("the rollout is %s, but node %s is not done", s.Phase, blocker)
	}
	if s.Phase == Succeeded && s.Kind != KindRollout && !s.DocumentRestored {
		add("a rollout of kind %s succeeds only once its document is restored", s.Kind)
	}
	return errs
}

// checkAbandoned checks the nodes given up on: each once, abandoned in
// progress or pending, RollbackFailed in a rollout (which is then Failed),
// gone from a take-back's order; and an undo's nodes left out.
func (s *Status) checkAbandoned() []string {
	var errs []string
	add := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	var seen []string
	for _, a := range s.Abandoned {
		if a.Node == "" || slices.Contains(seen, a.Node) {
			add("abandoned names node %q twice or not at all", a.Node)
			continue
		}
		seen = append(seen, a.Node)
		if a.Phase != NodeInProgress && a.Phase != NodePending {
			add("node %s was abandoned %s: only a node in progress or pending is abandoned", a.Node, a.Phase)
		}
		n := s.find(a.Node)
		switch {
		case s.Kind != KindRollout && n != nil:
			add("node %s was abandoned, but the %s still goes to it", a.Node, s.Kind)
		case s.Kind == KindRollout && (n == nil || n.Phase != NodeRollbackFailed):
			add("node %s was abandoned, but is not RollbackFailed in the rollout", a.Node)
		case s.Kind == KindRollout && s.Phase != Failed:
			add("node %s was abandoned, but the rollout is %s, not Failed", a.Node, s.Phase)
		}
	}
	for i, n := range s.LeftOut {
		switch {
		case s.Kind != KindUndo:
			add("a rollout of kind %s leaves no node out", s.Kind)
		case n == "" || slices.Contains(s.LeftOut[:i], n) || s.find(n) != nil:
			add("node %q is left out twice, not at all, or goes in the undo anyway", n)
		}
	}
	return errs
}

// checkHash checks the form of a recorded hash: "sha256:" and 64 hex digits.
func checkHash(h string) error {
	sum, ok := strings.CutPrefix(h, "sha256:")
	if b, err := hex.DecodeString(sum); !ok || err != nil || len(b) != 32 || strings.ToLower(sum) != sum {
		return fmt.Errorf("%q is not sha256: and 64 lowercase hex digits", h)
	}
	return nil
}
