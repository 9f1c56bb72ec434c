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
	Watch bool
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
watch after it). Exit 5 when no upgrade is recorded.`,
		Example: "  # Show the state as JSON\n  kubectl kubeadmcfg upgrade-status -o json\n\n  # Follow changes\n  kubectl kubeadmcfg upgrade-status --watch",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "After printing the state, print it again on every change")
	cmd.Flags().DurationVar(&o.Retry.Timeout, "timeout", o.Retry.Timeout, "Give up if the state has not been read within this time")
	o.AddFlags(cmd, false)
	return cmd
}

// Complete builds the client.
func (o *StatusOptions) Complete(*cobra.Command, []string) error { return o.complete() }

// Validate checks the flags.
func (o *StatusOptions) Validate() error { return o.validate() }

// Run prints the state, and with --watch every change after it.
func (o *StatusOptions) Run(ctx context.Context) error {
	cm, err := o.engine.Get(ctx) // bounded by --timeout
	if err != nil {
		return o.explain(err)
	}
	if err := o.printStatus(cm); err != nil || !o.Watch {
		return err
	}
	return o.engine.Watch(ctx, cm.ResourceVersion, func(ev watch.EventType, cm *corev1.ConfigMap) (bool, error) {
		if ev == watch.Deleted {
			fmt.Fprintln(o.ErrOut, "the upgrade state was deleted")
			return true, nil
		}
		return false, o.printStatus(cm)
	})
}

func (o *StatusOptions) printStatus(cm *corev1.ConfigMap) error {
	rec, ok, err := upgradestate.FromConfigMap(cm)
	if err != nil {
		return err
	}
	if !ok {
		return o.explain(upgradestate.ErrNoUpgrade)
	}
	if !o.Print.Human() {
		return o.Print.Print(o.Out, rec.Status())
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
	return w.Flush()
}
