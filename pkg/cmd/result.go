package cmd

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

	// summary is the human line, such as "kubeadm-config patched
	// (resourceVersion 812 -> 815, 2 attempts)".
	summary string
}

// newWriteResult turns the engine's result into what the command prints.
// verb says what happened ("patched"); with a diff the new document is
// labelled newLabel.
func newWriteResult(t engine.Target, res *engine.DocumentResult, verb string, withDiff bool, newLabel string) *WriteResult {
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
		out.Diff = unifiedDiff("live/"+t.Key, newLabel, res.Before, res.After)
	}
	out.summary = describe(t.Name, verb, &res.Result)
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

// printWrite prints a write's outcome: warnings and the backup taken on
// ErrOut; then, with -o, printed (the result object), otherwise the diff
// and the human line.
func printWrite(streams genericiooptions.IOStreams, print *PrintFlags, out *WriteResult, printed any) error {
	printWarnings(streams.ErrOut, out.Warnings)
	if !print.Human() {
		return print.Print(streams.Out, printed)
	}
	if out.Backup != "" {
		fmt.Fprintf(streams.ErrOut, "backed up the replaced document to %s\n", out.Backup)
	}
	fmt.Fprint(streams.Out, out.Diff)
	_, err := fmt.Fprintln(streams.Out, out.summary)
	return err
}

// printWarnings writes each validation warning on its own line.
func printWarnings(w io.Writer, warnings []string) {
	for _, msg := range warnings {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
}

// unifiedDiff is the unified diff of two documents, "" when they are equal.
// go-udiff (the Myers diff of gopls) needs time and memory linear in the
// documents for the edits the plugin makes, and marks a missing final
// newline.
func unifiedDiff(oldLabel, newLabel string, before, after []byte) string {
	return udiff.Unified(oldLabel, newLabel, string(before), string(after))
}
