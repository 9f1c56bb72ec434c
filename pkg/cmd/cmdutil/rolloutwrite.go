package cmdutil

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// A write of kubeadm-config and the rollout of what it wrote, as one step
// (patch, edit, restore --rollout): the rollout's checks before the write,
// so that a rollout that cannot start refuses before anything is written;
// the start after it, pinned to exactly the bytes written.

// RolloutResult is what a command that starts or follows a rollout prints
// with -o, under "rollout" beside the write's result.
type RolloutResult struct {
	// Record is the rollout record's namespace/name.
	Record  string `json:"record"`
	Started bool   `json:"started"`
	// NotStarted says why no rollout was started.
	NotStarted string          `json:"notStarted,omitempty"`
	Status     *rollout.Status `json:"status,omitempty"`
	Warnings   []string        `json:"warnings,omitempty"`
}

// RolloutPlan is a rollout that passed its checks before the write.
type RolloutPlan struct {
	op   *operator.Rollouts
	spec rollout.Spec
	wait bool
}

// Plan checks, before the write, that the rollout the flags ask for can
// start: no other is active, its nodes are control-plane nodes, every
// control-plane node is ready for it. It returns nil without --rollout.
func (f *RolloutFlags) Plan(ctx context.Context, op *operator.Rollouts) (*RolloutPlan, error) {
	if !f.Rollout {
		return nil, nil
	}
	spec, err := op.Preflight(ctx, f.Spec())
	if err != nil {
		return nil, fmt.Errorf("nothing was written, the rollout could not start: %w", err)
	}
	return &RolloutPlan{op: op, spec: spec, wait: f.Wait}, nil
}

// Recheck runs the plan's checks again, right before the write: edit runs
// them before the editor opens, and again once it closes, minutes later,
// so that no rollout starts on a node whose agent died meanwhile. Nil
// without a plan.
func (p *RolloutPlan) Recheck(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if _, err := p.op.Preflight(ctx, p.spec); err != nil {
		return fmt.Errorf("nothing was written, the rollout could not start: %w", err)
	}
	return nil
}

// FinishWrite prints a write's outcome as PrintWrite does and, with a plan,
// starts the rollout of the document written (target: the bytes and
// resourceVersion written; previous: the document and resourceVersion the
// write replaced), then with --wait follows it to its end. A write that
// changed nothing, or wrote nothing (a dry run, a skip), starts nothing. A
// start that fails after the write says that the write landed and the
// rollout did not start (exit 4, or 7 when the start's own outcome is
// unknown).
func FinishWrite(ctx context.Context, streams genericiooptions.IOStreams, print *PrintFlags, plan *RolloutPlan,
	res *engine.DocumentResult, source rollout.Source, out *WriteResult, printed any) error {
	if plan == nil {
		return PrintWrite(streams, print, out, printed)
	}
	t := plan.op.Record.Target()
	out.Rollout = &RolloutResult{Record: t.Namespace + "/" + t.Name}
	switch {
	case res.Skipped:
		out.Rollout.NotStarted = "the write was skipped"
	case res.DryRun != engine.DryRunNone:
		out.Rollout.NotStarted = "dry run: the rollout's checks passed, and nothing was started"
	case !res.Changed:
		out.Rollout.NotStarted = out.ConfigMap + " is unchanged: there is nothing new to roll out (see 'kubectl kubeadmcfg rollout start')"
	}
	if out.Rollout.NotStarted != "" {
		if err := PrintWrite(streams, print, out, printed); err != nil {
			return err
		}
		if print.Human() {
			fmt.Fprintln(streams.Out, "no rollout started: "+out.Rollout.NotStarted)
		}
		return nil
	}
	spec := plan.spec
	spec.Target, spec.TargetResourceVersion, spec.Source = res.After, res.New.ResourceVersion, source
	spec.Previous, spec.PreviousResourceVersion = res.Before, res.Old.ResourceVersion
	ch, err := plan.op.StartPinned(ctx, spec)
	if err != nil {
		code := exitcode.Conflict
		if exitcode.FromError(err) == exitcode.OutcomeUnknown {
			code = exitcode.OutcomeUnknown
		}
		if perr := PrintWrite(streams, print, out, printed); perr != nil {
			return perr
		}
		return exitcode.New(code, fmt.Errorf("%s was written (resourceVersion %s), but the rollout did not start: %w; start it with 'kubectl kubeadmcfg rollout start' once that is fixed",
			out.ConfigMap, res.New.ResourceVersion, err))
	}
	out.Rollout.Started, out.Rollout.Status, out.Rollout.Warnings = true, ch.Status, ch.Warnings
	if print.Human() {
		if err := PrintWrite(streams, print, out, printed); err != nil {
			return err
		}
		PrintWarnings(streams.ErrOut, ch.Warnings)
		fmt.Fprintln(streams.Out, StartedLine(ch.Status))
	}
	var werr error
	if plan.wait {
		var s *rollout.Status
		progress := RolloutProgress(streams.ErrOut)
		if !print.Human() {
			progress = nil
		}
		s, werr = plan.op.Wait(ctx, ch.Status.ID, operator.WaitOptions{Progress: progress})
		if s != nil {
			out.Rollout.Status = s
		}
		if werr == nil && print.Human() {
			fmt.Fprintln(streams.Out, EndedLine(s))
		}
	}
	if !print.Human() {
		if err := PrintWrite(streams, print, out, printed); err != nil {
			return err
		}
	}
	return RolloutHint(werr)
}

// StartedLine is the human line of a rollout started.
func StartedLine(s *rollout.Status) string {
	return fmt.Sprintf("rollout %d started: %s (%s, resourceVersion %s) over %s%s", s.ID, rollout.Short(s.Target.Hash),
		s.Target.Source, s.Target.ResourceVersion, joinOrNone(s.Order), describeSpec(s))
}

// EndedLine is the human line of a rollout a wait saw through: every node
// runs its target.
func EndedLine(s *rollout.Status) string {
	if s == nil {
		return "the rollout ended"
	}
	if s.Phase == rollout.AwaitingConfirm {
		return fmt.Sprintf("rollout %d: every node runs %s; confirm it by %s with 'kubectl kubeadmcfg rollout confirm', or it is reverted",
			s.ID, rollout.Short(s.Target.Hash), s.Try.Deadline.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("rollout %d %s: every node runs %s", s.ID, s.Phase, rollout.Short(s.Target.Hash))
}

// RolloutProgress returns a WaitOptions.Progress that writes to w, one line
// each, how the rollout stands when first seen and every change of its
// phase or of a node's phase after. The message of a Failed rollout is left
// to the error Wait returns.
func RolloutProgress(w io.Writer) func(*rollout.Status) {
	var last *rollout.Status
	return func(s *rollout.Status) {
		defer func() { last = s }()
		if last == nil || last.ID != s.ID {
			fmt.Fprintf(w, "rollout %d: %s\n", s.ID, s.Summary())
			return
		}
		for _, n := range s.Nodes {
			before, _ := last.Lookup(n.Name)
			if before.Phase == n.Phase {
				continue
			}
			line := fmt.Sprintf("rollout %d: node %s %s", s.ID, n.Name, n.Phase)
			if len(n.Components) > 0 {
				line += " (" + joinOrNone(n.Components) + ")"
			}
			if n.Message != "" {
				line += ": " + n.Message
			}
			fmt.Fprintln(w, line)
		}
		if last.Phase != s.Phase {
			line := fmt.Sprintf("rollout %d: %s", s.ID, s.Phase)
			// A failed rollout ends the wait with an error that says why:
			// the line does not say it a second time.
			if s.Message != "" && s.Phase != rollout.Failed {
				line += ": " + s.Message
			}
			fmt.Fprintln(w, line)
		}
	}
}

func joinOrNone(names []string) string {
	if len(names) == 0 {
		return "no node"
	}
	return strings.Join(names, ", ")
}
