package cmdutil

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/managed"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/queue"
)

// RetryFlags are what every command that writes shares: how long a write may
// take, whether writers that conflict take turns, and who is writing.
type RetryFlags struct {
	Timeout  time.Duration
	Queue    bool
	QueueTTL time.Duration
	Identity string
}

// NewRetryFlags returns the defaults.
func NewRetryFlags() *RetryFlags {
	return &RetryFlags{Timeout: engine.DefaultTimeout, Queue: true, QueueTTL: queue.DefaultTTL}
}

// AddFlags binds the flags; identityHelp says what --identity means to the
// command.
func (f *RetryFlags) AddFlags(cmd *cobra.Command, identityHelp string) {
	fs := cmd.Flags()
	fs.DurationVar(&f.Timeout, "timeout", f.Timeout, "Give up (exit 4) if the command has not finished within this time, every read, retry on conflict and leader check included")
	fs.BoolVar(&f.Queue, "queue", f.Queue, "After a conflict, wait for a turn in a fair queue of writers (coordination.k8s.io Leases) instead of retrying blindly")
	fs.DurationVar(&f.QueueTTL, "queue-ttl", f.QueueTTL, "How long a queued writer's Lease may go unrenewed before the others take the writer for dead")
	fs.StringVar(&f.Identity, "identity", f.Identity, identityHelp)
}

// Complete fills the defaults that depend on the host.
func (f *RetryFlags) Complete() {
	if f.Identity == "" {
		f.Identity = engine.Hostname()
	}
}

// Validate checks the values.
func (f *RetryFlags) Validate() error {
	if err := ValidateTimeout(f.Timeout); err != nil {
		return err
	}
	if f.QueueTTL < time.Second {
		return exitcode.Usagef("--queue-ttl must be at least 1s, not %s", f.QueueTTL)
	}
	return nil
}

// EngineOptions returns the engine options the flags decide.
func (f *RetryFlags) EngineOptions() engine.Options {
	opts := engine.Options{Timeout: f.Timeout, FieldManager: managed.By}
	if f.Queue {
		opts.Queue = &engine.QueueOptions{TTL: f.QueueTTL, Clock: localClock{}}
	}
	return opts
}

// WriteFlags are the flags every command that writes kubeadm-config shares.
type WriteFlags struct {
	*RetryFlags
	DryRun         string
	Diff           bool
	FieldManager   string
	Validate       string
	KubeadmVersion string
	IfLeader       string
	Key            string
}

// NewWriteFlags returns the defaults.
func NewWriteFlags() *WriteFlags {
	return &WriteFlags{
		RetryFlags:   NewRetryFlags(),
		DryRun:       string(engine.DryRunNone),
		FieldManager: managed.By,
		Validate:     string(engine.ValidationStrict),
		Key:          engine.DefaultKey,
	}
}

// AddFlags binds the flags.
func (f *WriteFlags) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.DryRun, "dry-run", f.DryRun, `One of none, client, server. "client" stops before sending the write; "server" sends it with dryRun=All so nothing is persisted`)
	fs.Lookup("dry-run").NoOptDefVal = string(engine.DryRunClient)
	fs.BoolVar(&f.Diff, "diff", f.Diff, "Print a unified diff of the ClusterConfiguration")
	fs.StringVar(&f.FieldManager, "field-manager", f.FieldManager, "Name of the manager recorded for this write")
	fs.StringVar(&f.Validate, "validate", f.Validate, `One of strict, warn, ignore. "strict" refuses to write a document kubeadm would reject; "warn" writes it and prints the problems`)
	fs.StringVar(&f.KubeadmVersion, "kubeadm-version", f.KubeadmVersion, "Release of kubeadm whose rules validation applies: 1.35, 1.36 or 1.37 (default: the newest that reads the apiVersion, 1.36 for v1beta3); kubeadm refuses a kubernetesVersion more than one minor below itself")
	fs.StringVar(&f.IfLeader, "if-leader", f.IfLeader, "Write only if --identity holds this coordination.k8s.io Lease (NAMESPACE/NAME); otherwise exit 0 as skipped")
	fs.StringVar(&f.Key, "key", f.Key, "ConfigMap key that holds the ClusterConfiguration")
	f.RetryFlags.AddFlags(cmd, "Identity matched against the --if-leader Lease's holder, exactly or as IDENTITY_<suffix> (default: the hostname)")
}

// Complete turns kubectl's boolean spellings of --validate into its names
// and fills the host's defaults.
func (f *WriteFlags) Complete() {
	switch f.Validate {
	case "true":
		f.Validate = string(engine.ValidationStrict)
	case "false":
		f.Validate = string(engine.ValidationIgnore)
	}
	f.RetryFlags.Complete()
}

// ValidateFlags checks the values without I/O.
func (f *WriteFlags) ValidateFlags() error {
	switch f.DryRun {
	case "none", "client", "server":
	default:
		return exitcode.Usagef("--dry-run must be one of none, client, server, not %q", f.DryRun)
	}
	switch f.Validate {
	case "strict", "warn", "ignore":
	default:
		return exitcode.Usagef("--validate must be one of strict, warn, ignore, not %q", f.Validate)
	}
	if err := f.RetryFlags.Validate(); err != nil {
		return err
	}
	if strings.TrimSpace(f.Key) == "" {
		return exitcode.Usagef("--key must not be empty")
	}
	if f.IfLeader != "" {
		if _, _, ok := splitLease(f.IfLeader); !ok {
			return exitcode.Usagef("--if-leader must be NAMESPACE/NAME, not %q", f.IfLeader)
		}
	}
	if err := clusterconfig.CheckKubeadmVersion(f.KubeadmVersion); err != nil {
		return exitcode.Usagef("--kubeadm-version: %w", err)
	}
	return nil
}

func splitLease(s string) (ns, name string, ok bool) {
	ns, name, ok = strings.Cut(s, "/")
	return ns, name, ok && ns != "" && name != "" && !strings.Contains(name, "/")
}

// ToEngine assembles the write pipeline for the ClusterConfiguration: retry
// budget and queue, leader guard, validation, and the backup hook (nil for
// none).
func (f *WriteFlags) ToEngine(c *Clients, cluster *ClusterFlags, backup engine.Backuper) *engine.Engine {
	opts := f.EngineOptions()
	opts.DryRun = engine.DryRun(f.DryRun)
	opts.FieldManager = f.FieldManager
	opts.Validation = engine.Validation(f.Validate)
	opts.Validate = clusterconfig.ValidateOptions{KubeadmVersion: f.KubeadmVersion}
	if ns, name, ok := splitLease(f.IfLeader); ok {
		opts.Leader = &engine.Leader{Namespace: ns, Name: name, Identity: f.Identity}
	}
	if backup != nil {
		opts.Backup = backup
	}
	return engine.New(c.Client, cluster.Target(f.Key), opts)
}
