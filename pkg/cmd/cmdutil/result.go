package cmdutil

import (
	"fmt"
	"io"

	udiff "github.com/aymanbagabas/go-udiff"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
)

// WriteResult is what a command that writes kubeadm-config prints with -o.
type WriteResult struct {
	ConfigMap          string   `json:"configMap"`
	Changed            bool     `json:"changed"`
	Skipped            bool     `json:"skipped"`
	SkipReason         string   `json:"skipReason,omitempty"`
	DryRun             string   `json:"dryRun"`
	OldResourceVersion string   `json:"oldResourceVersion,omitempty"`
	NewResourceVersion string   `json:"newResourceVersion,omitempty"`
	Attempts           int      `json:"attempts"`
	Conflicts          int      `json:"conflicts"`
	Queued             bool     `json:"queued"`
	Warnings           []string `json:"warnings"`
	Backup             string   `json:"backup,omitempty"`
	Diff               string   `json:"diff,omitempty"`
	// Rollout is the rollout a write started (--rollout).
	Rollout *RolloutResult `json:"rollout,omitempty"`

	// Summary is the human line, such as "kubeadm-config patched
	// (resourceVersion 812 -> 815, 2 attempts)"; -o leaves it out. Verbs
	// that end without a write (a cancelled edit, restore --to-file) set it.
	Summary string `json:"-"`
}

// NewWriteResult turns the engine's result into what the command prints, the
// same way for every verb that writes.
// verb says what happened ("patched"); with a diff the new document is
// labelled newLabel.
func NewWriteResult(t engine.Target, res *engine.DocumentResult, verb string, withDiff bool, newLabel string) *WriteResult {
	out := &WriteResult{
		ConfigMap: t.Namespace + "/" + t.Name,
		DryRun:    string(res.DryRun),
		Warnings:  append([]string{}, res.Warnings...),
		Changed:   res.Changed, Skipped: res.Skipped, SkipReason: res.SkipReason,
		Attempts: res.Attempts, Conflicts: res.Conflicts, Queued: res.Queued, Backup: res.Backup,
	}
	if res.QueueError != nil {
		out.Warnings = append(out.Warnings, "the write queue could not be used, retried with backoff instead: "+res.QueueError.Error())
	}
	if res.Old != nil {
		out.OldResourceVersion = res.Old.ResourceVersion
	}
	if res.Changed && res.New != nil && res.DryRun == engine.DryRunNone {
		out.NewResourceVersion = res.New.ResourceVersion
	}
	if withDiff && !res.Skipped {
		out.Diff = UnifiedDiff("live/"+t.Key, newLabel, res.Before, res.After)
	}
	out.Summary = describe(t.Name, verb, &res.Result)
	return out
}

// describe is the one-line human summary of a write.
func describe(name, verb string, r *engine.Result) string {
	switch {
	case r.Skipped:
		return "skipped: " + r.SkipReason
	case !r.Changed:
		return name + " unchanged"
	case r.DryRun == engine.DryRunClient:
		return fmt.Sprintf("%s %s (dry run: nothing sent)", name, verb)
	case r.DryRun == engine.DryRunServer:
		return fmt.Sprintf("%s %s (server dry run: nothing written, resourceVersion %s)", name, verb, r.Old.ResourceVersion)
	}
	attempts := fmt.Sprintf("%d attempts", r.Attempts)
	if r.Attempts == 1 {
		attempts = "1 attempt"
	}
	if r.Created || r.Old == nil {
		return fmt.Sprintf("%s %s (resourceVersion %s, %s)", name, verb, r.New.ResourceVersion, attempts)
	}
	return fmt.Sprintf("%s %s (resourceVersion %s -> %s, %s)", name, verb, r.Old.ResourceVersion, r.New.ResourceVersion, attempts)
}

// PrintWrite prints a write's outcome, the same way for every verb that
// writes: warnings and the backup taken on
// ErrOut; then, with -o, printed (the result object), otherwise the diff
// and the human line.
func PrintWrite(streams genericiooptions.IOStreams, print *PrintFlags, out *WriteResult, printed any) error {
	PrintWarnings(streams.ErrOut, out.Warnings)
	if !print.Human() {
		return print.Print(streams.Out, printed)
	}
	if out.Backup != "" {
		fmt.Fprintf(streams.ErrOut, "backed up the replaced document to %s\n", out.Backup)
	}
	fmt.Fprint(streams.Out, out.Diff)
	_, err := fmt.Fprintln(streams.Out, out.Summary)
	return err
}

// PrintWarnings writes each warning on its own line, as every verb words
// them.
func PrintWarnings(w io.Writer, warnings []string) {
	for _, msg := range warnings {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
}

// UnifiedDiff is the unified diff of two documents, "" when they are equal:
// of ClusterConfigurations for the verbs that write, of manifests for
// reconfigure.
// go-udiff (the Myers diff of gopls) needs time and memory linear in the
// documents for the edits the plugin makes, and marks a missing final
// newline.
func UnifiedDiff(oldLabel, newLabel string, before, after []byte) string {
	return udiff.Unified(oldLabel, newLabel, string(before), string(after))
}

// OrDash shows an empty value as "-" in tables and messages, as every verb
// that prints a table does.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
