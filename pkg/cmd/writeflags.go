package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/queue"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/textdiff"
)

// WriteFlags are the flags every command that writes kubeadm-config shares.
type WriteFlags struct {
	DryRun         string
	Diff           bool
	Timeout        time.Duration
	FieldManager   string
	Validate       string
	KubeadmVersion string
	IfLeader       string
	Identity       string
	Key            string
	Queue          bool
	QueueTTL       time.Duration
}

// NewWriteFlags returns the defaults.
func NewWriteFlags() *WriteFlags {
	return &WriteFlags{
		DryRun:         string(engine.DryRunNone),
		Timeout:        30 * time.Second,
		FieldManager:   "kubectl-kubeadmcfg",
		Validate:       string(engine.ValidationStrict),
		KubeadmVersion: clusterconfig.DefaultKubeadmVersion,
		Key:            engine.DefaultKey,
		Queue:          true,
		QueueTTL:       queue.DefaultTTL,
	}
}

// AddFlags binds the flags.
func (f *WriteFlags) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.DryRun, "dry-run", f.DryRun, `One of none, client, server. "client" stops before sending the write; "server" sends it with dryRun=All so nothing is persisted`)
	fs.Lookup("dry-run").NoOptDefVal = string(engine.DryRunClient)
	fs.BoolVar(&f.Diff, "diff", f.Diff, "Print a unified diff of the ClusterConfiguration")
	fs.DurationVar(&f.Timeout, "timeout", f.Timeout, "Give up (exit 4) if the write has not succeeded within this time, retries on conflict included")
	fs.StringVar(&f.FieldManager, "field-manager", f.FieldManager, "Name of the manager recorded for this write")
	fs.StringVar(&f.Validate, "validate", f.Validate, `One of strict, warn, ignore. "strict" refuses to write a document kubeadm would reject; "warn" writes it and prints the problems`)
	fs.StringVar(&f.KubeadmVersion, "kubeadm-version", f.KubeadmVersion, "Release of kubeadm whose rules validation applies (it refuses a kubernetesVersion more than one minor below itself)")
	fs.StringVar(&f.IfLeader, "if-leader", f.IfLeader, "Write only if --identity holds this coordination.k8s.io Lease (NAMESPACE/NAME); otherwise exit 0 as skipped")
	fs.StringVar(&f.Identity, "identity", f.Identity, "Identity matched against the --if-leader Lease's holder, exactly or as IDENTITY_<suffix> (default: the hostname)")
	fs.StringVar(&f.Key, "key", f.Key, "ConfigMap key that holds the ClusterConfiguration")
	addQueueFlags(cmd, &f.Queue, &f.QueueTTL)
}

// addQueueFlags binds the flags of the write queue.
func addQueueFlags(cmd *cobra.Command, enabled *bool, ttl *time.Duration) {
	cmd.Flags().BoolVar(enabled, "queue", *enabled, "After a conflict, wait for a turn in a fair queue of writers (coordination.k8s.io Leases) instead of retrying blindly")
	cmd.Flags().DurationVar(ttl, "queue-ttl", *ttl, "How long a queued writer's Lease may go unrenewed before the others take the writer for dead")
}

// newCoordinator returns the write queue for a ConfigMap, or nil.
func newCoordinator(enabled bool, ttl time.Duration, client kubernetes.Interface, t engine.Target) engine.Coordinator {
	if !enabled {
		return nil
	}
	return &queue.Queue{Client: client.CoordinationV1(), Namespace: t.Namespace, Name: t.Name,
		Identity: fmt.Sprintf("%s/%d", hostname(), os.Getpid()), TTL: ttl}
}

// hostname is the default identity of this process.
func hostname() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "unknown-host"
	}
	return host
}

// Check validates the flag values; it does no I/O.
func (f *WriteFlags) Check() error {
	switch f.DryRun {
	case "none", "client", "server":
	default:
		return exitcode.Usagef("--dry-run must be one of none, client, server, not %q", f.DryRun)
	}
	switch f.Validate {
	case "strict", "warn", "ignore":
	case "true":
		f.Validate = "strict"
	case "false":
		f.Validate = "ignore"
	default:
		return exitcode.Usagef("--validate must be one of strict, warn, ignore, not %q", f.Validate)
	}
	if f.Timeout <= 0 {
		return exitcode.Usagef("--timeout must be positive, not %s", f.Timeout)
	}
	if f.QueueTTL < time.Second {
		return exitcode.Usagef("--queue-ttl must be at least 1s, not %s", f.QueueTTL)
	}
	if strings.TrimSpace(f.Key) == "" {
		return exitcode.Usagef("--key must not be empty")
	}
	if f.IfLeader != "" {
		ns, name, ok := strings.Cut(f.IfLeader, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return exitcode.Usagef("--if-leader must be NAMESPACE/NAME, not %q", f.IfLeader)
		}
		if f.Identity == "" {
			f.Identity = hostname()
		}
	}
	if err := clusterconfig.CheckKubeadmVersion(f.KubeadmVersion); err != nil {
		return exitcode.Usagef("--kubeadm-version: %w", err)
	}
	return nil
}

// Engine builds the write engine for the command's target.
func (f *WriteFlags) Engine(client kubernetes.Interface, cluster *ClusterFlags) *engine.Engine {
	t := engine.Target{Namespace: cluster.Namespace(), Name: cluster.ConfigMap, Key: f.Key}
	return &engine.Engine{
		Client: client.CoreV1(),
		Target: t,
		Options: engine.Options{
			Timeout:      f.Timeout,
			DryRun:       engine.DryRun(f.DryRun),
			FieldManager: f.FieldManager,
			Coordinator:  newCoordinator(f.Queue && f.DryRun == string(engine.DryRunNone), f.QueueTTL, client, t),
		},
	}
}

// DocumentOptions returns the validation options.
func (f *WriteFlags) DocumentOptions() engine.DocumentOptions {
	return engine.DocumentOptions{
		Validation: engine.Validation(f.Validate),
		Validate:   clusterconfig.ValidateOptions{KubeadmVersion: f.KubeadmVersion},
	}
}

// CheckLeader runs the --if-leader guard. It returns a non-empty reason when
// the write must be skipped.
func (f *WriteFlags) CheckLeader(ctx context.Context, client kubernetes.Interface) (string, error) {
	if f.IfLeader == "" {
		return "", nil
	}
	ns, name, _ := strings.Cut(f.IfLeader, "/")
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	c, err := engine.CheckLeader(ctx, client.CoordinationV1(), ns, name, f.Identity)
	if err != nil {
		return "", err
	}
	if c.IsHolder {
		return "", nil
	}
	holder := c.Holder
	if holder == "" {
		holder = "none"
	}
	return fmt.Sprintf("not the holder of lease %s (holder: %s)", c.Lease, holder), nil
}

// WriteResult is what a command that writes kubeadm-config prints with -o.
type WriteResult struct {
	ConfigMap          string   `json:"configMap"`
	Changed            bool     `json:"changed"`
	Skipped            bool     `json:"skipped"`
	SkipReason         string   `json:"skipReason,omitempty"`
	DryRun             string   `json:"dryRun"`
	OldResourceVersion string   `json:"oldResourceVersion,omitempty"`
	NewResourceVersion string   `json:"newResourceVersion,omitempty"`
	Attempts           int      `json:"attempts"`
	Conflicts          int      `json:"conflicts"`
	Queued             bool     `json:"queued"`
	Warnings           []string `json:"warnings"`
	Backup             string   `json:"backup,omitempty"`
	Diff               string   `json:"diff,omitempty"`
}

// NewWriteResult fills a WriteResult from the engine's result.
// The diff labels the new document with newLabel.
func NewWriteResult(target engine.Target, res *engine.DocumentResult, withDiff bool, newLabel string) *WriteResult {
	out := &WriteResult{
		ConfigMap: target.Namespace + "/" + target.Name,
		DryRun:    string(res.DryRun),
		Warnings:  append([]string{}, res.Warnings...),
	}
	if res.Result != nil {
		out.Changed, out.Attempts, out.Conflicts, out.Queued = res.Changed, res.Attempts, res.Conflicts, res.Queued
		if res.QueueError != nil {
			out.Warnings = append(out.Warnings, "the write queue could not be used, retried with backoff instead: "+res.QueueError.Error())
		}
		if res.Old != nil {
			out.OldResourceVersion = res.Old.ResourceVersion
		}
		if res.Changed && res.New != nil && res.DryRun == engine.DryRunNone {
			out.NewResourceVersion = res.New.ResourceVersion
		}
	}
	if withDiff {
		out.Diff = textdiff.Unified("live/"+target.Key, newLabel, res.Before, res.After)
	}
	return out
}

// skippedResult is the outcome of a write the --if-leader guard skipped.
func skippedResult(t engine.Target, dryRun, reason string) *WriteResult {
	return &WriteResult{ConfigMap: t.Namespace + "/" + t.Name, Skipped: true, SkipReason: reason, DryRun: dryRun, Warnings: []string{}}
}

// reportWrite prints a write's outcome: warnings and the backup taken on
// ErrOut; then, with -o, the result object printed, otherwise the diff and
// the human line.
func reportWrite(streams genericiooptions.IOStreams, print *PrintFlags, out *WriteResult, printed any, human string) error {
	printWarnings(streams.ErrOut, out.Warnings)
	if !print.Human() {
		return print.Print(streams.Out, printed)
	}
	if out.Backup != "" {
		fmt.Fprintf(streams.ErrOut, "backed up the replaced document to %s\n", out.Backup)
	}
	fmt.Fprint(streams.Out, out.Diff)
	_, err := fmt.Fprintln(streams.Out, human)
	return err
}

// printWarnings writes each validation warning on its own line.
func printWarnings(w io.Writer, warnings []string) {
	for _, msg := range warnings {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
}
