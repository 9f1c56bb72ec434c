package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const editLong = `Open the ClusterConfiguration in an editor, as plain YAML, and write the
result back with a validated, conflict-safe write.

The editor is $KUBE_EDITOR, else $EDITOR, else vi, as for kubectl edit. An
editor given with arguments ("code --wait") is split on spaces; one with
quotes or backslashes is run through $SHELL. The file starts with a few
comment lines naming the server, the ConfigMap and the resourceVersion; lines
starting with '#' are ignored.

Saving the file unchanged, or emptying it, cancels the edit: nothing is
written and the command exits 0. An invalid document reopens the editor on
your text with the problems listed at the top, until it is valid or saved
unchanged; when stdin or stdout is not a terminal, the command exits 3
instead.

The write goes through the same pipeline as patch: the automatic backup,
--if-leader, the write queue, --timeout, --dry-run, --diff and -o. When the
document changed on the server while the editor was open, your changes are
merged into the live version (three ways: the version you started from,
yours, and the live one), so the other change is kept too. When the same
field was changed on both sides, nothing is overwritten: the editor reopens
on the live version with your other changes applied and the conflicting
fields explained at the top (exit 4 when not interactive). A list counts as
one field.`

const editExample = `  # Edit the ClusterConfiguration in $KUBE_EDITOR, $EDITOR or vi
  kubectl kubeadmcfg edit

  # Use another editor, and show what was written as a diff
  KUBE_EDITOR="code --wait" kubectl kubeadmcfg edit --diff

  # Write even if kubeadm would reject the result, listing the problems
  kubectl kubeadmcfg edit --validate=warn`

// EditOptions edit the ClusterConfiguration in an editor.
type EditOptions struct {
	Cluster *cmdutil.ClusterFlags
	Write   *cmdutil.WriteFlags
	Backup  *cmdutil.BackupFlags
	Print   *cmdutil.PrintFlags
	// Editor opens the file; Complete chooses it from the environment.
	Editor cmdutil.Editor
	// Interactive reopens the editor on a problem instead of failing;
	// Complete sets it when stdin and stdout are terminals.
	Interactive bool

	engine *engine.Engine
	server string
	genericiooptions.IOStreams
}

// NewEditOptions returns options with defaults.
func NewEditOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *EditOptions {
	return &EditOptions{Cluster: cluster, Write: cmdutil.NewWriteFlags(), Backup: cmdutil.NewBackupFlags(), Print: cmdutil.NewPrintFlags(),
		IOStreams: streams}
}

// NewCmdEdit builds the edit command.
func NewCmdEdit(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewEditOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "edit",
		Short:   "Edit the ClusterConfiguration in an editor, with a validated, conflict-safe write",
		Long:    editLong,
		Example: editExample,
		Args:    cobra.NoArgs,
		// No arguments, so nothing to complete: not even file names.
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags binds the options' flags.
func (o *EditOptions) AddFlags(cmd *cobra.Command) {
	o.Write.AddFlags(cmd)
	o.Backup.AddFlags(cmd, true)
	o.Print.AddFlags(cmd)
}

// Complete chooses the editor, finds out whether a user is at a terminal,
// and builds the write pipeline.
func (o *EditOptions) Complete(_ *cobra.Command, _ []string) error {
	o.Write.Complete()
	if err := o.Print.Complete(); err != nil {
		return err
	}
	o.Editor = cmdutil.EditorFromEnv(os.Getenv, runtime.GOOS)
	o.Interactive = cmdutil.IsTerminal(o.In) && cmdutil.IsTerminal(o.Out)
	c, err := o.Cluster.Clients()
	if err != nil {
		return err
	}
	o.server = c.Server
	o.engine = o.Write.ToEngine(c, o.Cluster, o.Backup.Hook(c.Server, backup.ReasonBeforeEdit))
	return nil
}

// Validate checks the options without I/O.
func (o *EditOptions) Validate() error {
	if len(o.Editor.Args) == 0 {
		return exitcode.Usagef("no editor to run: set KUBE_EDITOR or EDITOR")
	}
	if err := o.Write.ValidateFlags(); err != nil {
		return err
	}
	return o.Backup.Validate()
}

// EditResult is what edit prints with -o: the write's result, or that the
// edit was cancelled.
type EditResult struct {
	*cmdutil.WriteResult
	Cancelled bool `json:"cancelled"`
	// KeptFile holds the edited text when it was not written.
	KeptFile string `json:"keptFile,omitempty"`
}

// editSession is one edit: the version the user's text started from, and
// the text the editor was last given.
type editSession struct {
	o    *EditOptions
	file string
	base *clusterconfig.Document
	rv   string
	// given is the text the editor was given this round; invalid is true
	// when it listed problems.
	given   []byte
	invalid bool
}

// Run opens the editor until the text is written, cancelled, or (when not
// interactive) refused.
func (o *EditOptions) Run(ctx context.Context) error {
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
	s := &editSession{o: o, file: f.Name(), base: base, rv: cm.ResourceVersion}
	s.given = append(s.header(nil), raw...)
	err = s.loop(ctx)
	if err != nil {
		return exitcode.WithHint(err, "your text is kept in "+s.file)
	}
	return nil
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
		text, err := os.ReadFile(s.file)
		if err != nil {
			return exitcode.Failuref("read the edited file: %w", err)
		}
		body := stripComments(text)
		switch {
		case len(bytes.TrimSpace(body)) == 0:
			return s.cancel("edit cancelled, the file was empty", false)
		case s.invalid && bytes.Equal(body, stripComments(s.given)):
			return s.cancel("edit cancelled, no valid changes were saved; your text is kept in "+s.file, true)
		}
		doc, edit, problems := s.check(body)
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
// from the version it started from; problems lists what is wrong.
func (s *editSession) check(body []byte) (*clusterconfig.Document, clusterconfig.Edit, []string) {
	doc, err := clusterconfig.Parse(body)
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
		s.base, s.rv, s.invalid = live, liveRV, false
		s.given = append(s.header(note), merged...)
		return false, nil
	case exitcode.FromError(err) == exitcode.Invalid && o.Interactive:
		// The merged result is invalid, or too large.
		return false, s.reopen([]string{exitcode.Message(err)}, text)
	case err != nil:
		return true, err
	}
	t := o.engine.Target()
	out := &EditResult{WriteResult: cmdutil.NewWriteResult(t, res, "edited", o.Write.Diff, "edited/"+t.Key)}
	if res.Skipped || res.DryRun != engine.DryRunNone {
		out.KeptFile = s.file
		fmt.Fprintf(o.ErrOut, "nothing was written; your text is kept in %s\n", s.file)
	} else {
		_ = os.Remove(s.file) // written or cancelled: nothing to keep
	}
	return true, cmdutil.PrintWrite(o.IOStreams, o.Print, out.WriteResult, out)
}

// cancel reports a cancelled edit; keep leaves the file in place.
func (s *editSession) cancel(summary string, keep bool) error {
	out := &EditResult{
		WriteResult: &cmdutil.WriteResult{ConfigMap: s.o.engine.Target().Namespace + "/" + s.o.engine.Target().Name,
			DryRun: s.o.Write.DryRun, OldResourceVersion: s.rv, Warnings: []string{}, Summary: summary},
		Cancelled: true,
	}
	if keep {
		out.KeptFile = s.file
	} else {
		_ = os.Remove(s.file) // written or cancelled: nothing to keep
	}
	return cmdutil.PrintWrite(s.o.IOStreams, s.o.Print, out.WriteResult, out)
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

// writeComment writes text as comment lines; a text of several lines keeps
// them all commented.
func writeComment(b *strings.Builder, text string) {
	for i, line := range strings.Split(text, "\n") {
		switch {
		case line == "" && i == 0:
			b.WriteString("#\n")
		case i == 0:
			b.WriteString("# " + line + "\n")
		default:
			b.WriteString("#   " + line + "\n")
		}
	}
}

// stripComments drops the lines that start with '#', as kubectl edit
// ignores them.
func stripComments(text []byte) []byte {
	var out [][]byte
	for _, line := range bytes.SplitAfter(text, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, nil)
}

// userText is the edited file without the comment block at its top (the
// header and the problems of the last round), so that a new header can
// take its place.
func userText(text []byte) []byte {
	for len(text) > 0 {
		line, rest, _ := bytes.Cut(text, []byte("\n"))
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) > 0 && trimmed[0] != '#' {
			break
		}
		text = rest
	}
	return text
}
