package reconfigure

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	reconfigurenode "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// Result is what reconfigure prints with -o, on success and on
// failure (then with error and exitCode).
type Result struct {
	Node string `json:"node"`
	// Source is the ClusterConfiguration applied: the live one, or a backup.
	Source string `json:"source"`
	// Backup is the ClusterConfiguration backup the run applied.
	Backup     string            `json:"backup,omitempty"`
	DryRun     bool              `json:"dryRun"`
	Changed    bool              `json:"changed"`
	Components []ComponentResult `json:"components"`
	// Etcd is what became of the node's etcd member beyond its component:
	// why it was left alone, or the member changed and its snapshot.
	Etcd          *EtcdResult `json:"etcd,omitempty"`
	LastKnownGood string      `json:"lastKnownGood,omitempty"`
	Diff          string      `json:"diff,omitempty"`
	Warnings      []string    `json:"warnings"`
	Error         string      `json:"error,omitempty"`
	ExitCode      int         `json:"exitCode"`
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

// EtcdResult is reconfigurenode.EtcdReport as -o prints it.
type EtcdResult struct {
	// LeftAlone says why etcd was not considered: an external etcd, or no
	// local member on the node.
	LeftAlone string `json:"leftAlone,omitempty"`
	// Member is the member changed; Snapshot the etcd snapshot taken
	// before, in --backup-dir ('backup list' shows it).
	Member   string `json:"member,omitempty"`
	Snapshot string `json:"snapshot,omitempty"`
}

// newResult turns the run's report into what the command prints; warning
// words a warning.
func newResult(rep *reconfigurenode.Report, warning func(error) string) *Result {
	res := &Result{Node: rep.Node, Source: rep.Source, Backup: rep.Backup, DryRun: rep.DryRun,
		LastKnownGood: rep.LastKnownGood, Warnings: []string{}}
	for _, ch := range rep.Plan.Changes {
		res.Components = append(res.Components, ComponentResult{
			Name: ch.Component.PodName(), Manifest: ch.Path, Changed: ch.Changed(), MirrorPod: ch.Current.MirrorPodName(rep.Node)})
		res.Changed = res.Changed || ch.Changed()
	}
	if e := rep.Etcd; e != (reconfigurenode.EtcdReport{}) {
		res.Etcd = &EtcdResult{LeftAlone: e.LeftAlone, Member: e.Member, Snapshot: e.Snapshot}
	}
	res.setOutcomes(rep.Outcomes)
	if rep.DryRun {
		res.Diff = manifestDiff(rep.Plan)
	}
	for _, w := range rep.Warnings {
		res.Warnings = append(res.Warnings, warning(w))
	}
	return res
}

func (r *Result) setOutcomes(outcomes []controlplane.Outcome) {
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

// printResult writes the result: with -o the object, otherwise warnings on
// stderr, the diff and a line per component on stdout.
func printResult(streams genericiooptions.IOStreams, print *cmdutil.PrintFlags, res *Result) error {
	if !print.Human() {
		return print.Print(streams.Out, res)
	}
	cmdutil.PrintWarnings(streams.ErrOut, res.Warnings)
	fmt.Fprint(streams.Out, res.Diff)
	w := tabwriter.NewWriter(streams.Out, 0, 4, 2, ' ', 0)
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
	if res.Etcd != nil && res.Etcd.LeftAlone != "" {
		fmt.Fprintf(w, "etcd\tleft alone: %s\n", res.Etcd.LeftAlone)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if res.Etcd != nil && res.Etcd.Snapshot != "" {
		fmt.Fprintf(streams.Out, "etcd snapshot taken before the change: %s\n", res.Etcd.Snapshot)
	}
	switch {
	case res.DryRun:
		fmt.Fprintf(streams.Out, "dry run: nothing was changed on node %s\n", res.Node)
	case res.LastKnownGood != "":
		fmt.Fprintf(streams.Out, "node %s runs %s, now its last known good (backup %s)\n", res.Node, res.Source, res.LastKnownGood)
	default:
		fmt.Fprintf(streams.Out, "node %s runs %s\n", res.Node, res.Source)
	}
	return nil
}
