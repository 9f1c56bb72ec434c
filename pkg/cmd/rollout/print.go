package rollout

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	rolloutstate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// What the sub-verbs print: the result of a transition, and a rollout as a
// table.

// Result is what a sub-verb that changes the record prints with -o.
type Result struct {
	// Record is the rollout record's namespace/name.
	Record  string               `json:"record"`
	Changed bool                 `json:"changed"`
	Rollout *rolloutstate.Status `json:"rollout"`
	// Undone, Document and LeftAlone are undo's: the rollout taken back,
	// the write that put kubeadm-config back, and why it was left alone.
	Undone    int64                `json:"undone,omitempty"`
	Document  *cmdutil.WriteResult `json:"document,omitempty"`
	LeftAlone string               `json:"leftAlone,omitempty"`
	// Abandoned and AgentGone are abandon's: the node given up on, and how
	// its agent was found gone.
	Abandoned string   `json:"abandoned,omitempty"`
	AgentGone string   `json:"agentGone,omitempty"`
	Warnings  []string `json:"warnings"`
}

func (f *Flags) record() string {
	t := f.op.Record.Target()
	return t.Namespace + "/" + t.Name
}

// follow prints a transition's outcome (line, for people) and, with wait,
// follows the rollout to its end, returning the error whose exit code says
// how it ended.
func (f *Flags) follow(ctx context.Context, ch *operator.Change, line string, wait bool) error {
	return f.followResult(ctx, &Result{Changed: ch.Changed, Rollout: ch.Status, Warnings: ch.Warnings}, line, wait)
}

func (f *Flags) followResult(ctx context.Context, out *Result, line string, wait bool) error {
	out.Record = f.record()
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	human := f.Print.Human()
	if human {
		cmdutil.PrintWarnings(f.ErrOut, out.Warnings)
		fmt.Fprint(f.Out, line)
	}
	var werr error
	if wait {
		var progress func(*rolloutstate.Status)
		if human {
			progress = cmdutil.RolloutProgress(f.ErrOut)
		}
		var s *rolloutstate.Status
		s, werr = f.op.Wait(ctx, out.Rollout.ID, operator.WaitOptions{Progress: progress})
		if s != nil {
			out.Rollout = s
		}
		if werr == nil && human {
			fmt.Fprintln(f.Out, cmdutil.EndedLine(s))
		}
	}
	if !human {
		if err := f.Print.Print(f.Out, out); err != nil {
			return err
		}
	}
	return cmdutil.RolloutHint(werr)
}

// NodeRow is what status shows of a node besides its entry in the
// rollout: its agent as the API sees it, and whether the node runs the live
// document.
type NodeRow struct {
	Name         string          `json:"name"`
	Agent        nodestate.Agent `json:"agent"`
	InSync       nodestate.Sync  `json:"inSync"`
	InSyncReason string          `json:"inSyncReason,omitempty"`
}

// StatusView is what status prints with -o: the rollout as stored, and a
// row per node, in its order.
type StatusView struct {
	Record  string               `json:"record"`
	Rollout *rolloutstate.Status `json:"rollout"`
	// LiveHash is the hash of kubeadm-config's document now, which IN-SYNC
	// is judged against.
	LiveHash string    `json:"liveHash,omitempty"`
	Nodes    []NodeRow `json:"nodes"`
}

// view reads what the rows need besides the record: the agents and the
// live document's hash.
func (f *Flags) view(ctx context.Context, s *rolloutstate.Status) (*StatusView, error) {
	agents, err := f.op.Agents(ctx)
	if err != nil {
		return nil, err
	}
	live := ""
	if cm, err := f.op.Config.Get(ctx); err == nil {
		if doc, ok := cm.Data[f.op.Config.Target().Key]; ok {
			live = rolloutstate.Hash([]byte(doc))
		}
	}
	v := &StatusView{Record: f.record(), Rollout: s, LiveHash: live, Nodes: []NodeRow{}}
	for _, n := range s.Nodes {
		a := nodestate.AgentFor(agents, n.Name)
		sync, why := a.SyncWith(live)
		v.Nodes = append(v.Nodes, NodeRow{Name: n.Name, Agent: a, InSync: sync, InSyncReason: why})
	}
	return v, nil
}

// printStatus writes the rollout's header lines and its table.
func printStatus(w io.Writer, v *StatusView, now time.Time) error {
	s := v.Rollout
	fmt.Fprintf(w, "rollout %d (%s) %s: target %s (%s, resourceVersion %s), started by %s %s ago",
		s.ID, s.Kind, s.Phase, rolloutstate.Short(s.Target.Hash), s.Target.Source, s.Target.ResourceVersion,
		s.StartedBy, age(now, s.StartedAt))
	if !s.FinishedAt.IsZero() {
		fmt.Fprintf(w, ", ended %s ago", age(now, s.FinishedAt))
	}
	fmt.Fprintln(w)
	var notes []string
	if s.Canary > 0 {
		nodes := "nodes"
		if s.Canary == 1 {
			nodes = "node"
		}
		notes = append(notes, fmt.Sprintf("canary: pauses after %d %s", s.Canary, nodes))
	}
	if t := s.Try; t != nil {
		note := "on trial for " + t.Duration.Duration.String()
		switch {
		case t.ConfirmedBy != "":
			note += ", confirmed by " + t.ConfirmedBy
		case !t.Deadline.IsZero():
			note += ", confirm by " + t.Deadline.UTC().Format(time.RFC3339)
		}
		notes = append(notes, note)
	}
	if u := s.Untracked; u != nil && s.Previous != nil {
		notes = append(notes, "previous document not known exactly: "+u.Drops(*s.Previous))
	}
	for _, a := range s.Abandoned {
		notes = append(notes, fmt.Sprintf("node %s abandoned by %s at %s (it was %s): its state is unknown", a.Node, a.By, a.At.UTC().Format(time.RFC3339), a.Phase))
	}
	if len(s.LeftOut) > 0 {
		notes = append(notes, "left out, abandoned: "+strings.Join(s.LeftOut, ", "))
	}
	if s.Message != "" {
		notes = append(notes, s.Message)
	}
	for _, n := range notes {
		fmt.Fprintln(w, "  "+n)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPHASE\tCOMPONENTS\tSINCE\tAGENT\tIN-SYNC")
	for i, n := range s.Nodes {
		row := v.Nodes[i]
		since := "-"
		switch {
		case !n.FinishedAt.IsZero():
			since = age(now, n.FinishedAt)
		case !n.StartedAt.IsZero():
			since = age(now, n.StartedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.Phase, cmdutil.OrDash(strings.Join(n.Components, ",")),
			since, row.Agent.Seen(), row.InSync)
	}
	return tw.Flush()
}

// age is how long ago t was on the server's clock now.
func age(now, t time.Time) string { return duration.HumanDuration(now.Sub(t)) }
