package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// What upgrade-apply and upgrade-resume print: the change, and with --wait
// the upgrade's progress to its end.

// follow prints what ch did (line, for people; the record with -o) and,
// with wait, follows the upgrade to its end: progress on ErrOut, the end
// on Out, and the error whose exit code says how it ended.
func (f *Flags) follow(ctx context.Context, op *operator.Upgrades, ch *operator.UpgradeChange, line string, wait bool) error {
	human := f.Print.Human()
	cmdutil.PrintWarnings(f.ErrOut, ch.Warnings)
	if human {
		fmt.Fprintln(f.Out, line)
	}
	rec := ch.Record
	var werr error
	if wait {
		var progress func(*upgradestate.Record)
		if human {
			progress = upgradeProgress(f.ErrOut)
		}
		var last *upgradestate.Record
		last, werr = op.Wait(ctx, ch.Record.Agents, operator.UpgradeWaitOptions{Progress: progress})
		if last != nil {
			rec = last
		}
		if werr == nil && human {
			fmt.Fprintln(f.Out, completeLine(rec))
		}
	}
	if !human {
		if err := f.Print.Print(f.Out, rec.Status()); err != nil {
			return err
		}
	}
	return upgradeHint(werr)
}

// completeLine is the human line of an upgrade the agents completed: the
// control-plane nodes are theirs, the workers are not.
func completeLine(rec *upgradestate.Record) string {
	return fmt.Sprintf("upgrade to %s %s: every control-plane node runs %s", rec.ToVersion, rec.State, rec.ToVersion)
}

// startedLine is the human line of an upgrade the agents were given.
func startedLine(rec *upgradestate.Record) string {
	return fmt.Sprintf("upgrade started: %s -> %s, state %s, plan %s; carried out by the agents of %s",
		cmdutil.OrDash(rec.FromVersion), rec.ToVersion, rec.State, rec.PlanOf().Name, strings.Join(rec.PlanOf().WorkNodes(), ", "))
}

// resumedLine is the human line of a resume.
func resumedLine(rec *upgradestate.Record) string {
	line := fmt.Sprintf("upgrade to %s resumed (resume %d)", rec.ToVersion, rec.Agents.Resume)
	switch node, step, _ := operator.FailedStep(rec); {
	case node != "":
		line += fmt.Sprintf(": the agent of %s runs %s again", node, step)
	case step != "":
		line += ": " + step + " runs again"
	}
	return line
}

// upgradeProgress returns an UpgradeWaitOptions.Progress that writes to w,
// one line each, where the upgrade stands when first seen, and every change
// after of its state or of a node's step, phase or outcome. Why a node
// failed is left to the error the wait ends with.
func upgradeProgress(w io.Writer) func(*upgradestate.Record) {
	var last *upgradestate.Record
	return func(rec *upgradestate.Record) {
		defer func() { last = rec }()
		prefix := "upgrade to " + rec.ToVersion + ": "
		if last == nil {
			fmt.Fprintln(w, prefix+operator.UpgradeSummary(rec))
			return
		}
		if last.State != rec.State {
			fmt.Fprintln(w, prefix+string(rec.State))
		}
		if rec.Agents == nil {
			return
		}
		for _, n := range rec.Agents.Nodes {
			before := last.Agents.Progress(n.Node)
			if before.Step == n.Step && before.Phase == n.Phase && before.Outcome == n.Outcome && before.Attempt == n.Attempt {
				continue
			}
			line := prefix + "node " + n.Node + " " + cmdutil.OrDash(n.Step)
			if n.Phase != "" {
				line += ", phase " + n.Phase
			}
			if n.Outcome != "" {
				line += ": " + n.Outcome
			}
			fmt.Fprintln(w, line)
		}
	}
}

// upgradeHint adds to the error a wait ended with the command that goes
// on from there.
func upgradeHint(err error) error {
	var failed *operator.UpgradeFailedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &failed) && failed.Outcome == upgradestate.NodeRolledBack:
		hint := "fix the cause, then run the step again with 'kubectl kubeadmcfg upgrade-resume --wait'"
		if failed.Abort != "" {
			hint += ", or end the upgrade with 'kubectl kubeadmcfg upgrade-set " + string(failed.Abort) + "'"
		}
		return exitcode.WithHint(err, hint)
	case errors.As(err, &failed):
		return exitcode.WithHint(err, "fix the cause on the node, then run the failed step again with 'kubectl kubeadmcfg upgrade-resume --wait'")
	case errors.Is(err, operator.ErrStoppedWaitingForUpgrade):
		return exitcode.WithHint(err, "follow it with 'kubectl kubeadmcfg upgrade-status --watch'")
	}
	return err
}
