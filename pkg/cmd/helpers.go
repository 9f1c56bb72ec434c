package cmd

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Helpers more than one verb uses.

// readInput reads a file named on the command line, or stdin for "-", of at
// most 2 MiB. what names the file in errors ("the patch file", "the config
// file"). A larger input is refused as invalid (exit 3), as soon as the
// limit is passed: /dev/zero ends.
func readInput(name, what string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		data, err := input.Read(stdin)
		if errors.Is(err, input.ErrTooLarge) {
			return nil, exitcode.Invalidf("%s on stdin is %w", what, err)
		}
		if err != nil {
			return nil, exitcode.Failuref("read %s from stdin: %w", what, err)
		}
		return data, nil
	}
	data, err := input.ReadFile(name)
	if errors.Is(err, input.ErrTooLarge) {
		return nil, exitcode.Invalidf("%s %s is %w", what, name, input.ErrTooLarge)
	}
	if err != nil {
		return nil, exitcode.Usagef("cannot read %s: %w", what, err)
	}
	return data, nil
}

// exactArgs is cobra.ExactArgs with a usage error that names the arguments.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return exitcode.Usagef("%s takes %s (got %d arguments)", cmd.CommandPath(), names, len(args))
		}
		return nil
	}
}

// orDash shows an empty value as "-" in tables and messages.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// verb is the shape of every command: Complete reads flags and arguments,
// parses them and builds clients; Validate checks the result without I/O;
// Run does the work.
type verb interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// budgeted is a verb whose whole run, every API call in it, is bounded by
// one --timeout.
type budgeted interface {
	budget() time.Duration
}

// run drives a verb through its three steps.
func run(ctx context.Context, v verb, cmd *cobra.Command, args []string) error {
	if err := v.Complete(cmd, args); err != nil {
		return err
	}
	if err := v.Validate(); err != nil {
		return err
	}
	if b, ok := v.(budgeted); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.budget())
		defer cancel()
	}
	return v.Run(ctx)
}

// addTimeoutFlag binds --timeout for a command that only reads.
func addTimeoutFlag(cmd *cobra.Command, timeout *time.Duration) {
	cmd.Flags().DurationVar(timeout, "timeout", *timeout, "Give up if the command has not finished within this time (exit 4; exit 1 when the API server cannot be reached)")
}

// validateTimeout checks a --timeout value.
func validateTimeout(timeout time.Duration) error {
	if timeout <= 0 {
		return exitcode.Usagef("--timeout must be positive, not %s", timeout)
	}
	return nil
}
