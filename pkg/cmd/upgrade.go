package cmd

import (
	"context"
	"fmt"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/queue"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// UpgradeFlags are what every upgrade-* command shares: where the state
// lives, who is acting, and how long a write may take.
type UpgradeFlags struct {
	Cluster        *ClusterFlags
	Print          *PrintFlags
	StateConfigMap string
	Identity       string
	Timeout        time.Duration
	Queue          bool
	QueueTTL       time.Duration

	client kubernetes.Interface
	genericiooptions.IOStreams
}

func newUpgradeFlags(cluster *ClusterFlags, streams genericiooptions.IOStreams) *UpgradeFlags {
	return &UpgradeFlags{Cluster: cluster, Print: NewPrintFlags(), StateConfigMap: "kubeadmcfg-upgrade",
		Timeout: 30 * time.Second, Queue: true, QueueTTL: queue.DefaultTTL, IOStreams: streams}
}

func (f *UpgradeFlags) addFlags(cmd *cobra.Command, writes bool) {
	cmd.Flags().StringVar(&f.StateConfigMap, "state-configmap", f.StateConfigMap, "Name of the ConfigMap that holds the upgrade state (in -n)")
	if writes {
		cmd.Flags().StringVar(&f.Identity, "identity", f.Identity, "Who is making the change, recorded in the history (default: the hostname)")
		cmd.Flags().DurationVar(&f.Timeout, "timeout", f.Timeout, "Give up (exit 4) if the write has not succeeded within this time")
		addQueueFlags(cmd, &f.Queue, &f.QueueTTL)
	}
	f.Print.AddFlags(cmd)
}

func (f *UpgradeFlags) complete() error {
	if f.StateConfigMap == "" {
		return exitcode.Usagef("--state-configmap must not be empty")
	}
	if f.Identity == "" {
		f.Identity = hostname()
	}
	if f.Timeout <= 0 {
		return exitcode.Usagef("--timeout must be positive, not %s", f.Timeout)
	}
	if f.QueueTTL < time.Second {
		return exitcode.Usagef("--queue-ttl must be at least 1s, not %s", f.QueueTTL)
	}
	if err := f.Print.Validate(); err != nil {
		return err
	}
	cs, _, err := f.Cluster.Clientset()
	f.client = cs
	return err
}

func (f *UpgradeFlags) target() engine.Target {
	return engine.Target{Namespace: f.Cluster.Namespace(), Name: f.StateConfigMap}
}

func (f *UpgradeFlags) engine() *engine.Engine {
	return &engine.Engine{Client: f.client.CoreV1(), Target: f.target(),
		Options: engine.Options{Timeout: f.Timeout, FieldManager: "kubectl-kubeadmcfg", CreateIfMissing: true,
			Coordinator: newCoordinator(f.Queue, f.QueueTTL, f.client, f.target())}}
}

func (f *UpgradeFlags) clock() upgrade.Clock { return upgrade.Clock{Now: time.Now(), By: f.Identity} }

func (f *UpgradeFlags) noUpgrade() error {
	return exitcode.NotFoundf("no upgrade is recorded in configmap %s/%s (start one with 'kubectl kubeadmcfg upgrade-start')",
		f.Cluster.Namespace(), f.StateConfigMap)
}

// write applies op to the record inside a compare-and-swap write, so the
// rule is checked against the state actually replaced, and prints the
// outcome.
func (f *UpgradeFlags) write(ctx context.Context, op func(rec *upgrade.Record) (*upgrade.Record, bool, error)) error {
	var before upgrade.State // "" when no upgrade was recorded
	var after *upgrade.Record
	res, err := f.engine().Update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		rec, _, err := upgrade.Decode(cm.Annotations)
		if err != nil {
			return false, err
		}
		before = ""
		if rec != nil {
			before = rec.State // op may change rec in place
		}
		next, changed, err := op(rec)
		if err != nil || !changed {
			after = rec
			return false, err
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels[upgrade.ManagedByLabel] = upgrade.ManagedBy
		next.Encode(cm.Annotations)
		after = next
		return true, nil
	})
	if err != nil {
		return err
	}
	if after == nil {
		return f.noUpgrade()
	}
	if !f.Print.Human() {
		return f.Print.Print(f.Out, after)
	}
	switch {
	case !res.Changed:
		fmt.Fprintf(f.Out, "upgrade state unchanged: %s\n", after.State)
	case after.State == upgrade.Started:
		fmt.Fprintf(f.Out, "upgrade started: %s -> %s, state %s\n", orDash(after.FromVersion), after.ToVersion, after.State)
	case before != after.State:
		fmt.Fprintf(f.Out, "upgrade state: %s -> %s\n", before, after.State)
	default:
		fmt.Fprintf(f.Out, "upgrade state: %s (hosts updated)\n", after.State)
	}
	return nil
}

// existing wraps an op that needs a recorded upgrade.
func (f *UpgradeFlags) existing(op func(rec *upgrade.Record) (bool, error)) func(*upgrade.Record) (*upgrade.Record, bool, error) {
	return func(rec *upgrade.Record) (*upgrade.Record, bool, error) {
		if rec == nil {
			return nil, false, f.noUpgrade()
		}
		changed, err := op(rec)
		return rec, changed, err
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// NewCmdUpgrade builds the upgrade-* commands.
func NewCmdUpgrade(cluster *ClusterFlags, streams genericiooptions.IOStreams) []*cobra.Command {
	return []*cobra.Command{
		newCmdUpgradeStatus(cluster, streams),
		newCmdUpgradeStart(cluster, streams),
		newCmdUpgradeSet(cluster, streams),
		newCmdUpgradeHost(cluster, streams),
		newCmdUpgradeFail(cluster, streams),
		newCmdUpgradeAudit(cluster, streams),
		newCmdUpgradeDelete(cluster, streams),
	}
}

const stateDiagram = `States, in order (each step may also go to upgrade-aborting):

  upgrade-started
    -> downloading-images      -> downloaded-images       (or downloading-images-failed)
    -> upgrading-networking    -> upgraded-networking     (or upgrading-networking-failed)
    -> upgrading-storage       -> upgraded-storage        (or upgrading-storage-failed)
    -> upgrading-first-master  -> upgraded-first-master   (or upgrading-first-master-failed)
    -> upgrading-second-master -> upgraded-second-master  (or upgrading-second-master-failed)
    -> upgrading-kubelets      -> upgrade-complete        (or upgrading-kubelets-failed)
  upgrade-aborting -> upgrade-aborted                     (or upgrade-aborting-failed)

A step starts from its predecessor or from its own -failed state (a retry).`

func newCmdUpgradeStatus(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	f := newUpgradeFlags(cluster, streams)
	var watchFlag bool
	cmd := &cobra.Command{
		Use:   "upgrade-status",
		Short: "Show the upgrade state",
		Long: `Show the upgrade state: the state, the versions, how long it has been in
the state, the reason, and each host's status. With -o json the record is
printed as stored. --watch follows changes with a watch on the ConfigMap.
Exit 5 when no upgrade is recorded.`,
		Example: "  # Show the state as JSON\n  kubectl kubeadmcfg upgrade-status -o json\n\n  # Follow changes\n  kubectl kubeadmcfg upgrade-status --watch",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.complete(); err != nil {
				return err
			}
			return f.status(cmd.Context(), watchFlag)
		},
	}
	cmd.Flags().BoolVarP(&watchFlag, "watch", "w", false, "After printing the state, print it again on every change")
	f.addFlags(cmd, false)
	return cmd
}

func (f *UpgradeFlags) status(ctx context.Context, follow bool) error {
	cm, err := f.client.CoreV1().ConfigMaps(f.Cluster.Namespace()).Get(ctx, f.StateConfigMap, metav1.GetOptions{})
	if err != nil {
		if exitcode.FromError(engine.APIError(err, "get", f.target().String())) == exitcode.NotFound {
			return f.noUpgrade()
		}
		return engine.APIError(err, "get", f.target().String())
	}
	if err := f.printStatus(cm); err != nil || !follow {
		return err
	}
	lw := &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", f.StateConfigMap).String()
			return f.client.CoreV1().ConfigMaps(f.Cluster.Namespace()).Watch(ctx, opts)
		},
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, cm.ResourceVersion, lw)
	if err != nil {
		return engine.APIError(err, "watch", f.target().String())
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return exitcode.Failuref("the watch on %s ended", f.target())
			}
			switch ev.Type {
			case watch.Deleted:
				fmt.Fprintln(f.ErrOut, "the upgrade state was deleted")
				return nil
			case watch.Added, watch.Modified:
				if next, ok := ev.Object.(*corev1.ConfigMap); ok {
					if err := f.printStatus(next); err != nil {
						return err
					}
				}
			case watch.Error:
				return exitcode.Failuref("watch %s: %v", f.target(), ev.Object)
			}
		}
	}
}

func (f *UpgradeFlags) printStatus(cm *corev1.ConfigMap) error {
	rec, ok, err := upgrade.Decode(cm.Annotations)
	if err != nil {
		return err
	}
	if !ok {
		return f.noUpgrade()
	}
	if !f.Print.Human() {
		return f.Print.Print(f.Out, rec)
	}
	now := time.Now()
	age := func(stamp string) string {
		t, err := time.Parse(time.RFC3339, stamp)
		if err != nil {
			return "?"
		}
		return duration.HumanDuration(now.Sub(t))
	}
	w := tabwriter.NewWriter(f.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STATE\tFROM\tTO\tAGE\tREASON")
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", rec.State, orDash(rec.FromVersion), orDash(rec.ToVersion), age(rec.UpdatedAt), orDash(rec.Reason))
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

func newCmdUpgradeStart(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	f := newUpgradeFlags(cluster, streams)
	var to, from, reason string
	cmd := &cobra.Command{
		Use:   "upgrade-start --to VERSION [--from VERSION]",
		Short: "Record the start of an upgrade",
		Long: `Record the start of an upgrade to --to, in state upgrade-started, creating the
state ConfigMap if needed. Refused with exit 4 while an upgrade exists that
is not complete or aborted. --from defaults to the kubernetesVersion of the
live ClusterConfiguration.

` + stateDiagram,
		Example: "  # Start an upgrade to v1.37.2\n  kubectl kubeadmcfg upgrade-start --to v1.37.2",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := upgrade.CheckVersion("--to", to); err != nil {
				return err
			}
			if from != "" {
				if err := upgrade.CheckVersion("--from", from); err != nil {
					return err
				}
			}
			if err := f.complete(); err != nil {
				return err
			}
			if from == "" {
				from = f.liveVersion(cmd.Context())
			}
			return f.write(cmd.Context(), func(rec *upgrade.Record) (*upgrade.Record, bool, error) {
				next, err := upgrade.Start(rec, f.clock(), from, to, reason)
				return next, err == nil, err
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", to, "The Kubernetes version the upgrade goes to")
	cmd.Flags().StringVar(&from, "from", from, "The Kubernetes version the upgrade starts from (default: the live kubernetesVersion)")
	cmd.Flags().StringVar(&reason, "reason", reason, "Why, recorded with the transition")
	f.addFlags(cmd, true)
	return cmd
}

// liveVersion reads kubernetesVersion from kubeadm-config, or "" when it
// cannot.
func (f *UpgradeFlags) liveVersion(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	_, doc, err := readDocument(ctx, f.client, f.Cluster, engine.DefaultKey)
	if err != nil {
		return ""
	}
	if parsed, err := clusterconfig.Parse([]byte(doc)); err == nil {
		return parsed.KubernetesVersion()
	}
	return ""
}

func newCmdUpgradeSet(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	f := newUpgradeFlags(cluster, streams)
	var expect, reason string
	var force bool
	cmd := &cobra.Command{
		Use:   "upgrade-set STATE [--expect CURRENT]",
		Short: "Move the upgrade to a state",
		Long: `Move the upgrade to STATE. A transition the state machine does not allow
exits 4 and lists what is allowed from the current state; --force skips the
rule. --expect CURRENT also exits 4 unless the upgrade is in CURRENT, so a
late report cannot overwrite a state an operator forced. Setting the state
the upgrade is already in changes nothing. An unknown state exits 2.

` + stateDiagram,
		Example: "  # Report that the second master is upgraded, unless someone changed the state meanwhile\n" +
			"  kubectl kubeadmcfg upgrade-set upgraded-second-master --expect upgrading-second-master",
		Args: exactArgs(1, "STATE"),
		ValidArgsFunction: func(c *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeStates(c, args, s)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			to := upgrade.State(args[0])
			if !upgrade.Known(to) {
				return exitcode.Usagef("unknown state %q (see 'kubectl kubeadmcfg upgrade-set --help')", args[0])
			}
			if expect != "" && !upgrade.Known(upgrade.State(expect)) {
				return exitcode.Usagef("unknown --expect state %q", expect)
			}
			if err := f.complete(); err != nil {
				return err
			}
			return f.write(cmd.Context(), f.existing(func(rec *upgrade.Record) (bool, error) {
				return rec.Set(f.clock(), to, upgrade.State(expect), force, reason)
			}))
		},
	}
	cmd.Flags().StringVar(&expect, "expect", expect, "Change the state only if it is this one")
	cmd.Flags().StringVar(&reason, "reason", reason, "Why, recorded with the transition")
	cmd.Flags().BoolVar(&force, "force", force, "Skip the transition rule")
	f.addFlags(cmd, true)
	return cmd
}

func newCmdUpgradeHost(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	f := newUpgradeFlags(cluster, streams)
	var expect string
	var force bool
	cmd := &cobra.Command{
		Use:   "upgrade-host NODE STATUS [--expect CURRENT]",
		Short: "Set one node's upgrade status",
		Long: `Set NODE's upgrade status, under the same rules as upgrade-set. Statuses:
upgrading-control-plane, upgraded-control-plane, upgrading-kubelet,
upgraded-kubelet, upgrading-etcd, upgraded-etcd, each in-progress one with a
-failed form, and none (removes the node's entry). A step starts from none,
from a finished step, or from its own -failed status.`,
		Example:           "  # Report that controller-1 started upgrading its control plane\n  kubectl kubeadmcfg upgrade-host controller-1 upgrading-control-plane",
		Args:              exactArgs(2, "NODE STATUS"),
		ValidArgsFunction: completeNodes(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			node, to := args[0], upgrade.HostStatus(args[1])
			if !upgrade.KnownHost(to) {
				return exitcode.Usagef("unknown host status %q (see 'kubectl kubeadmcfg upgrade-host --help')", args[1])
			}
			if expect != "" && !upgrade.KnownHost(upgrade.HostStatus(expect)) {
				return exitcode.Usagef("unknown --expect status %q", expect)
			}
			if node == "" {
				return exitcode.Usagef("NODE must not be empty")
			}
			if err := f.complete(); err != nil {
				return err
			}
			return f.write(cmd.Context(), f.existing(func(rec *upgrade.Record) (bool, error) {
				return rec.SetHost(f.clock(), node, to, upgrade.HostStatus(expect), force)
			}))
		},
	}
	cmd.Flags().StringVar(&expect, "expect", expect, "Change the status only if it is this one")
	cmd.Flags().BoolVar(&force, "force", force, "Skip the transition rule")
	f.addFlags(cmd, true)
	return cmd
}

func newCmdUpgradeFail(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	f := newUpgradeFlags(cluster, streams)
	var reason string
	cmd := &cobra.Command{
		Use:   "upgrade-fail",
		Short: "Force the step in progress to its failed state",
		Long: `Move the upgrade's step in progress to exactly its own -failed state and, in
the same write, every host status in progress to its -failed status, so the
retry is accepted. From a state that is not in progress it exits 4; an
upgrade already failed is left as it is (exit 0).`,
		Example: "  # Fail a stuck upgrade so it can be retried\n  kubectl kubeadmcfg upgrade-fail --reason 'kubeadm upgrade node died on controller-1'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.complete(); err != nil {
				return err
			}
			if reason == "" {
				reason = "forced to failed by " + f.Identity
			}
			return f.write(cmd.Context(), f.existing(func(rec *upgrade.Record) (bool, error) {
				return rec.Fail(f.clock(), reason)
			}))
		},
	}
	cmd.Flags().StringVar(&reason, "reason", reason, "Why, recorded with the transition")
	f.addFlags(cmd, true)
	return cmd
}

func newCmdUpgradeAudit(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	f := newUpgradeFlags(cluster, streams)
	stuckAfter := time.Hour
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "upgrade-audit [--stuck-after DURATION] [--interval DURATION]",
		Short: "Fail an upgrade stuck in a step for too long",
		Long: `Do what upgrade-fail does when the upgrade has been in a step in progress for
longer than --stuck-after, with the reason "stuck in STATE for AGE". Safe to
run from every control-plane node at once: the compare-and-swap lets exactly
one of them record the transition. With --interval it repeats until
interrupted, reporting a failed pass and going on. An unparsable updated-at
is reported (exit 3), never a crash. hack/upgrade-audit-cronjob.yaml runs it
as a CronJob.`,
		Example: "  # One pass, failing a step older than 30 minutes\n  kubectl kubeadmcfg upgrade-audit --stuck-after 30m\n\n" +
			"  # Keep auditing every 5 minutes\n  kubectl kubeadmcfg upgrade-audit --interval 5m",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if stuckAfter <= 0 {
				return exitcode.Usagef("--stuck-after must be positive, not %s", stuckAfter)
			}
			if interval < 0 {
				return exitcode.Usagef("--interval must not be negative, not %s", interval)
			}
			if err := f.complete(); err != nil {
				return err
			}
			pass := func() error {
				return f.write(cmd.Context(), func(rec *upgrade.Record) (*upgrade.Record, bool, error) {
					if rec == nil {
						return nil, false, f.noUpgrade()
					}
					changed, err := rec.Audit(f.clock(), stuckAfter)
					return rec, changed, err
				})
			}
			if interval == 0 {
				return f.auditPass(pass)
			}
			for {
				if err := f.auditPass(pass); err != nil {
					fmt.Fprintf(f.ErrOut, "error: %s\n", exitcode.Message(err))
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(interval):
				}
			}
		},
	}
	cmd.Flags().DurationVar(&stuckAfter, "stuck-after", stuckAfter, "Fail a step in progress whose state is older than this")
	cmd.Flags().DurationVar(&interval, "interval", interval, "Repeat the audit at this interval until interrupted (0: one pass)")
	f.addFlags(cmd, true)
	return cmd
}

// auditPass runs one audit; no upgrade at all is nothing to audit.
func (f *UpgradeFlags) auditPass(pass func() error) error {
	err := pass()
	if exitcode.FromError(err) == exitcode.NotFound {
		if f.Print.Human() {
			fmt.Fprintln(f.Out, "no upgrade recorded: nothing to audit")
		}
		return nil
	}
	return err
}

func newCmdUpgradeDelete(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	f := newUpgradeFlags(cluster, streams)
	var force bool
	cmd := &cobra.Command{
		Use:     "upgrade-delete",
		Short:   "Delete the upgrade state",
		Long:    "Delete the upgrade state ConfigMap, only when the upgrade is complete or aborted, or with --force.",
		Example: "  # Clear a finished upgrade\n  kubectl kubeadmcfg upgrade-delete",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.complete(); err != nil {
				return err
			}
			var state upgrade.State
			_, err := f.engine().Delete(cmd.Context(), func(cm *corev1.ConfigMap) error {
				rec, ok, err := upgrade.Decode(cm.Annotations)
				if err != nil && !force {
					return err
				}
				if ok && rec != nil {
					state = rec.State
				}
				if !force && ok && !upgrade.Terminal(state) {
					return exitcode.Conflictf("the upgrade is in %s; delete it only when complete or aborted, or use --force", state)
				}
				return nil
			})
			if err != nil {
				if exitcode.FromError(err) == exitcode.NotFound {
					return f.noUpgrade()
				}
				return err
			}
			if !f.Print.Human() {
				return f.Print.Print(f.Out, map[string]any{"deleted": f.target().Namespace + "/" + f.target().Name, "state": state})
			}
			fmt.Fprintf(f.Out, "upgrade state deleted (was %s)\n", orDash(string(state)))
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", force, "Delete whatever the state")
	f.addFlags(cmd, true)
	return cmd
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
