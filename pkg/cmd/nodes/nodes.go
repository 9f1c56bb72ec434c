// Package nodes is the nodes verb: every control-plane node's state as its
// agent publishes it on its Lease (pkg/rollout's AgentOf), read from the API
// alone, without access to the nodes.
package nodes

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

const nodesLong = `Show every control-plane node's state as its agent last published it, from
the API alone: whether the node runs what the live ClusterConfiguration
renders to, and if not which components differ.

AGENT is alive, lost (its Lease went unrenewed for longer than its own
duration, three of its agent's heartbeats, or --stale-after when given, on
the clock of the API server that answered) or none (the node has no
agent). It is what the API shows, for display: a rollout's preflight and
'rollout abandon' watch a Lease that looks stale before they act on it.
IN-SYNC is yes, no (DIFFERS names the components), or unknown (DIFFERS says
why: no agent, no state published yet, the agent could not tell, or its
state was found for an older document than kubeadm-config holds now).
LAST-KNOWN-GOOD is the backup the node last ran healthy on; LAST-SEEN when
the agent last renewed its Lease.

Control-plane nodes are the nodes labelled node-role.kubernetes.io/control-plane
(listing them needs list on nodes); a node with an agent but without the
label is shown too. Exit 0 whatever the nodes' state; with --exit-code, as
'git diff --exit-code', exit 11 (printing the table all the same, and no
error) unless every node's IN-SYNC is yes: one out of sync, or unknown
(no agent, no state, a state found for an older document), or no node at
all. Errors keep their own codes (1-10), so a script tells them apart.`

const nodesExample = `  # Which control-plane nodes run the live document
  kubectl kubeadmcfg nodes

  # As JSON, with each agent's published state
  kubectl kubeadmcfg nodes -o json

  # In a script: 0 when every node runs the live document, 11 when not
  kubectl kubeadmcfg nodes --exit-code >/dev/null || echo "exit $?"`

// Options show the nodes' published state.
type Options struct {
	Cluster    *cmdutil.ClusterFlags
	Print      *cmdutil.PrintFlags
	Retry      *cmdutil.RetryFlags
	StaleAfter time.Duration
	// ExitCode exits 11 (exitcode.OutOfSync) unless every node is in sync.
	ExitCode bool

	op *operator.Rollouts
	genericiooptions.IOStreams
}

// Row is one node as nodes shows it.
type Row struct {
	Name string `json:"name"`
	// ControlPlane is false for a node with an agent but without the
	// control-plane label.
	ControlPlane bool            `json:"controlPlane"`
	Agent        nodestate.Agent `json:"agent"`
	InSync       nodestate.Sync  `json:"inSync"`
	// InSyncReason names the components that differ, or why it is not
	// known.
	InSyncReason string `json:"inSyncReason,omitempty"`
}

// View is what nodes prints with -o.
type View struct {
	// ConfigMap is kubeadm-config, whose document the nodes are judged
	// against: LiveHash at LiveResourceVersion.
	ConfigMap           string `json:"configMap"`
	LiveHash            string `json:"liveHash"`
	LiveResourceVersion string `json:"liveResourceVersion"`
	Nodes               []Row  `json:"nodes"`
}

// NewOptions returns the defaults.
func NewOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *Options {
	return &Options{Cluster: cluster, Print: cmdutil.NewPrintFlags(), Retry: cmdutil.NewRetryFlags(),
		IOStreams: streams}
}

// NewCmdNodes builds the nodes command.
func NewCmdNodes(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "nodes",
		Short:   "Show whether each control-plane node runs the live ClusterConfiguration",
		Long:    nodesLong,
		Example: nodesExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().DurationVar(&o.StaleAfter, "stale-after", o.StaleAfter, cmdutil.StaleAfterHelp)
	cmd.Flags().BoolVar(&o.ExitCode, "exit-code", o.ExitCode, "Exit 11 unless every node runs the live document (IN-SYNC yes), as git diff --exit-code does")
	cmdutil.AddTimeoutFlag(cmd, &o.Retry.Timeout)
	o.Print.AddFlags(cmd)
	return cmd
}

// Complete builds the readers.
func (o *Options) Complete(*cobra.Command, []string) error {
	o.Retry.Complete()
	if err := o.Print.Complete(); err != nil {
		return err
	}
	c, err := o.Cluster.Clients()
	if err != nil {
		return err
	}
	config := engine.New(c.Client, o.Cluster.Target(engine.DefaultKey), o.Retry.EngineOptions())
	o.op = cmdutil.NewOperator(c, o.Cluster, o.Retry, config, cmdutil.OperatorOptions{StaleAfter: o.StaleAfter})
	return nil
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if err := cmdutil.ValidateStaleAfter(o.StaleAfter); err != nil {
		return err
	}
	return cmdutil.ValidateTimeout(o.Retry.Timeout)
}

// Budget bounds the command by --timeout.
func (o *Options) Budget() time.Duration { return o.Retry.Timeout }

// Run reads the nodes, the agents and the live document, and prints them.
func (o *Options) Run(ctx context.Context) error {
	cm, err := o.op.Config.Get(ctx)
	if err != nil {
		return err
	}
	doc, err := engine.DocumentOf(cm, o.op.Config.Target())
	if err != nil {
		return err
	}
	cps, err := o.op.Record.ControlPlaneNodes(ctx)
	if err != nil {
		return err
	}
	agents, err := o.op.Agents(ctx)
	if err != nil {
		return err
	}
	t := o.op.Config.Target()
	v := &View{ConfigMap: t.Namespace + "/" + t.Name, LiveHash: rollout.Hash([]byte(doc)), LiveResourceVersion: cm.ResourceVersion, Nodes: []Row{}}
	for _, n := range nodestate.NodeNames(cps, agents) {
		a := nodestate.AgentFor(agents, n)
		sync, why := a.SyncWith(v.LiveHash)
		v.Nodes = append(v.Nodes, Row{Name: n, ControlPlane: slices.Contains(cps, n), Agent: a, InSync: sync, InSyncReason: why})
	}
	o.warnCertificates(v)
	if err := o.print(v); err != nil {
		return err
	}
	if o.ExitCode {
		return exitStatus(v)
	}
	return nil
}

// print prints the view as -o asks.
func (o *Options) print(v *View) error {
	if !o.Print.Human() {
		return o.Print.Print(o.Out, v)
	}
	if len(v.Nodes) == 0 {
		_, err := fmt.Fprintf(o.ErrOut, "no node is labelled %s, and no agent publishes a state\n", engine.ControlPlaneLabel)
		return err
	}
	return printNodes(o.Out, v)
}

// exitStatus is what --exit-code makes of the view: nil when every node
// is known to run the live document, exit 11 otherwise, quietly (the table
// said which). No node at all is not "every node in sync".
func exitStatus(v *View) error {
	if len(v.Nodes) == 0 {
		return exitcode.Quiet(exitcode.OutOfSync)
	}
	for _, r := range v.Nodes {
		if r.InSync != nodestate.SyncYes {
			return exitcode.Quiet(exitcode.OutOfSync)
		}
	}
	return nil
}

// warnCertificates warns on stderr of the agents whose certificates run
// out soon (certificateWarnings).
func (o *Options) warnCertificates(v *View) {
	for _, w := range certificateWarnings(v, o.op.Now()) {
		fmt.Fprintln(o.ErrOut, "warning: "+w)
	}
}

// certificateWarnings says which agents' client certificates expire within
// nodestate.CertificateWarning of now (the API server's time), or have:
// nothing renews a certificate made with kubeadm kubeconfig user but its
// recipe, and an agent whose certificate ran out can neither renew its
// Lease nor take its node's turn.
func certificateWarnings(v *View, now time.Time) []string {
	var out []string
	for _, r := range v.Nodes {
		expires, ok := r.Agent.State.CertificateExpiry()
		if !ok || expires.Sub(now) > nodestate.CertificateWarning {
			continue
		}
		when := "expires in " + duration.HumanDuration(expires.Sub(now))
		if !expires.After(now) {
			when = "expired " + duration.HumanDuration(now.Sub(expires)) + " ago"
		}
		out = append(out, fmt.Sprintf("the client certificate of node %s's agent %s (%s): renew it, as docs/agent.md says (\"Renewing the agent's credentials\")",
			r.Name, when, expires.UTC().Format(time.RFC3339)))
	}
	return out
}

func printNodes(out io.Writer, v *View) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tAGENT\tVERSION\tIN-SYNC\tDIFFERS\tLAST-KNOWN-GOOD\tLAST-SEEN")
	for _, r := range v.Nodes {
		name := r.Name
		if !r.ControlPlane {
			name += " (not control-plane)"
		}
		version, lastGood := "-", "-"
		if s := r.Agent.State; s != nil {
			version, lastGood = cmdutil.OrDash(s.AgentVersion), cmdutil.OrDash(s.LastKnownGood)
		}
		seen := "-"
		if r.Agent.LastSeen != nil {
			seen = duration.HumanDuration(r.Agent.LastSeen.Duration) + " ago"
		}
		differs := cmdutil.OrDash(r.InSyncReason)
		if r.InSync == nodestate.SyncNo {
			differs = strings.ReplaceAll(differs, " ", "")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, r.Agent.Liveness, version, r.InSync, differs, lastGood, seen)
	}
	return w.Flush()
}
