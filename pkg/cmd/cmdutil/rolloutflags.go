package cmdutil

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// RolloutFlags are the flags of a rollout's start, shared by `rollout
// start` and the --rollout of patch, edit and restore, so that both start a
// rollout with the same flags and the same meaning: the nodes and their
// order, the canary, the try, and waiting for the end.
type RolloutFlags struct {
	// Rollout is --rollout, on the verbs that write kubeadm-config: start a
	// rollout of exactly what was written.
	Rollout    bool
	Nodes      []string
	Canary     int
	Try        time.Duration
	Wait       bool
	StaleAfter time.Duration

	// withRollout: the command has --rollout, and the others go with it.
	withRollout bool
	// given lists the flags given on the command line (Complete).
	given []string
	// timeoutGiven: --timeout was given, so it bounds a wait too.
	timeoutGiven bool
}

// NewRolloutFlags returns the defaults.
func NewRolloutFlags() *RolloutFlags {
	return &RolloutFlags{}
}

// AddFlags binds the flags; withRollout adds --rollout, for a verb that
// writes kubeadm-config.
func (f *RolloutFlags) AddFlags(cmd *cobra.Command, withRollout bool) {
	fs := cmd.Flags()
	f.withRollout = withRollout
	prefix := ""
	if withRollout {
		fs.BoolVar(&f.Rollout, "rollout", f.Rollout, "After the write, start a rollout of the document written to every control-plane node, one at a time (see 'kubectl kubeadmcfg rollout start')")
		prefix = "With --rollout: "
	}
	fs.StringSliceVar(&f.Nodes, "nodes", f.Nodes, prefix+"The nodes to roll out to, in the order they go (default: every control-plane node, sorted by name)")
	fs.IntVar(&f.Canary, "canary", f.Canary, prefix+"Pause the rollout by itself after this many nodes are done, until 'rollout resume' (0: never)")
	fs.DurationVar(&f.Try, "try", f.Try, prefix+"Put the rollout on trial: unless confirmed with 'rollout confirm' within this time after its last node is done, the agents put every node and the document back (0: no trial)")
	fs.BoolVar(&f.Wait, "wait", f.Wait, prefix+"Wait until every node runs the document or the rollout stops; the exit code says how it ended (0, 8, 9, 4, 7)")
	fs.DurationVar(&f.StaleAfter, "stale-after", f.StaleAfter, prefix+StaleAfterHelp+" (the preflight refuses a lost agent)")
}

// Complete records which flags were given.
func (f *RolloutFlags) Complete(cmd *cobra.Command) {
	f.given = nil
	for _, name := range []string{"nodes", "canary", "try", "wait", "stale-after"} {
		if cmd.Flags().Changed(name) {
			f.given = append(f.given, "--"+name)
		}
	}
	f.timeoutGiven = cmd.Flags().Changed("timeout")
}

// Enabled reports whether the command starts a rollout.
func (f *RolloutFlags) Enabled() bool { return f.Rollout || !f.withRollout }

// Validate checks the values without I/O.
func (f *RolloutFlags) Validate() error {
	if f.withRollout && !f.Rollout && len(f.given) > 0 {
		verb := "go"
		if len(f.given) == 1 {
			verb = "goes"
		}
		return exitcode.Usagef("%s only %s with --rollout", strings.Join(f.given, ", "), verb)
	}
	for i, n := range f.Nodes {
		switch {
		case n == "":
			return exitcode.Usagef("--nodes: node %d has no name", i+1)
		case len(validation.IsDNS1123Subdomain(n)) > 0:
			return exitcode.Usagef("--nodes: %q is not a node name (lowercase letters, digits, '-' and '.')", n)
		case slices.Contains(f.Nodes[:i], n):
			return exitcode.Usagef("--nodes names %s twice", n)
		}
	}
	if f.Canary < 0 {
		return exitcode.Usagef("--canary must be at least 0, not %d", f.Canary)
	}
	if len(f.Nodes) > 0 && f.Canary >= len(f.Nodes) {
		return exitcode.Usagef("--canary must be fewer than the %d nodes of --nodes, not %d", len(f.Nodes), f.Canary)
	}
	if f.Try < 0 {
		return exitcode.Usagef("--try must not be negative, not %s", f.Try)
	}
	if f.Try > 0 && f.Try < time.Second {
		return exitcode.Usagef("--try must be at least 1s, not %s", f.Try)
	}
	return ValidateStaleAfter(f.StaleAfter)
}

// StaleAfterHelp is the help of --stale-after, the same in every verb
// that judges agents.
const StaleAfterHelp = "Take an agent whose Lease went unrenewed for longer than this for lost; 0: each Lease's own duration (three of its agent's heartbeats)"

// ValidateStaleAfter checks a --stale-after value, with the same message
// in every verb.
func ValidateStaleAfter(d time.Duration) error {
	if d != 0 && d < time.Second {
		return exitcode.Usagef("--stale-after must be 0 (each agent's own Lease duration) or at least 1s, not %s", d)
	}
	return nil
}

// Spec is the rollout the flags ask for, before its document is pinned.
func (f *RolloutFlags) Spec() rollout.Spec {
	return rollout.Spec{Nodes: slices.Clone(f.Nodes), Canary: f.Canary, Try: f.Try}
}

// Budget is the bound of a command that may start a rollout and wait for
// it: timeout when --timeout was given (the preflight's wait for nodes not
// Ready yet included); without it, nothing bounds a command that waits for
// the rollout (0), as kubectl rollout status, and one that does not is
// bounded by timeout plus the preflight's own bound. Each read and write
// in it is still bounded by timeout.
func (f *RolloutFlags) Budget(timeout time.Duration) time.Duration {
	switch {
	case !f.Enabled() || f.timeoutGiven:
		return timeout
	case f.Wait:
		return 0
	}
	return timeout + operator.DefaultPreflightWait
}

// Operator is what the flags decide of the operator that starts the
// rollout: how agents are judged, how long the preflight waits for nodes
// not Ready yet (--timeout when given, else operator.DefaultPreflightWait),
// and where it says what it waits for.
func (f *RolloutFlags) Operator(timeout time.Duration, progress io.Writer) OperatorOptions {
	o := OperatorOptions{StaleAfter: f.StaleAfter, Progress: progress}
	if f.timeoutGiven {
		o.PreflightWait = timeout
	}
	return o
}

// OperatorOptions are how an operator judges agents and waits: see
// operator.Rollouts. Progress, when set, gets one line for each thing a
// wait starts waiting for.
type OperatorOptions struct {
	StaleAfter, PreflightWait time.Duration
	Progress                  io.Writer
}

// NewOperator assembles the rollout operator: the record's engine in the
// plugin's namespace (created when missing; no write queue, as operators
// and agents rarely contend and the queue's Leases would need rights of
// their own), kubeadm-config's engine config, the API server's clock, and
// --identity as who acts.
func NewOperator(c *Clients, cluster *ClusterFlags, retry *RetryFlags, config *engine.Engine, o OperatorOptions) *operator.Rollouts {
	opts := retry.EngineOptions()
	opts.Queue, opts.CreateIfMissing = nil, true
	op := &operator.Rollouts{
		Record:        engine.New(c.Client, engine.Target{Namespace: cluster.Namespace(), Name: rollout.DefaultConfigMap}, opts),
		Config:        config,
		Now:           c.Clock.Now,
		By:            retry.Identity,
		StaleAfter:    o.StaleAfter,
		PreflightWait: o.PreflightWait,
	}
	if w := o.Progress; w != nil {
		op.Progress = func(line string) { fmt.Fprintln(w, line) }
	}
	return op
}

// RolloutHint adds to a rollout error the flag or the command that deals
// with it, as the cobra layer does for every domain error.
func RolloutHint(err error) error {
	var notTarget *operator.NotTargetError
	var drop *rollout.DropError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &notTarget):
		return exitcode.WithHint(err, "use --force to put the previous document back anyway")
	case errors.As(err, &drop) && drop.ID == 0:
		return exitcode.WithHint(err, "carry it with a plain 'kubectl kubeadmcfg rollout start' (no --try), then try the next change with 'kubectl kubeadmcfg patch --rollout --try'")
	case errors.As(err, &drop):
		return exitcode.WithHint(err, "use --force to go back anyway, dropping those writes")
	case errors.Is(err, rollout.ErrStoppedWaiting):
		return exitcode.WithHint(err, "follow it with 'kubectl kubeadmcfg rollout status -w'")
	}
	return err
}

// describeSpec says what the flags ask for, for a line of output.
func describeSpec(s *rollout.Status) string {
	var extra []string
	if s.Canary > 0 {
		extra = append(extra, fmt.Sprintf("canary %d", s.Canary))
	}
	if s.Try != nil {
		extra = append(extra, "try "+s.Try.Duration.Duration.String())
	}
	if len(extra) == 0 {
		return ""
	}
	return " (" + strings.Join(extra, ", ") + ")"
}
