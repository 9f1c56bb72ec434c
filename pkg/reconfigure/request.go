package reconfigure

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
)

// Node is a control-plane node as every run on it sees it: the clients and
// stores it works with and the node's own values and files. It is built
// once, where a command completes its flags or an agent starts, and handed
// to every run on the node: a Request says only what one run does.
type Node struct {
	// Config reads the kubeadm-config ConfigMap (its Target names the
	// namespace, the ConfigMap and the key) and the node's mirror Pods, and
	// holds the etcd lock (EtcdLockLease).
	Config *engine.Engine
	// Store keeps the ClusterConfiguration backup a run applies, the
	// manifests it replaces and the node's last known good. Keep bounds
	// the backups of the ConfigMap; Server is recorded in them.
	Store  *backup.Store
	Keep   int
	Server string
	// NodeConfig holds the node's own values. Name is required: it names
	// the mirror Pods and the last known good (controlplane.NodeName reads
	// the hostname). An empty AdvertiseAddress or BindPort is read from the
	// node's kube-apiserver manifest; PatchesDir holds kubeadm patches.
	clusterconfig.NodeConfig
	// ManifestsDir is the kubelet's static Pod manifests directory.
	ManifestsDir string
	// Kubeadm is the kubeadm binary that renders the manifests.
	Kubeadm string
	// CertificatesDir is the node's kubeadm certificates directory, where
	// the etcd client certificate its member is checked with is
	// (etcd/healthcheck-client, else apiserver-etcd-client); "" is the
	// ClusterConfiguration's certificatesDir, by default kubeadm's
	// /etc/kubernetes/pki.
	CertificatesDir string
	// UpgradeConfigMap names the ConfigMap that holds the upgrade record
	// (pkg/upgrade), in Config's namespace; "" is upgrade.DefaultConfigMap.
	UpgradeConfigMap string
	// Identity names whoever runs on the node as the holder of the etcd
	// lock; "" is reconfigure/NODE/PID-RANDOM, a new one for each run. The
	// agent gives its own.
	Identity string
	// Now is the API server's clock (engine.ServerClock.Now), stamped on
	// the etcd lock for people to read; nil is this host's. Whether a lock
	// is abandoned is never judged by it.
	Now func() time.Time
}

// Request is one reconfiguration of a node: what to apply, to which
// components, and how.
type Request struct {
	// Source chooses the ClusterConfiguration; the zero Source is the live
	// one.
	Source Source
	// Components are reconfigured in controlplane.ParseComponents' order,
	// etcd last; nil is every one, etcd included on a node that runs a
	// local member of a local etcd. Only a run over every component the
	// node has is recorded as the node's last known good.
	Components []controlplane.Component
	// Wait is how long each changed component may take to come up
	// healthy before the rollback: at least controlplane.MinWait, unless
	// DryRun (a usage error, exit 2, otherwise).
	Wait time.Duration
	// NoRollback leaves a component that does not come up as it is.
	NoRollback bool
	// DryRun stops after the plan: nothing is locked, backed up or changed.
	// It is refused as a run would be (StageUpgrade, StageVersion), so that
	// its exit code says what a run would do.
	DryRun bool
	// AllowVersionChange applies a render that changes a component's image
	// tag, or that a kubeadm of another minor release than kubernetesVersion
	// makes. Without it such a run stops at StageVersion with exit 4
	// (controlplane.VersionChangeError, controlplane.KubeadmReleaseError):
	// versions are kubeadm upgrade's to change, with etcd and the kubelet in
	// their turn, not a reconfiguration's.
	AllowVersionChange bool
	// AllowImageChange plans a render that changes a component's image
	// tag, but still refuses a kubeadm of another minor release than
	// kubernetesVersion (StageVersion, controlplane.KubeadmReleaseError). A
	// comparison of the node with the document, such as the node agent's,
	// takes a changed tag for a difference to report, while what a kubeadm
	// of another release renders is not what the node should run: compared
	// with it, a node would differ by that release's defaults alone.
	AllowImageChange bool
	// AllowDuringUpgrade runs whatever the upgrade record says, without
	// reading it. Without it a run stops at StageUpgrade with exit 4
	// (UpgradeInProgressError) while the record says an upgrade is in
	// progress, or when it cannot be read. It is not AllowVersionChange:
	// a change made during an upgrade on purpose still must not change
	// versions by accident.
	AllowDuringUpgrade bool
	// NoEtcdSnapshot skips the snapshot of the etcd member taken into
	// the node's Store before the member is changed.
	NoEtcdSnapshot bool
	// Progress receives what the run does, as it does it; nil discards it.
	Progress func(Event)
	// Begin, when set, is called once the plan is known and before
	// anything on the node changes (after the etcd member's checks and
	// snapshot, when it changes), with the manifests directory still
	// locked: the components that will change, by Pod name (none when the
	// node already runs the document), and the ClusterConfiguration backup
	// whose manifest backups will hold what they ran before ("" when none
	// changes). An error from it ends the run there, with a nil Report:
	// nothing was changed. The node agent records the start of a node's
	// turn in it, so that the record names the plan actually applied.
	// Not called on a dry run.
	Begin func(components []string, backup string) error
}

// Source chooses the ClusterConfiguration a run applies. The zero Source is
// the live document of the kubeadm-config ConfigMap; at most one field is
// set.
type Source struct {
	// Backup names a backup to apply instead.
	Backup string
	// LatestGood applies the node's last known good instead.
	LatestGood bool
	// Pinned applies the document of this copy of the kubeadm-config
	// ConfigMap, read earlier, instead of the live one, so that every node
	// of a rollout gets the same bytes whatever is written meanwhile. Its
	// uid and resourceVersion say where it came from; the API is not read.
	Pinned *corev1.ConfigMap
}

// Report is what a run did.
type Report struct {
	// Node is the node's name.
	Node string
	// Source says in words which ClusterConfiguration was applied.
	Source string
	// Backup is the ClusterConfiguration backup the run applied: the one
	// it came from, or a backup of the live document taken for the run.
	Backup string
	DryRun bool
	// Plan is every component considered, changed or not, in order.
	Plan *controlplane.Plan
	// Outcomes is what Apply did to each of Plan's components; nil when
	// nothing had to change.
	Outcomes []controlplane.Outcome
	// Etcd is what became of the node's etcd member.
	Etcd EtcdReport
	// LastKnownGood is the backup now recorded as the node's last known
	// good, "" when none was recorded (Warnings says why).
	LastKnownGood string
	// Warnings are what the run went past without failing. They are errors
	// so that a caller can tell them apart (errors.As) and add what would
	// fix them: a StageError, a PartialError, or a wrapped cause.
	Warnings []error
}
