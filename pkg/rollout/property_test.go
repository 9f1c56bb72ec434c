package rollout

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// TestInvariantsUnderRandomOperations runs random operations, most of them
// out of turn, from seeded generators, and checks after each one, with
// its own counting rather than the package's check:
//   - never two nodes in progress, and no node past one not done
//     successfully (so none after a rollback);
//   - a node starts only on its turn, and at most once per rollout,
//     counting the begins that reported success;
//   - a refused or idle transition leaves the record as it was;
//   - each rollout is written to the history once, in order;
//   - the record, once changed, encodes and decodes to itself.
func TestInvariantsUnderRandomOperations(t *testing.T) {
	succeeded := map[string]int{}
	for seed := range uint64(60) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			p := &property{t: t, rng: rand.New(rand.NewPCG(seed, 21)), r: &Record{}, begun: map[string]int{}}
			for step := range 300 {
				name, err := p.step()
				if err == nil {
					succeeded[name]++
				}
				if t.Failed() {
					t.Fatalf("after step %d (%s): %v", step, name, err)
				}
			}
		})
	}
	// The walk must reach every transition, or it proves little.
	for _, op := range []string{"start", "begin turn", "begin any", "resume node", "finish", "pause", "resume", "confirm", "expire", "undo", "restored", "abandon"} {
		if succeeded[op] == 0 {
			t.Errorf("%s never succeeded: %v", op, succeeded)
		}
	}
	t.Logf("transitions made: %v", succeeded)
}

type property struct {
	t     *testing.T
	rng   *rand.Rand
	r     *Record
	sec   int
	begun map[string]int // successful begins, by rollout id and node
}

var allNodes = []string{"cp-0", "cp-1", "cp-2", "cp-3"}

func (p *property) pick(names []string) string { return names[p.rng.IntN(len(names))] }

// step makes one random operation and checks the record after it.
func (p *property) step() (string, error) {
	t, r := p.t, p.r
	p.sec += p.rng.IntN(8)
	c := by(p.pick([]string{"alice", "bob", "agent"}), p.sec)
	before := clone(r)
	turnBefore, _ := r.Status.Turn()
	id := int64(1)
	if r.Status != nil {
		id = r.Status.ID - int64(p.rng.IntN(5)/4) // now and then a late agent
	}
	node := p.pick(allNodes)
	if r.Status != nil && len(r.Status.Order) > 0 && p.rng.IntN(4) > 0 {
		node = p.pick(r.Status.Order)
	}
	var name string
	changed, err := true, error(nil)
	switch p.rng.IntN(12) {
	case 0:
		name = "start"
		s := Spec{Target: [][]byte{docV1, docV2, docV3}[p.rng.IntN(3)], Nodes: p.order(), Try: time.Duration(p.rng.IntN(2)) * 5 * time.Second}
		s.Canary = p.rng.IntN(len(s.Nodes) + 1)
		switch p.rng.IntN(4) {
		case 0, 1:
			s.Previous = docV1
		case 2: // kubeadm-config says what the target replaced, or is wrong
			s.Replaced = Hash([][]byte{docV1, docV2, docV3}[p.rng.IntN(3)])
		}
		err = r.Start(c, s)
		if err == nil && r.Status.Try != nil && r.Status.Untracked != nil {
			t.Errorf("a rollout on trial with untracked writes: %+v", r.Status.Untracked)
		}
	case 1, 2:
		name = "begin turn"
		if turnBefore == "" {
			return name, errNoTurn
		}
		err = r.BeginNode(c, id, turnBefore, []string{"kube-apiserver"}, "b")
		node = turnBefore
	case 3:
		name = "begin any"
		err = r.BeginNode(c, id, node, nil, "")
	case 4:
		name = "resume node"
		err = r.ResumeNode(c, id, node)
	case 5, 6:
		name = "finish"
		if s := r.Status; s != nil && s.inProgress() != nil && p.rng.IntN(4) > 0 {
			node = s.inProgress().Name
		}
		outcome := []NodePhase{NodeUpdated, NodeUpdated, NodeUnchanged, NodeRolledBack, NodeRollbackFailed, NodePending}[p.rng.IntN(6)]
		err = r.FinishNode(c, id, node, Outcome{Phase: outcome})
	case 7:
		name = "pause"
		changed, err = r.Pause(c)
	case 8:
		name = "resume"
		changed, err = r.Resume(c)
	case 9:
		name = "confirm"
		changed, err = r.Confirm(c)
	case 10:
		switch p.rng.IntN(3) {
		case 0:
			name = "expire"
			changed, err = r.ExpireTry(c)
		case 1: // an operator gives up on a node whose agent is gone
			name = "abandon"
			changed, err = r.Abandon(c, node)
			if err == nil && changed {
				p.checkAbandoned(before, node)
			}
		default:
			name = "undo"
			force := p.rng.IntN(2) == 0
			untracked := r.Status != nil && r.Status.Untracked != nil
			err = r.Undo(c, force)
			if err == nil && untracked && !force {
				t.Errorf("an undo of a rollout with untracked writes went ahead unforced")
			}
			if err == nil {
				for _, a := range before.Status.Abandoned {
					if slices.Contains(r.Status.Order, a.Node) {
						t.Errorf("the undo of rollout %d goes to %s, which was abandoned", before.Status.ID, a.Node)
					}
				}
			}
		}
	case 11:
		name = "restored"
		changed, err = r.MarkDocumentRestored(c, "")
	}
	if err != nil || !changed {
		if d := diff(before, r); d != "" {
			t.Errorf("%s refused (%v) or idle, yet it changed the record (-want +got):\n%s", name, err, d)
		}
		switch exitcode.FromError(err) {
		case exitcode.OK, exitcode.Usage, exitcode.Invalid, exitcode.Conflict, exitcode.NotFound:
		default:
			t.Errorf("%s: an error without a code of its own: %v", name, err)
		}
	}
	if err == nil && (name == "begin turn" || name == "begin any") {
		key := fmt.Sprint(r.Status.ID, "/", node)
		p.begun[key]++
		if p.begun[key] > 1 {
			t.Errorf("node %s started %d times in rollout %d", node, p.begun[key], r.Status.ID)
		}
		if node != turnBefore {
			t.Errorf("node %s started on %q's turn", node, turnBefore)
		}
	}
	p.checkNodes()
	p.checkHistory(before)
	if err == nil && changed {
		p.checkEncoding()
	}
	if err == nil && !changed {
		err = errIdle
	}
	return name, err
}

var (
	errNoTurn = fmt.Errorf("nobody's turn")
	errIdle   = fmt.Errorf("nothing changed")
)

// order is a random non-empty order of some of allNodes.
func (p *property) order() []string {
	nodes := slices.Clone(allNodes)
	p.rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	return nodes[:1+p.rng.IntN(len(nodes))]
}

func (p *property) checkNodes() {
	s := p.r.Status
	if s == nil {
		return
	}
	inProgress := 0
	blocked := ""
	for _, n := range s.Nodes {
		if n.Phase == NodeInProgress {
			inProgress++
		}
		if n.Starts > 1 || n.Starts < 0 {
			p.t.Errorf("node %s has %d starts", n.Name, n.Starts)
		}
		pendingAbandoned := slices.ContainsFunc(s.Abandoned, func(a Abandonment) bool { return a.Node == n.Name && a.Phase == NodePending })
		if n.Phase != NodePending && !pendingAbandoned && blocked != "" {
			p.t.Errorf("node %s is %s after %s, which is not done", n.Name, n.Phase, blocked)
		}
		if blocked == "" && n.Phase != NodeUpdated && n.Phase != NodeUnchanged {
			blocked = n.Name
		}
	}
	if inProgress > 1 {
		p.t.Errorf("%d nodes in progress at once: %v", inProgress, phases(s))
	}
}

// checkAbandoned checks an abandon of node that changed the record: a
// rollout ends Failed with the node RollbackFailed; a take-back goes on
// without it; nobody's turn is ever the abandoned node's.
func (p *property) checkAbandoned(before *Record, node string) {
	s := p.r.Status
	if s.ID != before.Status.ID {
		p.t.Errorf("abandon started rollout %d", s.ID)
	}
	if next, ok := s.Turn(); ok && next == node {
		p.t.Errorf("node %s is abandoned, yet it is its turn", node)
	}
	if s.Kind == KindRollout {
		if n, _ := s.Lookup(node); s.Phase != Failed || n.Phase != NodeRollbackFailed {
			p.t.Errorf("abandoned %s in a rollout: rollout %s, node %s", node, s.Phase, n.Phase)
		}
		return
	}
	if slices.Contains(s.Order, node) {
		p.t.Errorf("the %s still goes to %s, which was abandoned", s.Kind, node)
	}
}

func (p *property) checkHistory(before *Record) {
	h := p.r.History
	if len(h) > HistoryLength {
		p.t.Errorf("%d history entries", len(h))
	}
	for i := 1; i < len(h); i++ {
		if h[i].ID <= h[i-1].ID {
			p.t.Errorf("history ids out of order or twice: %d after %d", h[i].ID, h[i-1].ID)
		}
	}
	s := p.r.Status
	if s != nil && (s.Phase == Succeeded || s.Phase == Failed) {
		if last := h[len(h)-1]; last.ID != s.ID || last.Outcome != s.Phase {
			p.t.Errorf("rollout %d is %s, but the history ends with %d %s", s.ID, s.Phase, last.ID, last.Outcome)
		}
	}
	if before.Status != nil && s != nil && s.ID != before.Status.ID && before.Status.Phase.Active() {
		// Taken over while active: the history says what became of it.
		if !slices.ContainsFunc(h, func(e HistoryEntry) bool {
			return e.ID == before.Status.ID && (e.Outcome == Undone || e.Outcome == Reverted)
		}) {
			p.t.Errorf("rollout %d was taken over while %s, and the history does not say so", before.Status.ID, before.Status.Phase)
		}
	}
}

func (p *property) checkEncoding() {
	cm := &corev1.ConfigMap{}
	if err := p.r.ToConfigMap(cm); err != nil {
		p.t.Errorf("encode: %v", err)
		return
	}
	got, err := FromConfigMap(cm)
	if err != nil {
		p.t.Errorf("decode: %v", err)
		return
	}
	if d := diff(p.r, got); d != "" {
		p.t.Errorf("round trip (-want +got):\n%s", d)
	}
}
