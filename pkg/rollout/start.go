package rollout

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// How a rollout begins: started with a new document, or taken back by an
// undo or the expiry of its try.

// Spec is what a rollout is started with.
type Spec struct {
	// Target is the document to pin, byte for byte as kubeadm-config holds
	// it, and TargetResourceVersion the version of kubeadm-config it was
	// read from.
	Target                []byte
	TargetResourceVersion string
	// Source is where Target came from: SourceLive (the default) for
	// rollout start, or the write that made it.
	Source Source
	// Previous is what the nodes ran before, when the caller knows it: the
	// document a patch, edit or restore replaced. Empty, the record's last
	// good target is taken, if there is one (see Replaced).
	Previous                []byte
	PreviousResourceVersion string
	// Replaced is the hash of the document Target replaced in
	// kubeadm-config, as the engine stamped it (engine.Replaced); empty
	// when that is unknown. Without Previous, the last good target is
	// exactly what Target replaced only when it is Replaced (or Target
	// itself); otherwise kubeadm-config was written outside rollouts since,
	// and the rollout records what a take-back would drop (Untracked).
	Replaced string
	// Nodes are the nodes in the order they go.
	Nodes []string
	// Canary pauses the rollout after this many nodes are done (0: never).
	Canary int
	// Try puts the rollout on trial: unless confirmed within Try after its
	// last node is done, it is reverted (0: no trial).
	Try     time.Duration
	Message string
}

// ErrNoRollout is returned (with exit code 5) by transitions that need a
// rollout when none was ever started.
var ErrNoRollout = errors.New("no rollout is recorded")

// Start begins a rollout of spec.Target. It is refused while another
// rollout is active (exit 4, naming it). Its previous document is the one
// the target replaced: spec.Previous, or the last good target when the
// target replaced exactly that (spec.Replaced). When the target replaced
// something else, the last good target is still recorded as previous, with
// what going back to it would drop (Untracked). A try is refused (exit 4)
// unless its previous document is known exactly, so that its revert can
// drop nothing but the tried change: a *DropError says what it would drop.
func (r *Record) Start(c Clock, spec Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if err := r.Idle(); err != nil {
		return err
	}
	prev, prevRef := r.lastGood()
	var untracked *Untracked
	switch {
	case len(spec.Previous) > 0:
		prev, prevRef = spec.Previous, &Ref{Hash: Hash(spec.Previous), ResourceVersion: spec.PreviousResourceVersion}
	case prevRef != nil && prevRef.Hash != Hash(spec.Target) && prevRef.Hash != spec.Replaced:
		untracked = between(prev, prevRef.ResourceVersion, spec.Target, spec.TargetResourceVersion)
	}
	if spec.Try > 0 && prevRef == nil {
		return exitcode.Conflictf("no previous document is recorded, so a rollout on trial would have nothing to revert to")
	}
	if spec.Try > 0 && untracked != nil {
		return exitcode.New(exitcode.Conflict, &DropError{Previous: *prevRef, Untracked: *untracked})
	}
	source := spec.Source
	if source == "" {
		source = SourceLive
	}
	next := &Status{
		ID: r.nextID(), Kind: KindRollout, Phase: Progressing,
		Target:   Ref{Hash: Hash(spec.Target), ResourceVersion: spec.TargetResourceVersion, Source: source},
		Previous: prevRef, Untracked: untracked, Order: slices.Clone(spec.Nodes), Canary: spec.Canary,
		StartedBy: c.By, StartedAt: c.now(), Message: upgrade.BoundReason(spec.Message), Nodes: pending(spec.Nodes),
	}
	if spec.Try > 0 {
		next.Try = &Try{Duration: metav1.Duration{Duration: spec.Try}}
	}
	r.Target, r.Previous, r.Status = slices.Clone(spec.Target), slices.Clone(prev), next
	return nil
}

// Validate checks spec as Start will, without a record: the target, the
// source, the order, the canary and the try.
func (spec *Spec) Validate() error {
	if len(spec.Target) == 0 {
		return exitcode.Invalidf("the target document is empty")
	}
	switch spec.Source {
	case "", SourceLive, SourcePatch, SourceEdit, SourceRestore:
	default:
		return exitcode.Usagef("a rollout's source is one of %s, %s, %s, %s, not %q", SourceLive, SourcePatch, SourceEdit, SourceRestore, spec.Source)
	}
	if len(spec.Nodes) == 0 {
		return exitcode.Usagef("a rollout needs at least one node")
	}
	for i, n := range spec.Nodes {
		if n == "" {
			return exitcode.Usagef("node %d of the order has no name", i+1)
		}
		if slices.Contains(spec.Nodes[:i], n) {
			return exitcode.Usagef("node %s is named twice in the order", n)
		}
	}
	if spec.Canary < 0 || spec.Canary > 0 && spec.Canary >= len(spec.Nodes) {
		return exitcode.Usagef("the canary must be from 0 to %d (fewer than the %d nodes), not %d", len(spec.Nodes)-1, len(spec.Nodes), spec.Canary)
	}
	if spec.Try < 0 {
		return exitcode.Usagef("the try must not be negative, not %s", spec.Try)
	}
	return nil
}

// lastGood is what the nodes run as far as the record knows: the target of
// a rollout that succeeded, or what a failed one carried as its previous
// (the nodes after the failed one never left it). Nil when unknown.
func (r *Record) lastGood() ([]byte, *Ref) {
	s := r.Status
	switch {
	case s == nil:
		return nil, nil
	case s.Phase == Succeeded:
		return r.Target, &Ref{Hash: s.Target.Hash, ResourceVersion: s.Target.ResourceVersion}
	case s.Phase == Failed && s.Previous != nil:
		return r.Previous, &Ref{Hash: s.Previous.Hash, ResourceVersion: s.Previous.ResourceVersion}
	}
	return nil, nil
}

func (r *Record) nextID() int64 {
	var id int64
	if r.Status != nil {
		id = r.Status.ID
	}
	for _, h := range r.History {
		id = max(id, h.ID)
	}
	return id + 1
}

func pending(names []string) []Node {
	nodes := make([]Node, len(names))
	for i, n := range names {
		nodes[i] = Node{Name: n, Phase: NodePending}
	}
	return nodes
}

// Idle says whether a rollout may start now: nil when none is active, else
// an error with exit code 4 naming the active one and what to do about it.
func (r *Record) Idle() error {
	if s := r.Status; s != nil && s.Phase.Active() {
		return s.activeError()
	}
	return nil
}

func (s *Status) activeError() error {
	hint := "wait for it to end"
	switch s.Phase {
	case Paused:
		hint = "resume it, or undo it"
	case AwaitingConfirm:
		hint = "confirm it, or undo it"
	}
	return exitcode.Conflictf("another rollout is active: rollout %d (%s) is %s, started by %s at %s; %s",
		s.ID, s.Kind, s.Phase, s.StartedBy, stamp(s.StartedAt), hint)
}

// between is what lies between the previous document prev (at
// resourceVersion from) and target (at to) that no rollout carried.
func between(prev []byte, from string, target []byte, to string) *Untracked {
	u := &Untracked{FromResourceVersion: from, ToResourceVersion: to}
	a, aerr := clusterconfig.Parse(prev)
	b, berr := clusterconfig.Parse(target)
	if aerr == nil && berr == nil {
		u.Fields = clusterconfig.Diff(a, b)
		if n := len(u.Fields); n > MaxUntrackedFields {
			u.Fields, u.FieldsOmitted = u.Fields[:MaxUntrackedFields], n-MaxUntrackedFields
		}
	}
	return u
}

// Drops says what going back to the previous document prev would drop
// besides the rollout's own change.
func (u *Untracked) Drops(prev Ref) string {
	changes := "drops every write in between"
	if len(u.Fields) > 0 {
		changes = "changes " + strings.Join(u.Fields, ", ")
		if u.FieldsOmitted > 0 {
			changes += fmt.Sprintf(" and %d more fields", u.FieldsOmitted)
		}
	}
	return fmt.Sprintf("kubeadm-config was written outside rollouts since %s (resourceVersion %s -> %s); going back to it %s",
		Short(prev.Hash), orUnknown(u.FromResourceVersion), orUnknown(u.ToResourceVersion), changes)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// DropError is a take-back refused because it would drop writes of
// kubeadm-config that no rollout carried (exit 4): a try whose previous
// document is not known exactly, or the undo of a rollout started so
// (Status.Untracked), which only a forced undo makes.
type DropError struct {
	// ID is the rollout an undo would take back; 0 for a try refused at
	// its start.
	ID        int64
	Previous  Ref
	Untracked Untracked
}

func (e *DropError) Error() string {
	if e.ID == 0 {
		return "a rollout on trial needs the document it would revert to, and it is not known exactly: " + e.Untracked.Drops(e.Previous) + "; nothing was started"
	}
	return fmt.Sprintf("undoing rollout %d would drop more than its own change: %s; nothing was undone", e.ID, e.Untracked.Drops(e.Previous))
}

// Undo takes the current rollout back: a new rollout of kind undo whose
// target is the undone one's previous document, over the nodes it changed
// (Updated, and RollbackFailed, whose state is unknown), in reverse order;
// a node abandoned in it is left out (LeftOut), as no agent would take it.
// A rollout that changed no node still has its document to take back (its
// first node rolled itself back, or no manifest depended on the change):
// its undo has no node, and ends once the document is put back.
// A rollout still paused or awaiting confirmation is stopped and goes to the
// history as Undone. The document is put back by the caller, which then
// calls MarkDocumentRestored; the undo does not end before that.
// A rollout whose previous document is not exactly what its target replaced
// (Untracked) is undone only when forced: otherwise a *DropError (exit 4)
// says what the undo would drop.
func (r *Record) Undo(c Clock, force bool) error {
	s := r.Status
	if s == nil {
		return exitcode.Conflictf("nothing to undo: %w", ErrNoRollout)
	}
	if n := s.inProgress(); n != nil {
		return exitcode.Conflictf("node %s is in progress in rollout %d; wait for its turn to end, then undo", n.Name, s.ID)
	}
	switch s.Phase {
	case Progressing:
		return exitcode.Conflictf("rollout %d is Progressing; pause it first, then undo it", s.ID)
	case Reverting:
		return exitcode.Conflictf("rollout %d is Reverting; wait for it to end", s.ID)
	}
	if s.Previous == nil {
		return exitcode.Conflictf("nothing to undo: no previous document is recorded for rollout %d", s.ID)
	}
	changed := slices.DeleteFunc(s.changed(NodeUpdated, NodeRollbackFailed), func(n string) bool {
		_, abandoned := s.abandoned(n)
		return abandoned
	})
	leftOut := s.leftOut()
	if len(changed) == 0 && s.Previous.Hash == s.Target.Hash {
		return exitcode.Conflictf("nothing to undo: rollout %d changed no node, and its document is the one before it", s.ID)
	}
	if s.Untracked != nil && !force {
		return exitcode.New(exitcode.Conflict, &DropError{ID: s.ID, Previous: *s.Previous, Untracked: *s.Untracked})
	}
	id := r.nextID()
	if s.Phase.Active() {
		r.finish(c, Undone, fmt.Sprintf("undone by rollout %d while %s", id, s.Phase))
	}
	message := fmt.Sprintf("undoes rollout %d", s.ID)
	if len(leftOut) > 0 {
		message += fmt.Sprintf("; leaves out %s, abandoned in rollout %d: its state is unknown", joinNames(leftOut), s.ID)
	}
	r.takeBack(c, id, KindUndo, changed, message)
	r.Status.LeftOut = leftOut
	return nil
}

// ExpireTry reverts a rollout whose try ran out unconfirmed: it goes to the
// history as Reverted, and a rollout of kind revert takes its nodes that
// were Updated back, in reverse order. Any agent may call it once the
// deadline has passed on the server's clock; one that comes second finds
// the revert made (changed false).
func (r *Record) ExpireTry(c Clock) (changed bool, err error) {
	s := r.Status
	switch {
	case s == nil:
		return false, exitcode.New(exitcode.NotFound, ErrNoRollout)
	case s.Kind == KindRevert:
		return false, nil
	case s.Phase != AwaitingConfirm:
		return false, exitcode.Conflictf("rollout %d is %s, not awaiting confirmation: it has no try to expire", s.ID, s.Phase)
	case !s.TryExpired(c.Now):
		return false, exitcode.Conflictf("the try of rollout %d ends at %s: it has not expired", s.ID, stamp(s.Try.Deadline))
	}
	id := r.nextID()
	r.finish(c, Reverted, fmt.Sprintf("not confirmed by %s; reverted by rollout %d", stamp(s.Try.Deadline), id))
	r.takeBack(c, id, KindRevert, s.changed(NodeUpdated), fmt.Sprintf("reverts rollout %d, not confirmed by %s", s.ID, stamp(s.Try.Deadline)))
	return true, nil
}

// TryExpired reports whether the rollout awaits a confirmation that did not
// come by its deadline: then ExpireTry reverts it.
func (s *Status) TryExpired(now time.Time) bool {
	return s != nil && s.Phase == AwaitingConfirm && s.Try != nil && now.After(s.Try.Deadline)
}

// changed lists, last first, the nodes in one of the phases.
func (s *Status) changed(phases ...NodePhase) []string {
	var names []string
	for i := len(s.Nodes) - 1; i >= 0; i-- {
		if slices.Contains(phases, s.Nodes[i].Phase) {
			names = append(names, s.Nodes[i].Name)
		}
	}
	return names
}

// takeBack replaces the status with rollout id of kind, from the current
// target back to its previous document over nodes.
func (r *Record) takeBack(c Clock, id int64, kind Kind, nodes []string, message string) {
	s := r.Status
	source := SourceUndo
	if kind == KindRevert {
		source = SourceRevert
	}
	r.Status = &Status{
		ID: id, Kind: kind, Phase: running(kind),
		Target:   Ref{Hash: s.Previous.Hash, ResourceVersion: s.Previous.ResourceVersion, Source: source},
		Previous: &Ref{Hash: s.Target.Hash, ResourceVersion: s.Target.ResourceVersion},
		Order:    slices.Clone(nodes), StartedBy: c.By, StartedAt: c.now(), Message: message, Nodes: pending(nodes),
	}
	if nodes == nil {
		r.Status.Order, r.Status.Nodes = []string{}, []Node{}
	}
	r.Target, r.Previous = r.Previous, r.Target
}

func (s *Status) inProgress() *Node {
	for i := range s.Nodes {
		if s.Nodes[i].Phase == NodeInProgress {
			return &s.Nodes[i]
		}
	}
	return nil
}
