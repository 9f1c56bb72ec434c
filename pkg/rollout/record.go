// Package rollout is the model of a configuration rollout: one pinned
// ClusterConfiguration carried to every control-plane node, one node at a
// time, recorded in the ConfigMap kubeadmcfg-rollout where every agent and
// every operator can read it with plain kubectl.
//
// This part of the package holds values only: the record's types, its
// encoding in a ConfigMap's data (with its size bounds and the checks that
// tell a damaged record), and the transitions that move it (start, a
// node's turn, begin, resume and finish, pause, resume, confirm, the expiry
// of a try, undo, abandoning a node that is gone). It makes no API call. A transition refuses with an error
// that carries its exit code (pkg/exitcode) and leaves the record as it
// was; a transition already made returns changed false. Callers apply the
// transitions inside a compare-and-swap write of the record (pkg/engine's
// Update, through Apply), so every rule is checked against the record
// actually replaced and every transition is written exactly once.
//
// pkg/operator carries out an operator's requests on it, and pkg/agent
// acts on it on each node.
package rollout

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// DefaultConfigMap is the name of the ConfigMap that holds the rollout
// record, in kube-system unless told otherwise.
const DefaultConfigMap = "kubeadmcfg-rollout"

// The keys of the record's ConfigMap data. Target and Previous are the
// documents byte for byte, so that `kubectl get cm -o yaml` shows them as
// they were in kubeadm-config; Status and History are YAML.
const (
	KeyTarget   = "target"
	KeyPrevious = "previous"
	KeyStatus   = "status"
	KeyHistory  = "history"
)

// HistoryLength is how many finished rollouts the record keeps.
const HistoryLength = 10

// MaxMessageBytes bounds every message as stored; a longer one is cut and
// marked with "...", as the upgrade record cuts its reasons. The record
// holds two whole documents, so everything else in it stays small.
const MaxMessageBytes = upgrade.MaxReasonBytes

// MaxRecordBytes bounds the record's data: below the API server's 1 MiB for
// a ConfigMap, with room for its metadata and for the two documents of a
// rollout growing a little.
const MaxRecordBytes = 900 << 10

// Kind says why a rollout runs.
type Kind string

// The kinds of rollout.
const (
	// KindRollout carries a new document to the nodes.
	KindRollout Kind = "rollout"
	// KindUndo carries the nodes an earlier rollout changed back to what
	// they ran before it (rollout undo).
	KindUndo Kind = "undo"
	// KindRevert does the same when a try was not confirmed in time.
	KindRevert Kind = "revert"
)

// Phase is where a rollout stands.
type Phase string

// The phases. Progressing, Paused, AwaitingConfirm and Reverting are active:
// no other rollout may start. Reverted and Undone are outcomes that only
// the history holds: what became of a rollout a revert or an undo took over
// before it ended.
const (
	Progressing     Phase = "Progressing"
	Paused          Phase = "Paused"
	AwaitingConfirm Phase = "AwaitingConfirm"
	Reverting       Phase = "Reverting"
	Succeeded       Phase = "Succeeded"
	Failed          Phase = "Failed"
	Reverted        Phase = "Reverted"
	Undone          Phase = "Undone"
)

// NodePhase is where one node of a rollout stands.
type NodePhase string

// The node phases. Updated and Unchanged are done successfully; RolledBack
// and RollbackFailed stop the rollout.
const (
	NodePending        NodePhase = "Pending"
	NodeInProgress     NodePhase = "InProgress"
	NodeUpdated        NodePhase = "Updated"
	NodeUnchanged      NodePhase = "Unchanged"
	NodeRolledBack     NodePhase = "RolledBack"
	NodeRollbackFailed NodePhase = "RollbackFailed"
)

// Source says where a rollout's target document came from.
type Source string

// The sources of a target.
const (
	SourceLive    Source = "live" // rollout start pinned the live document
	SourcePatch   Source = "patch"
	SourceEdit    Source = "edit"
	SourceRestore Source = "restore"
	SourceUndo    Source = "undo"
	SourceRevert  Source = "revert"
)

// Ref names a document the record holds: its hash, and the kubeadm-config
// resourceVersion it was read from, so that anyone can tell whether the
// live ConfigMap still holds it.
type Ref struct {
	Hash            string `json:"hash"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Source          Source `json:"source,omitempty"`
}

// Try is the timer of a rollout on trial: unless confirmed by Deadline,
// which is set when its last node is done, the agents revert it. It lives
// in the record so that it runs without the client that started it.
type Try struct {
	Duration    metav1.Duration `json:"duration"`
	Deadline    time.Time       `json:"deadline,omitzero"`
	ConfirmedBy string          `json:"confirmedBy,omitempty"`
	ConfirmedAt time.Time       `json:"confirmedAt,omitzero"`
}

// Node is one node's entry. Times are on the API server's clock.
type Node struct {
	Name  string    `json:"name"`
	Phase NodePhase `json:"phase"`
	// Components are the components the node's turn planned to change, and
	// once it is done, those it changed.
	Components []string  `json:"components,omitempty"`
	Agent      string    `json:"agent,omitempty"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	// Starts counts the times the node was started: at most once per
	// rollout. A restarted agent resumes its node and counts Resumes.
	Starts  int `json:"starts"`
	Resumes int `json:"resumes"`
	// Backup is the config backup whose manifest backups hold the node's
	// manifests from before its turn: a resumed agent that cannot complete
	// the node puts them back.
	Backup  string `json:"backup,omitempty"`
	Message string `json:"message,omitempty"`
}

// Status is the current (or last) rollout, data.status of the record.
type Status struct {
	// ID increases with every rollout, revert and undo; the history is
	// keyed by it.
	ID       int64 `json:"id"`
	Kind     Kind  `json:"kind"`
	Phase    Phase `json:"phase"`
	Target   Ref   `json:"target"`
	Previous *Ref  `json:"previous,omitempty"`
	// Untracked is set when Previous is not exactly the document Target
	// replaced: the last good target, with kubeadm-config written outside
	// rollouts since. Taking the rollout back would drop those writes too,
	// so an undo is refused unless forced, and no try is allowed.
	Untracked *Untracked `json:"untracked,omitempty"`
	// Order is the order the nodes go in; Nodes lists them in it.
	Order  []string `json:"order"`
	Canary int      `json:"canary,omitempty"`
	Try    *Try     `json:"try,omitempty"`
	// DocumentRestored says, for an undo or a revert, that kubeadm-config
	// was put back to the target, so that it happens once. Such a rollout
	// does not end before it is set.
	DocumentRestored bool `json:"documentRestored,omitempty"`
	// Abandoned are the nodes an operator gave up on (rollout abandon):
	// RollbackFailed in a rollout, dropped from the order of a take-back.
	Abandoned []Abandonment `json:"abandoned,omitempty"`
	// LeftOut are, for an undo, the nodes of the undone rollout it does not
	// take back although that rollout may have changed them: abandoned in
	// progress, their state unknown.
	LeftOut    []string  `json:"leftOut,omitempty"`
	StartedBy  string    `json:"startedBy"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	Message    string    `json:"message,omitempty"`
	Nodes      []Node    `json:"nodes"`
}

// Untracked is what lies between a rollout's previous document and its
// target that no rollout carried: kubeadm-config's writes from the
// previous document's resourceVersion to the target's (a plain patch, a
// kubectl edit, a --rollout write whose rollout did not start), and the
// fields going back to the previous document changes.
type Untracked struct {
	FromResourceVersion string `json:"fromResourceVersion,omitempty"`
	ToResourceVersion   string `json:"toResourceVersion,omitempty"`
	// Fields are the fields that differ between the previous document and
	// the target (clusterconfig.Diff), at most MaxUntrackedFields of them;
	// FieldsOmitted counts the others. None when a document does not parse.
	Fields        []string `json:"fields,omitempty"`
	FieldsOmitted int      `json:"fieldsOmitted,omitempty"`
}

// MaxUntrackedFields bounds the fields an Untracked lists.
const MaxUntrackedFields = 20

// HistoryEntry is one finished rollout, data.history of the record.
type HistoryEntry struct {
	ID         int64     `json:"id"`
	Kind       Kind      `json:"kind"`
	TargetHash string    `json:"targetHash"`
	By         string    `json:"by"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	Outcome    Phase     `json:"outcome"`
	Message    string    `json:"message,omitempty"`
}

// Record is the whole rollout record. The zero Record is an empty one: no
// rollout was ever started.
type Record struct {
	// Target is the pinned document, byte for byte; agents render from it,
	// never from the live ConfigMap.
	Target []byte
	// Previous is what the nodes ran before; nil when unknown.
	Previous []byte
	// Status is nil when no rollout was ever started.
	Status  *Status
	History []HistoryEntry
}

// Clock is who acts and when; transitions stamp the record with it. Now
// should be the API server's time (engine.ServerClock), so that every
// agent's stamps and every reader's ages share one clock.
type Clock struct {
	Now time.Time
	By  string
}

// now is the time stamped, in whole seconds as RFC 3339 shows it.
func (c Clock) now() time.Time { return c.Now.UTC().Truncate(time.Second) }

// Hash is how the record names a document: "sha256:" and the hex sha256 of
// its bytes (clusterconfig.Hash, with which the engine also stamps
// kubeadm-config). Agents compare it with the live document's to tell
// whether kubeadm-config still holds a rollout's target.
func Hash(doc []byte) string { return clusterconfig.Hash(doc) }

// Active reports whether the rollout still runs or waits: no other may
// start while it does.
func (p Phase) Active() bool {
	switch p {
	case Progressing, Paused, AwaitingConfirm, Reverting:
		return true
	}
	return false
}

// Done reports whether the node's turn went well: the nodes after it may go.
func (p NodePhase) Done() bool { return p == NodeUpdated || p == NodeUnchanged }

// running is the phase in which a rollout of kind k hands out turns.
func running(k Kind) Phase {
	if k == KindRevert {
		return Reverting
	}
	return Progressing
}

// Short is a document hash as tables show it: the first 12 hex digits.
func Short(hash string) string {
	const n = len("sha256:") + 12
	if len(hash) > n {
		return hash[:n]
	}
	return hash
}
