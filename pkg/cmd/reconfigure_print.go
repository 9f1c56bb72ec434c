package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// ReconfigureResult is what reconfigure prints with -o, on success and on
// failure (then with error and exitCode).
type ReconfigureResult struct {
	Node string `json:"node"`
	// Source is the ClusterConfiguration applied: the live one, or a backup.
	Source string `json:"source"`
	// Backup is the ClusterConfiguration backup the run applied.
	Backup        string            `json:"backup,omitempty"`
	DryRun        bool              `json:"dryRun"`
	Changed       bool              `json:"changed"`
	Components    []ComponentResult `json:"components"`
	LastKnownGood string            `json:"lastKnownGood,omitempty"`
	Diff          string            `json:"diff,omitempty"`
	Warnings      []string          `json:"warnings"`
	Error         string            `json:"error,omitempty"`
	ExitCode      int               `json:"exitCode"`
}

// ComponentResult is what happened to one component.
type ComponentResult struct {
	Name     string `json:"name"`
	Manifest string `json:"manifest"`
	// Changed: its rendered manifest differs from the one it ran.
	Changed bool `json:"changed"`
	// Replaced: its manifest was replaced (not on a dry run).
	Replaced bool `json:"replaced"`
	// Backup is the manifest backup of what it ran before.
	Backup       string `json:"backup,omitempty"`
	MirrorPod    string `json:"mirrorPod"`
	OldHash      string `json:"oldHash,omitempty"`
	NewHash      string `json:"newHash,omitempty"`
	HealthyAfter string `json:"healthyAfter,omitempty"`
	RolledBack   bool   `json:"rolledBack"`
}

// newResult turns the run's report into what the command prints.
func (o *ReconfigureOptions) newResult(rep *reconfigure.Report) *ReconfigureResult {
	res := &ReconfigureResult{Node: rep.Node, Source: rep.Source, Backup: rep.Backup, DryRun: rep.DryRun,
		LastKnownGood: rep.LastKnownGood, Warnings: []string{}}
	for _, ch := range rep.Plan.Changes {
		res.Components = append(res.Components, ComponentResult{
			Name: ch.Component.PodName(), Manifest: ch.Path, Changed: ch.Changed(), MirrorPod: ch.Current.MirrorPodName(rep.Node)})
		res.Changed = res.Changed || ch.Changed()
	}
	res.setOutcomes(rep.Outcomes)
	if rep.DryRun {
		res.Diff = manifestDiff(rep.Plan)
	}
	for _, w := range rep.Warnings {
		res.Warnings = append(res.Warnings, o.warning(w))
	}
	return res
}

// warning words one of the run's warnings, with the flag that fixes it.
func (o *ReconfigureOptions) warning(w error) string {
	var partial *reconfigure.PartialError
	var notRecorded *reconfigure.NotRecordedError
	switch {
	case errors.As(w, &partial):
		// The components as the user named them.
		return "not recorded as the last known good: only " + strings.Join(o.Components, ",") + " reconfigured"
	case errors.As(w, &notRecorded):
		return reconfigureHint(notRecorded).Error()
	}
	return exitcode.Message(w)
}

func (r *ReconfigureResult) setOutcomes(outcomes []controlplane.Outcome) {
	for i, o := range outcomes {
		c := &r.Components[i]
		c.Replaced, c.Backup, c.OldHash, c.NewHash, c.RolledBack = o.Replaced, o.Backup, o.OldHash, o.NewHash, o.RolledBack
		if o.HealthyAfter > 0 {
			c.HealthyAfter = o.HealthyAfter.Round(100 * time.Millisecond).String()
		}
	}
}

// manifestDiff is the unified diff of every manifest that would change.
func manifestDiff(plan *controlplane.Plan) string {
	var b strings.Builder
	for _, ch := range plan.Changes {
		if ch.Changed() {
			b.WriteString(cmdutil.UnifiedDiff("running/"+ch.Component.File(), "rendered/"+ch.Component.File(), ch.Current.Raw, ch.Rendered.Raw))
		}
	}
	return b.String()
}

// print writes the result: with -o the object, otherwise warnings on
// stderr, the diff and a line per component on stdout.
func (o *ReconfigureOptions) print(res *ReconfigureResult) error {
	if !o.Print.Human() {
		return o.Print.Print(o.Out, res)
	}
	cmdutil.PrintWarnings(o.ErrOut, res.Warnings)
	fmt.Fprint(o.Out, res.Diff)
	w := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	for _, c := range res.Components {
		state := "unchanged"
		switch {
		case c.Changed && res.DryRun:
			state = "would change"
		case c.Replaced:
			state = "reconfigured, healthy after " + c.HealthyAfter
		}
		fmt.Fprintf(w, "%s\t%s\n", c.Name, state)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	switch {
	case res.DryRun:
		fmt.Fprintf(o.Out, "dry run: nothing was changed on node %s\n", res.Node)
	case res.LastKnownGood != "":
		fmt.Fprintf(o.Out, "node %s runs %s, now its last known good (backup %s)\n", res.Node, res.Source, res.LastKnownGood)
	default:
		fmt.Fprintf(o.Out, "node %s runs %s\n", res.Node, res.Source)
	}
	return nil
}

// reconfigurePrinter writes reconfigure's progress on stderr. On a terminal
// the line a component is waiting on is redrawn in place with the time
// spent; otherwise a line is written only when what is seen changes. With
// -o nothing is written.
type reconfigurePrinter struct {
	w       io.Writer
	on, tty bool
	last    string
	drawn   bool
}

func newReconfigurePrinter(w io.Writer, on bool) *reconfigurePrinter {
	p := &reconfigurePrinter{w: w, on: on}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// line writes one progress line.
func (p *reconfigurePrinter) line(format string, args ...any) {
	if !p.on {
		return
	}
	p.clear()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *reconfigurePrinter) warn(format string, args ...any) {
	p.line("warning: "+format, args...)
}

// clear removes a redrawn status line before another line is written.
func (p *reconfigurePrinter) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// done ends the output: a redrawn line is left as it is.
func (p *reconfigurePrinter) done() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// event prints one of the run's events.
func (p *reconfigurePrinter) event(e reconfigure.Event) {
	switch e.Kind {
	case reconfigure.EventWarning:
		p.warn("%s", e.Message)
	case reconfigure.EventRendering:
		p.line("%s", e.Message)
	case reconfigure.EventComponent:
		p.component(e.Component)
	}
}

// component prints one of Apply's events.
func (p *reconfigurePrinter) component(e controlplane.Event) {
	if !p.on {
		return
	}
	name := e.Component.PodName()
	switch e.Kind {
	case controlplane.EventReplacing:
		if e.Message != "" {
			p.line("%s: backed up its running manifest as %s; replacing it", name, e.Message)
		} else {
			p.line("%s: replacing its manifest", name)
		}
	case controlplane.EventWaiting:
		p.last = ""
		p.line("%s: waiting up to %s for %s", name, e.Limit, e.Message)
	case controlplane.EventStatus:
		if p.tty {
			p.clear()
			fmt.Fprintf(p.w, "%s: %s of %s: %s", name, e.Elapsed.Round(time.Second), e.Limit, e.Message)
			p.drawn = true
			return
		}
		if e.Message != p.last {
			p.last = e.Message
			p.line("%s: %s (%s)", name, e.Message, e.Elapsed.Round(time.Second))
		}
	case controlplane.EventHealthy:
		p.line("%s: healthy after %s", name, e.Elapsed.Round(100*time.Millisecond))
	case controlplane.EventFailed:
		p.line("%s", e.Message) // it names the component
	case controlplane.EventRollingBack:
		p.last = ""
		p.line("%s: rolling back: its previous manifest is back in place", name)
	case controlplane.EventRolledBack:
		p.line("%s: back on its previous manifest, and healthy", name)
	}
}
