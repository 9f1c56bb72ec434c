// Package cmdutil is what the verb packages under pkg/cmd share, so that no
// verb needs another verb's package: the flag groups (cluster, retry, write,
// backup, node, print), the driver that runs a verb's Complete, Validate and
// Run, result printing, input reading, the editor, the local clock and the
// completions more than one verb offers. It is the cobra layer's own: domain
// packages never import it.
package cmdutil

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Verb is the shape of every command: Complete reads flags and arguments,
// parses them and builds clients; Validate checks the result without I/O;
// Run does the work. It is exported so that every verb package runs its
// options through the one driver, Run.
type Verb interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// Budgeted is a verb whose whole run, every API call in it, is bounded by
// one --timeout. Budget is exported because the verbs that implement it
// live in their own packages. A Budget of 0 bounds nothing: a verb that
// waits for a rollout without --timeout runs until it ends.
type Budgeted interface {
	Budget() time.Duration
}

// Run drives a verb through its three steps, within its budget when it has
// one. Every verb's RunE calls it, so the steps run in the same order
// everywhere.
func Run(ctx context.Context, v Verb, cmd *cobra.Command, args []string) error {
	if err := v.Complete(cmd, args); err != nil {
		return err
	}
	if err := v.Validate(); err != nil {
		return err
	}
	if b, ok := v.(Budgeted); ok && b.Budget() > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.Budget())
		defer cancel()
	}
	return v.Run(ctx)
}

// ExactArgs is cobra.ExactArgs with a usage error that names the
// arguments, shared so that every verb reports a wrong count the same way.
func ExactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return exitcode.Usagef("%s takes %s (got %d arguments)", cmd.CommandPath(), names, len(args))
		}
		return nil
	}
}

// AddTimeoutFlag binds --timeout for a command that only reads, with the
// same help in every verb.
func AddTimeoutFlag(cmd *cobra.Command, timeout *time.Duration) {
	cmd.Flags().DurationVar(timeout, "timeout", *timeout, "Give up if the command has not finished within this time (exit 4; exit 1 when the API server cannot be reached)")
}

// ValidateTimeout checks a --timeout value, with the same message in every
// verb.
func ValidateTimeout(timeout time.Duration) error {
	if timeout <= 0 {
		return exitcode.Usagef("--timeout must be positive, not %s", timeout)
	}
	return nil
}
