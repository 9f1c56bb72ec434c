package upgrade

import (
	"context"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// Completions of the upgrade-* verbs: the states, host statuses and nodes
// of the recorded upgrade's plan, looked up with a short timeout so a TAB
// never hangs.

// completionPlan is the plan of the recorded upgrade, or the default plan
// when there is none (or it cannot be read in time).
func completionPlan(ctx context.Context, f *Flags) (*upgradestate.Plan, *upgradestate.Record) {
	if c, err := f.Cluster.Clients(); err == nil {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if cm, err := engine.New(c.Client, f.target(), engine.Options{}).Get(ctx); err == nil {
			if rec, ok, err := upgradestate.FromConfigMap(cm); err == nil && ok {
				return rec.PlanOf(), rec
			}
		}
	}
	p, _ := upgradestate.Builtin(upgradestate.DefaultPlan)
	return p, nil
}

// completeStates offers the states of the upgrade's plan.
func completeStates(f *Flags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		p, _ := completionPlan(cmd.Context(), f)
		out := []string{}
		for _, s := range p.States() {
			out = append(out, string(s))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeHostStatuses offers the host statuses of the upgrade's plan.
func completeHostStatuses(f *Flags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		p, _ := completionPlan(cmd.Context(), f)
		out := []string{}
		for _, s := range p.HostStatuses() {
			out = append(out, string(s))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNodes offers the nodes recorded in the upgrade state, then the
// host statuses.
func completeNodes(f *Flags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 1 {
			return completeHostStatuses(f)(cmd, args, s)
		}
		if len(args) > 1 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		_, rec := completionPlan(cmd.Context(), f)
		if rec == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		nodes := make([]string, 0, len(rec.Hosts))
		for n := range rec.Hosts {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		return nodes, cobra.ShellCompDirectiveNoFileComp
	}
}
