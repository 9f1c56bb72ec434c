package upgrade

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

func joinStates(states []upgradestate.State) string {
	s := make([]string, len(states))
	for i, st := range states {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

// StatusOptions shows the upgrade state.
type StatusOptions struct {
	*Flags
	Watch      bool
	StaleAfter time.Duration

	op *operator.Upgrades // judges the agents of an upgrade they carry out
}

// statusView is what upgrade-status prints with -o: the record with where
// in its plan it is and, for an upgrade the agents carry out, each node's
// agent as its Lease shows it, in the plan's order.
type statusView struct {
	upgradestate.Status
	NodeAgents []nodestate.Agent `json:"nodeAgents,omitempty"`
}

// NewCmdUpgradeStatus builds upgrade-status.
func NewCmdUpgradeStatus(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &StatusOptions{Flags: NewFlags(cluster, streams)}
	cmd := &cobra.Command{
		Use:   "upgrade-status",
		Short: "Show the upgrade state",
		Long: `Show the upgrade state: the state, the versions, how long it has been in
the state, the reason, the plan it follows, where in the plan it is and what
may come next, the steps being run by upgrade-run, and each host's status.
With -o json the record is printed as stored, with the plan's name, the
step's position and the next states. --watch follows changes with a watch on
the ConfigMap; when the API server no longer holds the history to resume it
from (410 Gone, after a compaction), the state is read again, printed if it
changed, and followed from there. --timeout bounds the first read (not the
watch after it). Exit 5 when no upgrade is recorded.

For an upgrade the agents carry out (upgrade-apply) it also shows each
node: its step, the phase it is in or last ran, since when (on the API
server's clock), its outcome, and its agent ("alive (3s)", "lost (45s)" or
"none", judged by --stale-after as 'nodes' judges it); -o json adds the
agents as nodeAgents beside the record's agents.`,
		Example: "  # Show the state as JSON\n  kubectl kubeadmcfg upgrade-status -o json\n\n  # Follow changes\n  kubectl kubeadmcfg upgrade-status --watch",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "After printing the state, print it again on every change")
	cmd.Flags().DurationVar(&o.Retry.Timeout, "timeout", o.Retry.Timeout, "Give up if the state has not been read within this time")
	cmd.Flags().DurationVar(&o.StaleAfter, "stale-after", o.StaleAfter, "For an upgrade the agents carry out: "+cmdutil.StaleAfterHelp)
	o.AddFlags(cmd, false)
	return cmd
}

// Complete builds the client, and the operator that judges the agents.
func (o *StatusOptions) Complete(*cobra.Command, []string) error {
	if err := o.complete(); err != nil {
		return err
	}
	o.op = o.upgrades(o.StaleAfter)
	return nil
}

// Validate checks the flags.
func (o *StatusOptions) Validate() error {
	if err := cmdutil.ValidateStaleAfter(o.StaleAfter); err != nil {
		return err
	}
	return o.validate()
}

// Run prints the state, and with --watch every change after it.
func (o *StatusOptions) Run(ctx context.Context) error {
	cm, err := o.engine.Get(ctx) // bounded by --timeout
	if err != nil {
		return o.explain(err)
	}
	if err := o.printStatus(ctx, cm); err != nil || !o.Watch {
		return err
	}
	return o.engine.Watch(ctx, cm.ResourceVersion, func(ev watch.EventType, cm *corev1.ConfigMap) (bool, error) {
		if ev == watch.Deleted {
			fmt.Fprintln(o.ErrOut, "the upgrade state was deleted")
			return true, nil
		}
		return false, o.printStatus(ctx, cm)
	})
}

func (o *StatusOptions) printStatus(ctx context.Context, cm *corev1.ConfigMap) error {
	rec, ok, err := upgradestate.FromConfigMap(cm)
	if err != nil {
		return err
	}
	if !ok {
		return o.explain(upgradestate.ErrNoUpgrade)
	}
	view := statusView{Status: rec.Status()}
	var agents map[string]nodestate.Agent
	if rec.Agents != nil {
		// The agents as they are now: a warning when they cannot be read,
		// as the record still says where each node is.
		if agents, err = o.op.Rollouts.Agents(ctx); err != nil {
			cmdutil.PrintWarnings(o.ErrOut, []string{"cannot tell whether the agents are alive: " + err.Error()})
		} else {
			view.NodeAgents = []nodestate.Agent{}
			for _, n := range rec.Agents.Nodes {
				view.NodeAgents = append(view.NodeAgents, nodestate.AgentFor(agents, n.Node))
			}
		}
	}
	if !o.Print.Human() {
		return o.Print.Print(o.Out, view)
	}
	now := o.now()
	age := func(stamp string) string {
		t, err := time.Parse(time.RFC3339, stamp)
		if err != nil {
			return "?"
		}
		return duration.HumanDuration(now.Sub(t))
	}
	w := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STATE\tFROM\tTO\tAGE\tREASON")
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", rec.State, cmdutil.OrDash(rec.FromVersion), cmdutil.OrDash(rec.ToVersion), age(rec.UpdatedAt), cmdutil.OrDash(rec.Reason))
	st := rec.Status()
	step := "-"
	switch {
	case st.Step > st.Steps:
		step = "done"
	case st.Step > 0:
		step = fmt.Sprintf("%d/%d", st.Step, st.Steps)
	}
	fmt.Fprintln(w, "\nPLAN\tSTEP\tNEXT")
	fmt.Fprintf(w, "%s\t%s\t%s\n", st.PlanName, step, cmdutil.OrDash(joinStates(st.Next)))
	if len(rec.Runners) > 0 {
		fmt.Fprintln(w, "\nRUNNING\tHOST\tBY\tSINCE\tHEARTBEAT\tCOMMAND")
		for _, r := range rec.Runners {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.State, cmdutil.OrDash(r.Host), r.ID, age(r.StartedAt), cmdutil.OrDash(r.Lease), r.Command)
		}
	}
	if len(rec.Hosts) > 0 {
		fmt.Fprintln(w, "\nHOST\tSTATUS\tAGE")
		nodes := make([]string, 0, len(rec.Hosts))
		for n := range rec.Hosts {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		for _, n := range nodes {
			fmt.Fprintf(w, "%s\t%s\t%s\n", n, rec.Hosts[n].Status, age(rec.Hosts[n].UpdatedAt))
		}
	}
	if a := rec.Agents; a != nil {
		fmt.Fprintln(w, "\nNODE\tSTEP\tPHASE\tSINCE\tOUTCOME\tAGENT")
		for _, n := range a.Nodes {
			since, agent := "-", "unknown"
			if n.PhaseSince != "" {
				since = age(n.PhaseSince)
			}
			if agents != nil {
				agent = nodestate.AgentFor(agents, n.Node).Seen()
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Node, cmdutil.OrDash(n.Step), cmdutil.OrDash(n.Phase), since, cmdutil.OrDash(n.Outcome), agent)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if a := rec.Agents; a != nil {
		// Why a node failed, below the table, a line each (a message is
		// too long for a column), unless the REASON above says it already.
		for _, n := range a.Nodes {
			if n.Message != "" && n.Message != rec.Reason {
				fmt.Fprintf(o.Out, "\n%s: %s\n", n.Node, strings.ReplaceAll(strings.TrimRight(n.Message, "\n"), "\n", " | "))
			}
		}
	}
	return nil
}
