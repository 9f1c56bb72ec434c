package upgrade

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// Flags are what every upgrade-* command shares: where the state
// lives, how a write is retried and who makes it, and how the result is
// printed. Complete assembles the write pipeline for the state ConfigMap.
type Flags struct {
	Cluster        *cmdutil.ClusterFlags
	Print          *cmdutil.PrintFlags
	Retry          *cmdutil.RetryFlags
	StateConfigMap string

	engine  *engine.Engine
	clients *cmdutil.Clients
	now     func() time.Time // the API server's time
	// forceHint: the command has --force, so a refused transition says so.
	forceHint bool
	genericiooptions.IOStreams
}

// NewFlags returns the defaults.
func NewFlags(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *Flags {
	return &Flags{Cluster: cluster, Print: cmdutil.NewPrintFlags(), Retry: cmdutil.NewRetryFlags(),
		StateConfigMap: upgradestate.DefaultConfigMap, IOStreams: streams, now: cmdutil.LocalNow}
}

// AddFlags binds the flags; writes adds those of commands that write.
func (f *Flags) AddFlags(cmd *cobra.Command, writes bool) {
	cmd.Flags().StringVar(&f.StateConfigMap, "state-configmap", f.StateConfigMap, "Name of the ConfigMap that holds the upgrade state (in -n)")
	if writes {
		f.Retry.AddFlags(cmd, "Who is making the change, recorded in the history (default: the hostname)")
	}
	f.Print.AddFlags(cmd)
}

func (f *Flags) complete() error {
	f.Retry.Complete()
	if err := f.Print.Complete(); err != nil {
		return err
	}
	c, err := f.Cluster.Clients()
	if err != nil {
		return err
	}
	opts := f.Retry.EngineOptions()
	opts.CreateIfMissing = true
	f.engine = engine.New(c.Client, f.target(), opts)
	f.clients = c
	f.now = c.Clock.Now
	return nil
}

// upgrades assembles, once complete has run, the operator of an upgrade
// the agents carry out: the state ConfigMap's write pipeline, and the
// rollout operator of the same namespace (its record, the agents' Leases
// judged by staleAfter, kubeadm-config, the API server's clock,
// --identity, and the preflight's progress lines on stderr).
func (f *Flags) upgrades(staleAfter time.Duration) *operator.Upgrades {
	config := engine.New(f.clients.Client, f.Cluster.Target(engine.DefaultKey), engine.Options{Timeout: f.Retry.Timeout})
	return &operator.Upgrades{Record: f.engine, Rollouts: cmdutil.NewOperator(f.clients, f.Cluster, f.Retry, config,
		cmdutil.OperatorOptions{StaleAfter: staleAfter, Progress: f.Print.Progress(f.ErrOut)})}
}

func (f *Flags) validate() error {
	if f.StateConfigMap == "" {
		return exitcode.Usagef("--state-configmap must not be empty")
	}
	return f.Retry.Validate()
}

func (f *Flags) target() engine.Target {
	return engine.Target{Namespace: f.Cluster.Namespace(), Name: f.StateConfigMap}
}

// clock stamps transitions with the API server's time, read from the
// responses of this very write, so every host's stamps share one clock.
func (f *Flags) clock() upgradestate.Clock {
	return upgradestate.Clock{Now: f.now(), By: f.Retry.Identity}
}

// explain says where the state was looked for when there is none.
func (f *Flags) explain(err error) error {
	if errors.Is(err, upgradestate.ErrNoUpgrade) || exitcode.FromError(err) == exitcode.NotFound {
		return exitcode.NotFoundf("no upgrade is recorded in %s (start one with 'kubectl kubeadmcfg upgrade-start')", f.target())
	}
	var transition *upgradestate.TransitionError
	if errors.As(err, &transition) && f.forceHint {
		return exitcode.WithHint(err, "or use --force")
	}
	var busy *upgradestate.InProgressError
	if errors.As(err, &busy) {
		how := "--force" // a plan without an abort state ends only by a forced move
		if busy.Abort != "" {
			how = string(busy.Abort)
		}
		return exitcode.New(exitcode.FromError(err), fmt.Errorf("%w (upgrade-set %s)", err, how))
	}
	return err
}

// apply runs op on the record inside a compare-and-swap write, so the rule
// is checked against the state actually replaced.
func (f *Flags) apply(ctx context.Context, op upgradestate.Op) (upgradestate.Change, *engine.Result, error) {
	var change upgradestate.Change
	res, err := f.engine.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		var err error
		change, err = upgradestate.Apply(cm, op)
		return change.Changed, err
	})
	if err != nil {
		return change, res, f.explain(err)
	}
	if change.After == nil {
		return change, res, f.explain(upgradestate.ErrNoUpgrade)
	}
	return change, res, nil
}

// write applies op and prints the outcome.
func (f *Flags) write(ctx context.Context, op upgradestate.Op) error {
	change, res, err := f.apply(ctx, op)
	if err != nil {
		return err
	}
	after := change.After
	if !f.Print.Human() {
		return f.Print.Print(f.Out, after.Status())
	}
	switch {
	case !res.Changed:
		fmt.Fprintf(f.Out, "upgrade state unchanged: %s\n", after.State)
	case change.Before == "" || (after.State == after.PlanOf().Start && change.Before != after.State):
		fmt.Fprintf(f.Out, "upgrade started: %s -> %s, state %s, plan %s\n", cmdutil.OrDash(after.FromVersion), after.ToVersion, after.State, after.PlanOf().Name)
	case change.Before != after.State:
		fmt.Fprintf(f.Out, "upgrade state: %s -> %s\n", change.Before, after.State)
	default:
		fmt.Fprintf(f.Out, "upgrade state: %s (hosts updated)\n", after.State)
	}
	return nil
}
