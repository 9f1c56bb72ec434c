// Package engine is the one place the plugin reads and writes ConfigMaps.
// Every write is read, apply the caller's edit to that fresh copy, check,
// compare-and-swap on resourceVersion; on a conflict the edit is applied again
// to the new copy, never resent from an old snapshot.
//
// An Engine is the whole write pipeline, assembled once from Options: the
// retry budget, the fair queue writers take turns in after a conflict, the
// --if-leader guard, validation, and the backup of what a write replaces. It
// returns data (Result, DocumentResult); it prints nothing.
//
// A write whose answer is lost is applied at most once, and the engine says
// when it cannot tell whether it landed (exit 7); resolve.go has the
// argument. For it to hold, build the client with WrapNoWriteRetries, so
// that client-go never sends a write again by itself.
//
// The leader guard (Options.Leader) is not a fence. The Lease is checked when
// a write starts and read again right before every copy is sent, but the API
// server does not look at it when it takes the write: if leadership moves
// between that last read and the write, the old holder's write still lands,
// and so does the new holder's. A set gives the same result twice; an
// append (a list item added, a JSON patch "add" at "/-") is applied twice.
package engine

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/queue"
)

// DefaultKey is the ConfigMap key kubeadm stores the ClusterConfiguration in.
const DefaultKey = "ClusterConfiguration"

// DefaultTimeout bounds a write when Options.Timeout is not set.
const DefaultTimeout = 30 * time.Second

// Target names a ConfigMap and, for documents, the key that holds one.
type Target struct {
	Namespace string
	Name      string
	Key       string
}

// String names the ConfigMap the way messages show it.
func (t Target) String() string { return fmt.Sprintf("configmap %s/%s", t.Namespace, t.Name) }

// DryRun is kubectl's --dry-run: none writes, client stops before the write,
// server sends the write with dryRun=All so admission sees it.
type DryRun string

// The --dry-run values.
const (
	DryRunNone   DryRun = "none"
	DryRunClient DryRun = "client"
	DryRunServer DryRun = "server"
)

// Validation is kubectl's --validate: strict refuses to write an invalid
// document, warn writes it and reports the problems, ignore skips the check.
type Validation string

// The --validate values.
const (
	ValidationStrict Validation = "strict"
	ValidationWarn   Validation = "warn"
	ValidationIgnore Validation = "ignore"
)

// Options assemble the write pipeline. The zero value writes at once, with
// strict validation, no queue, no leader guard and no backup.
type Options struct {
	// Timeout bounds each write, leader check and retries included
	// (DefaultTimeout when zero).
	Timeout time.Duration
	DryRun  DryRun
	// FieldManager is recorded in managedFields.
	FieldManager string
	// CreateIfMissing lets a Mutate start from an empty ConfigMap and
	// creates it.
	CreateIfMissing bool

	// Validation and Validate decide how a document write is checked.
	Validation Validation
	Validate   clusterconfig.ValidateOptions

	// Queue, when set, makes writers that conflict take turns in a fair
	// queue of Leases in the ConfigMap's namespace.
	Queue *QueueOptions
	// Coordinator replaces the Lease queue (tests, in-process benchmarks).
	Coordinator Coordinator
	// Leader, when set, writes only while its Identity holds its Lease:
	// checked at the start and before every write sent, but not fenced (see
	// the package documentation).
	Leader *Leader
	// Backup, when set, keeps a copy of every document a write replaces.
	Backup Backuper
}

// QueueOptions tune the write queue.
type QueueOptions struct {
	// TTL is how long a queued writer's Lease may go unrenewed before the
	// others take the writer for dead.
	TTL time.Duration
	// Identity names this writer in its Lease (host/pid by default).
	Identity string
	// Clock stamps the times the writer writes in its Lease (the real
	// clock when nil); it decides nothing.
	Clock clock.PassiveClock
}

// Leader names the Lease whose holder alone may write.
type Leader struct {
	Namespace, Name string
	// Identity must match the Lease's holder, exactly or as IDENTITY_<suffix>.
	Identity string
}

// Coordinator is how writers that contend take turns. Acquire blocks until
// the writer may try; the returned release must be called when it is done,
// and returns an error only for a bug (a panic of the turn's own work,
// which the call then reports). Busy reports whether writers are already
// waiting: a newcomer then joins them instead of cutting in with an
// optimistic write.
type Coordinator interface {
	Acquire(ctx context.Context) (release func() error, err error)
	Busy(ctx context.Context) bool
}

// Backuper keeps a copy of a document before a write replaces it.
type Backuper interface {
	// Backup saves the document under key of cm, the exact copy the write is
	// about to replace; parsed is that document when it parses, else nil. It
	// returns where the copy went. An error stops the write.
	Backup(ctx context.Context, cm *corev1.ConfigMap, key string, parsed *clusterconfig.Document) (string, error)
}

// Engine reads and writes one ConfigMap with compare-and-swap.
type Engine struct {
	client      kubernetes.Interface
	target      Target
	opts        Options
	coordinator Coordinator
}

// New assembles the pipeline for target.
func New(client kubernetes.Interface, target Target, opts Options) *Engine {
	if opts.DryRun == "" {
		opts.DryRun = DryRunNone
	}
	if opts.Validation == "" {
		opts.Validation = ValidationStrict
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	e := &Engine{client: client, target: target, opts: opts, coordinator: opts.Coordinator}
	if e.coordinator == nil && opts.Queue != nil && opts.DryRun == DryRunNone {
		identity := opts.Queue.Identity
		if identity == "" {
			identity = fmt.Sprintf("%s/%d", Hostname(), os.Getpid())
		}
		e.coordinator = &queue.Queue{Client: client.CoordinationV1(), Namespace: target.Namespace,
			Name: target.Name, Identity: identity, TTL: opts.Queue.TTL, Clock: opts.Queue.Clock}
	}
	return e
}

// Target is the ConfigMap the engine works on.
func (e *Engine) Target() Target { return e.target }

// Hostname is this host's name, the default identity of a writer.
func Hostname() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "unknown-host"
	}
	return host
}

// Get reads the ConfigMap. Throttling, server errors and broken connections
// are retried until Options.Timeout, like a write's; a refused connection
// is not: as with kubectl get, a server that is down is reported at once.
func (e *Engine) Get(ctx context.Context) (*corev1.ConfigMap, error) {
	c := &call{e: e, res: &Result{}, reading: true}
	ctx, cancel := context.WithTimeout(c.trace(ctx), e.opts.Timeout)
	defer cancel()
	var cm *corev1.ConfigMap
	err := c.retry(ctx, func(ctx context.Context) (bool, error) {
		var err error
		cm, err = e.client.CoreV1().ConfigMaps(e.target.Namespace).Get(ctx, e.target.Name, metav1.GetOptions{})
		if c.answered(err) != nil {
			done := !IsRetryable(err) || utilnet.IsConnectionRefused(err)
			return done && ctx.Err() == nil, APIError(err, "get", e.target.String())
		}
		return true, nil
	})
	return cm, err
}

// Document reads the document stored under Target.Key.
func (e *Engine) Document(ctx context.Context) (string, error) {
	cm, err := e.Get(ctx)
	if err != nil {
		return "", err
	}
	return DocumentOf(cm, e.target)
}

// DocumentOf returns the document stored under t.Key of cm, or a not-found
// error that says the ConfigMap exists but lacks the key.
func DocumentOf(cm *corev1.ConfigMap, t Target) (string, error) {
	doc, ok := cm.Data[t.Key]
	if !ok {
		return "", exitcode.NotFoundf("%s has no key %q (is this a kubeadm cluster?)", t, t.Key)
	}
	return doc, nil
}
