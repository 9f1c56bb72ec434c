package edit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// One edit, round by round: the editor opens, the text is checked, and it
// is written, cancelled, or given back with what is wrong.

// Run opens the editor until the text is written, cancelled, or (when not
// interactive) refused.
func (o *Options) Run(ctx context.Context) error {
	// The rollout's checks come before the editor opens, so that no edit is
	// made for a rollout that could not start, and again once it closes.
	plan, err := o.Rollout.Plan(ctx, o.operator)
	if err != nil {
		return err
	}
	t := o.engine.Target()
	cm, err := o.engine.Get(ctx)
	if err != nil {
		return err
	}
	raw, err := engine.DocumentOf(cm, t)
	if err != nil {
		return err
	}
	base, err := clusterconfig.Parse([]byte(raw))
	if err != nil {
		return exitcode.Invalidf("the stored ClusterConfiguration cannot be edited: %w (restore a backup first)", err)
	}
	f, err := os.CreateTemp("", "kubeadmcfg-edit-*.yaml")
	if err != nil {
		return exitcode.Failuref("create the file to edit: %w", err)
	}
	if err := f.Close(); err != nil {
		return exitcode.Failuref("create the file to edit: %w", err)
	}
	s := &editSession{o: o, file: f.Name(), base: base, rv: cm.ResourceVersion, plan: plan}
	s.given = append(s.header(nil), raw...)
	err = s.loop(ctx)
	if err != nil && !s.written {
		return exitcode.WithHint(err, "your text is kept in "+s.file)
	}
	return err
}

// editSession is one edit: the version the user's text started from, and
// the text the editor was last given.
type editSession struct {
	o    *Options
	file string
	base *clusterconfig.Document
	rv   string
	// given is the text the editor was given this round; invalid is true
	// when it listed problems, merged when it holds the user's changes
	// merged into a newer live version (saved as it is, it is written).
	given   []byte
	invalid bool
	merged  bool
	// plan is the rollout to start after the write (--rollout); written is
	// true once the text is written, so a later error (the rollout's) keeps
	// no file.
	plan    *cmdutil.RolloutPlan
	written bool
}

func (s *editSession) loop(ctx context.Context) error {
	o := s.o
	editorOut := o.Out
	if !cmdutil.IsTerminal(o.Out) {
		editorOut = o.ErrOut // keep -o output parseable
	}
	for {
		if err := os.WriteFile(s.file, s.given, 0o600); err != nil {
			return exitcode.Failuref("write the file to edit: %w", err)
		}
		if err := o.Editor.Launch(ctx, s.file, o.In, editorOut, o.ErrOut); err != nil {
			return fmt.Errorf("%w; nothing was written", err)
		}
		text, err := input.ReadFile(s.file)
		if errors.Is(err, input.ErrTooLarge) {
			return exitcode.Invalidf("the edited file is %w; nothing was written", input.ErrTooLarge)
		}
		if err != nil {
			return exitcode.Failuref("read the edited file: %w", err)
		}
		// A text saved as it was given is cancelled before it is parsed: a
		// stored document that the strict parse refuses (a key given twice)
		// must not make "saved unchanged" fail.
		body := stripComments(text)
		unchanged := bytes.Equal(body, stripComments(s.given))
		switch {
		case len(bytes.TrimSpace(body)) == 0:
			return s.cancel("edit cancelled, the file was empty", false)
		case unchanged && s.invalid:
			return s.cancel("edit cancelled, no valid changes were saved; your text is kept in "+s.file, true)
		case unchanged && !s.merged:
			return s.cancel("edit cancelled, no changes made", false)
		}
		doc, edit, problems := s.check(blankComments(text))
		if problems != nil {
			if err := s.reopen(problems, text); err != nil {
				return err
			}
			continue
		}
		if doc.Equal(s.base) {
			return s.cancel("edit cancelled, no changes made", false)
		}
		done, err := s.write(ctx, edit, text)
		if done || err != nil {
			return err
		}
	}
}

// check parses and validates the user's text and turns it into the change
// from the version it started from; problems lists what is wrong. The text
// is parsed strictly: a key given twice is a problem, never a silent loss of
// the first one's fields.
func (s *editSession) check(body []byte) (*clusterconfig.Document, clusterconfig.Edit, []string) {
	doc, err := clusterconfig.ParseStrict(body)
	if err != nil {
		return nil, nil, []string{exitcode.Message(err)}
	}
	edit, err := clusterconfig.NewThreeWayMerge(s.base, doc)
	if err != nil {
		return nil, nil, []string{exitcode.Message(err)}
	}
	if s.o.Write.Validate == string(engine.ValidationStrict) {
		if report := doc.Validate(clusterconfig.ValidateOptions{KubeadmVersion: s.o.Write.KubeadmVersion}); !report.Valid() {
			return nil, nil, report.Errors
		}
	}
	return doc, edit, nil
}

// reopen gives the user's text back with the problems at the top, or, when
// no one is at a terminal, fails with exit 3.
func (s *editSession) reopen(problems []string, text []byte) error {
	if !s.o.Interactive {
		r := clusterconfig.Report{Errors: problems}
		return exitcode.Invalidf("the edited ClusterConfiguration is invalid, nothing was written: %s", r.Summary())
	}
	note := []string{"The edited ClusterConfiguration is invalid; nothing was written. Fix it, or",
		"save it unchanged to cancel:"}
	for _, p := range problems {
		note = append(note, "- "+p)
	}
	s.given = append(s.header(note), userText(text)...)
	s.invalid = true
	return nil
}

// write merges the user's change into the live document through the engine.
// done is false when the editor must open again.
func (s *editSession) write(ctx context.Context, edit clusterconfig.Edit, text []byte) (done bool, err error) {
	o := s.o
	// The editor may have been open for minutes: the nodes and their agents
	// are checked again before anything is written.
	if err := s.plan.Recheck(ctx); err != nil {
		return true, err
	}
	res, err := o.engine.UpdateDocument(ctx, edit)
	var conflict *clusterconfig.MergeConflictError
	switch {
	case errors.As(err, &conflict) && res.Old != nil:
		liveRV := res.Old.ResourceVersion
		if !o.Interactive {
			return true, exitcode.Conflictf("%s changed on the server while the editor was open (resourceVersion %s -> %s), and %w; nothing was written",
				o.engine.Target().Name, s.rv, liveRV, conflict)
		}
		live, perr := clusterconfig.Parse(res.Before)
		if perr != nil {
			return true, exitcode.Invalidf("the live ClusterConfiguration cannot be edited: %w", perr)
		}
		merged, merr := conflict.Merged.Marshal()
		if merr != nil {
			return true, exitcode.Invalidf("the merged document cannot be written as YAML: %w", merr)
		}
		note := []string{
			fmt.Sprintf("%s changed on the server while the editor was open, and the", o.engine.Target().Name),
			"same fields were changed on both sides; nothing was written. Below is",
			fmt.Sprintf("the live version (resourceVersion %s) with your other changes applied.", liveRV),
			"Saved as it is, it is written; emptied, the edit is cancelled.",
			"These fields keep the live value; set yours again to overwrite it:",
		}
		for _, c := range conflict.Conflicts {
			note = append(note, "- "+c.String())
		}
		s.base, s.rv, s.invalid, s.merged = live, liveRV, false, true
		s.given = append(s.header(note), merged...)
		return false, nil
	case exitcode.FromError(err) == exitcode.Invalid && o.Interactive:
		// The merged result is invalid, or too large.
		return false, s.reopen([]string{exitcode.Message(err)}, text)
	case err != nil:
		return true, err
	}
	t := o.engine.Target()
	out := &Result{WriteResult: cmdutil.NewWriteResult(t, res, "edited", o.Write.Diff, "edited/"+t.Key)}
	if res.Skipped || res.DryRun != engine.DryRunNone {
		out.KeptFile = s.file
		fmt.Fprintf(o.ErrOut, "nothing was written; your text is kept in %s\n", s.file)
	} else {
		_ = os.Remove(s.file) // written or cancelled: nothing to keep
		s.written = true
	}
	return true, cmdutil.FinishWrite(ctx, o.IOStreams, o.Print, s.plan, res, rollout.SourceEdit, out.WriteResult, out)
}

// cancel reports a cancelled edit; keep leaves the file in place.
func (s *editSession) cancel(summary string, keep bool) error {
	out := &Result{
		WriteResult: &cmdutil.WriteResult{ConfigMap: s.o.engine.Target().Namespace + "/" + s.o.engine.Target().Name,
			DryRun: s.o.Write.DryRun, OldResourceVersion: s.rv, Warnings: []string{}, Summary: summary},
		Cancelled: true,
	}
	if keep {
		out.KeptFile = s.file
	} else {
		_ = os.Remove(s.file) // written or cancelled: nothing to keep
	}
	if s.plan != nil {
		t := s.o.operator.Record.Target()
		out.Rollout = &cmdutil.RolloutResult{Record: t.Namespace + "/" + t.Name, NotStarted: "the edit was cancelled"}
	}
	if err := cmdutil.PrintWrite(s.o.IOStreams, s.o.Print, out.WriteResult, out); err != nil || s.plan == nil || !s.o.Print.Human() {
		return err
	}
	_, err := fmt.Fprintln(s.o.Out, "no rollout started: the edit was cancelled")
	return err
}

// header is the comment block at the top of the file, with notes (problems
// or a conflict) after it.
func (s *editSession) header(notes []string) []byte {
	t := s.o.engine.Target()
	var b strings.Builder
	for _, line := range []string{
		"Edit the ClusterConfiguration below and save to write it back. Lines",
		"starting with '#' are ignored; an empty file, or one saved unchanged,",
		"cancels the edit. The result is validated as kubeadm validates it, and",
		"a change made on the server meanwhile is merged, never overwritten.",
		"",
		"server: " + s.o.server,
		fmt.Sprintf("configmap: %s/%s, key %s", t.Namespace, t.Name, t.Key),
		"resourceVersion: " + s.rv,
		"",
	} {
		writeComment(&b, line)
	}
	for _, line := range notes {
		writeComment(&b, line)
	}
	if len(notes) > 0 {
		writeComment(&b, "")
	}
	return []byte(b.String())
}
