// Package agent is the agent verb: the long-running process on each
// control-plane node that carries rollouts to its node. It reads the node
// flags (shared with reconfigure), builds the clients, runs pkg/rollout's
// Agent, and writes its log lines with the flags that fix what they report.
package agent

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	nodeagent "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/agent"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/kubeadmupgrade"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/managed"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/version"
)

const agentLong = `Run the rollout agent of this control-plane node until stopped.

One agent runs on each control-plane node, as a systemd service or a
DaemonSet Pod (deploy/ has both). It follows the rollout record (the ConfigMap
kubeadmcfg-rollout, in the namespace of kubeadm-config) and kubeadm-config,
with one watch each and a read of the record every 30s at most. When it is
its node's turn in a rollout, it reconfigures the node to the document the
rollout pinned, never to whatever kubeadm-config holds at that moment, with
the same code as 'reconfigure' and the same flags: one component at a time,
health-checked, rolled back when one does not come up. It records the start
and the outcome of the turn in the record (compare-and-swap writes), and
each as an Event on it ('kubectl describe configmap kubeadmcfg-rollout'). A
node that fails and is rolled back fails the rollout: no later node starts.

An agent restarted while its node's turn was in progress resumes the node:
it applies the pinned document again (components already replaced compare
equal and are waited for until healthy), and when that fails it puts every
component back on its manifest from before the rollout, from the manifest
backups. A node is never started twice. When a rollout on trial (--try) is
not confirmed in time, the agents revert it: one puts kubeadm-config back,
if it still holds the rollout's document, and every changed node goes back,
last first.

The agent holds the Lease kubeadmcfg-agent-NODE, renewed every
--heartbeat-interval on the API server's clock, and publishes on it
(annotation kubeadmcfg.io/node-state) whether the node runs what the live
kubeadm-config renders to, which components differ, its last known good and
the agent's version and when its client certificate expires, whether or not
a rollout runs. An agent that starts while another holds its node's Lease
(its predecessor was just killed) watches it, and takes it over once it has
seen it unchanged for the Lease's duration; a second agent of a node whose
first one goes on renewing it exits 4. An agent whose renewals have failed
for half the Lease's duration starts no work and writes no record until one
gets through again.

A rollout record that cannot be read (edited by hand) is reported once per
version of it, and the agent touches no node until it is fixed or deleted.
As reconfigure, a node's turn does not change versions (a rollout that
would fails on its first node, unchanged), and waits while the upgrade
record (--state-configmap) says an upgrade is in progress.

An agent of a control plane of several nodes whose kubeconfig names its own
node's API server (its advertise address, its name, or loopback, on its
bind port) refuses to start (exit 4): that server is down exactly when the
agent must record its node's outcome. It must reach the API through the
controlPlaneEndpoint, as the recipe in docs/agent.md makes its kubeconfig.

It keeps the condition KubeadmConfigOutOfDate on its own Node ('kubectl
describe node'): True while the node's control plane does not run the live
kubeadm-config document or its last turn failed (reason ComponentsDiffer,
TurnRolledBack, RollbackFailed), False when it runs it (InSync), Unknown
when it cannot tell. The Node is written only when the condition changes,
and an Event on it says when the node goes out of date and when it is back.
With --metrics-bind-address (127.0.0.1:10268 by default; 0 turns it off) it
serves Prometheus metrics on /metrics: kubeadmcfg_node_in_sync per
component, the condition, its last turn's outcome and duration, its
heartbeat, its certificate's expiry, the rollout's and the upgrade's phase.
deploy/prometheus-rules.yaml alerts on them.

On SIGTERM or SIGINT the agent gives a turn in progress --stop-grace to
finish, then interrupts it (it is rolled back, within --wait per component),
records the outcome, sets its Node's condition Unknown (AgentStopped),
deletes its Lease and exits 0.

It logs one line per event on stderr: the API server's time, info or
warning, a reason (NodeStarted, NodeUpdated, NodeRolledBack, TryExpired,
RecordDamaged, NodeState, ...) and a message. With --log-format json it
writes one JSON object per event instead, for a log collector that keeps
fields: time, level (INFO or WARN), msg, node, reason, and, when the event
concerns them, rollout (the rollout's id), upgrade (its target version),
step, phase and error. A failure it tries again (a watch while the API
server is away, a write the API refuses) is logged once per distinct
message, and a refused write is retried with a backoff of up to 30s.`

const agentExample = `  # Run this node's agent, as the systemd unit in deploy/ does
  kubectl kubeadmcfg agent --kubeconfig /etc/kubernetes/kubeadmcfg-agent.conf

  # A node with kubeadm patches, whose components may take 3 minutes to come up
  kubectl kubeadmcfg agent --node-name cp-1 --patches /etc/kubernetes/patches --wait 3m

  # Metrics on the node's address, for a Prometheus outside the node
  kubectl kubeadmcfg agent --metrics-bind-address 192.0.2.11:10268`

// Options runs the agent of this node.
type Options struct {
	Cluster *cmdutil.ClusterFlags
	*cmdutil.ReconfigureFlags
	HeartbeatInterval time.Duration
	StopGrace         time.Duration
	// The node's part of an upgrade the agents carry out (upgrade-apply).
	KubeadmTemplate       string
	KubeletRestart        string
	KubeletRestartTimeout time.Duration
	KubeletConfig         string
	IgnorePreflightErrors []string
	KeepKubeadmBackups    int
	// MetricsBindAddress is where /metrics is served, HOST:PORT; "0" serves
	// none.
	MetricsBindAddress string
	// LogFormat is how the agent writes its events on stderr: text, one
	// line each, or json, one object each, for a log pipeline that indexes
	// fields (a DaemonSet's log shipper, a collector reading journald).
	LogFormat string

	config nodeagent.Config
	log    *printer
	genericiooptions.IOStreams
}

// NewOptions returns options with defaults.
func NewOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *Options {
	return &Options{Cluster: cluster, ReconfigureFlags: cmdutil.NewReconfigureFlags(),
		HeartbeatInterval: nodestate.DefaultHeartbeat, StopGrace: nodeagent.DefaultStopGrace,
		KubeletRestart: strings.Join(kubeadmupgrade.DefaultKubeletRestart, " "), KubeletRestartTimeout: kubeadmupgrade.DefaultKubeletRestartTimeout,
		KubeletConfig: "/var/lib/kubelet/config.yaml", KeepKubeadmBackups: kubeadmupgrade.DefaultKeepBackups,
		MetricsBindAddress: DefaultMetricsBindAddress, LogFormat: logFormatText,
		IOStreams: streams}
}

// NewCmdAgent builds the agent command.
func NewCmdAgent(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "agent",
		Short:   "Run this control-plane node's rollout agent: it carries rollouts to the node and publishes the node's state",
		Long:    agentLong,
		Example: agentExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags binds the options' flags.
func (o *Options) AddFlags(cmd *cobra.Command) {
	o.ReconfigureFlags.AddFlags(cmd, cmdutil.NodeHelp{
		Name:    "This node's name, which names its mirror Pods, its entry in a rollout and its Lease (default: the hostname, lowercased)",
		Address: "This node's API server advertise address (default: read from its kube-apiserver manifest)",
		Port:    "This node's API server port, digits only, 1-65535 (default: read from its kube-apiserver manifest)",
	})
	fs := cmd.Flags()
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", o.HeartbeatInterval, "How often the agent's Lease is renewed; it is taken for lost after three missed renewals")
	fs.DurationVar(&o.StopGrace, "stop-grace", o.StopGrace, "On SIGTERM or SIGINT, how long a node's turn in progress may go on before it is interrupted and rolled back")
	fs.StringVar(&o.KubeadmTemplate, "kubeadm-template", o.KubeadmTemplate,
		"Upgrades: this node's kubeadm of each Kubernetes release, {version} standing for the release (/usr/local/kubernetes/{version}/bin/kubeadm; default: --kubeadm, of the one release it is)")
	fs.StringVar(&o.KubeletRestart, "kubelet-restart-command", o.KubeletRestart,
		"Upgrades: the command (split on spaces) that installs the kubelet of release $"+kubeadmupgrade.KubeletVersionEnv+" on this node and restarts it")
	fs.DurationVar(&o.KubeletRestartTimeout, "kubelet-restart-timeout", o.KubeletRestartTimeout,
		"Upgrades: how long --kubelet-restart-command may run (--wait bounds the wait for the kubelet after it); past it, or when the agent is stopped, the command gets SIGTERM (the drop-in's install script then stops its systemd unit) and a minute later SIGKILL, and the node's kubelet step fails")
	fs.StringVar(&o.KubeletConfig, "kubelet-config", o.KubeletConfig, "Upgrades: the kubelet's configuration file, which says where its /healthz answers")
	fs.StringSliceVar(&o.IgnorePreflightErrors, "ignore-preflight-errors", o.IgnorePreflightErrors, "Upgrades: kubeadm's preflight checks to ignore on this node, as kubeadm's flag of that name")
	fs.IntVar(&o.KeepKubeadmBackups, "keep-kubeadm-backups", o.KeepKubeadmBackups, "Upgrades: how many of each kind of backup directory kubeadm leaves in /etc/kubernetes/tmp to keep, and of this node's etcd snapshots")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "HOST:PORT to serve Prometheus metrics on (/metrics); 0 serves none")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat,
		"How the agent writes its events on stderr: text (one line each: time, level, reason, message) or json (one object each, with the keys node, reason, rollout, upgrade, step, phase and error)")
}

// Complete fills the node name and builds the clients and engines.
func (o *Options) Complete(cmd *cobra.Command, _ []string) error {
	if err := o.ReconfigureFlags.Complete(cmd); err != nil {
		return err
	}
	o.log = newPrinter(o.LogFormat, o.ErrOut, o.Node.Name, func(err error) error { return cmdutil.ReconfigureHint(cmd, err) })
	c, err := o.Cluster.Clients()
	if err != nil {
		return err
	}
	store := o.Backup.Store()
	record := engine.New(c.Client, engine.Target{Namespace: o.Cluster.Namespace(), Name: rollout.DefaultConfigMap},
		engine.Options{FieldManager: managed.By})
	// The only write to kubeadm-config an agent makes puts back the
	// document a rollout on trial replaced: backed up as a restore is, and
	// not refused for what validation finds (the nodes ran it before).
	config := engine.New(c.Client, o.Cluster.Target(o.Key), engine.Options{FieldManager: managed.By,
		Validation: engine.ValidationWarn,
		Backup:     &backup.Hook{Store: store, Keep: o.Backup.Keep, Server: c.Server, Reason: backup.ReasonBeforeRestore}})
	// The upgrade's write of kubeadm-config (the first node's upload-config
	// phase) has an engine of its own: see upgradeConfigEngine.
	upgradeConfig := upgradeConfigEngine(c.Client, o.Cluster.Target(o.Key),
		&backup.Hook{Store: store, Keep: o.Backup.Keep, Server: c.Server, Reason: backup.ReasonBeforeUpgrade})
	// Published on the Lease, so that nodes can warn before the
	// certificate runs out (a token's issuer renews it).
	expires, _, err := c.CertificateExpiry()
	if err != nil {
		return err
	}
	// The upgrade record, which the agents move step by step with
	// compare-and-swap writes (without the write queue, as the rollout
	// record: one node writes it at a time), and whose phase the metrics
	// show.
	upgradeRecord := engine.New(c.Client, engine.Target{Namespace: o.Cluster.Namespace(), Name: o.StateConfigMap},
		engine.Options{FieldManager: managed.By})
	o.config = nodeagent.Config{
		Node: o.NodeFor(config, c.Server, c.Clock.Now), Record: record, Upgrade: upgradeRecord, Clock: c.Clock,
		Wait: o.Wait, NoEtcdSnapshot: o.NoEtcdSnapshot,
		Upgrades: kubeadmupgrade.Env{
			Kubeadms:              kubeadmupgrade.Kubeadms{Template: o.KubeadmTemplate},
			Kubelet:               kubeadmupgrade.Kubelet{Restart: strings.Fields(o.KubeletRestart), RestartTimeout: o.KubeletRestartTimeout, Config: o.KubeletConfig},
			IgnorePreflightErrors: o.IgnorePreflightErrors, KeepBackups: o.KeepKubeadmBackups,
			ConfigWriter: upgradeConfig,
		},
		Heartbeat: o.HeartbeatInterval, StopGrace: o.StopGrace, Version: version.Version, CertificateExpires: expires, Log: o.log.print,
	}
	return nil
}

// upgradeConfigEngine is the engine of an upgrade's write of
// kubeadm-config: the document it replaces is backed up as one from
// before an upgrade (hook's Reason), and a result that validation finds
// invalid is refused, as 'validate' refuses it, not written with a
// warning as the agent's put-back of a tried document is.
func upgradeConfigEngine(client kubernetes.Interface, target engine.Target, hook *backup.Hook) *engine.Engine {
	return engine.New(client, target, engine.Options{FieldManager: managed.By, Validation: engine.ValidationStrict, Backup: hook})
}

// Validate checks the flags without I/O.
func (o *Options) Validate() error {
	if o.HeartbeatInterval < time.Second {
		return exitcode.Usagef("--heartbeat-interval must be at least 1s, not %s", o.HeartbeatInterval)
	}
	if o.StopGrace <= 0 {
		return exitcode.Usagef("--stop-grace must be positive, not %s", o.StopGrace)
	}
	if t := o.KubeadmTemplate; t != "" && strings.Count(t, "{version}") != 1 {
		return exitcode.Usagef("--kubeadm-template must name {version} once, as /usr/local/kubernetes/{version}/bin/kubeadm, not %q", t)
	}
	if len(strings.Fields(o.KubeletRestart)) == 0 {
		return exitcode.Usagef("--kubelet-restart-command must not be empty")
	}
	if o.KubeletRestartTimeout <= 0 {
		return exitcode.Usagef("--kubelet-restart-timeout must be positive, not %s", o.KubeletRestartTimeout)
	}
	if o.KeepKubeadmBackups < 1 {
		return exitcode.Usagef("--keep-kubeadm-backups must be at least 1, not %d", o.KeepKubeadmBackups)
	}
	if err := validateBindAddress(o.MetricsBindAddress); err != nil {
		return err
	}
	if o.LogFormat != logFormatText && o.LogFormat != logFormatJSON {
		return exitcode.Usagef("--log-format must be one of %s, %s, not %q", logFormatText, logFormatJSON, o.LogFormat)
	}
	return o.ReconfigureFlags.Validate()
}

// Run runs the agent until the command's context ends (SIGTERM, SIGINT).
func (o *Options) Run(ctx context.Context) error {
	if err := checkServer(ctx, o.config.Server, o.ManifestsDir, o.Node, o.config.Record.ControlPlaneNodes); err != nil {
		return err
	}
	a, err := nodeagent.New(o.config)
	if err != nil {
		return err
	}
	stop, err := serveMetrics(o.MetricsBindAddress, a.MetricsHandler(), o.log.print)
	if err != nil {
		return err
	}
	defer stop()
	return a.Run(ctx)
}
