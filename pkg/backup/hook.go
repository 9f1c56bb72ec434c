package backup

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/version"
)

// Save backs up the document under key of cm, with the metadata that ties it
// to its cluster (server, uid) and version. parsed is that document when the
// caller has already parsed it; otherwise it is parsed here for metadata.
func (s *Store) Save(cm *corev1.ConfigMap, key, server, reason string, parsed *clusterconfig.Document) (*Backup, error) {
	doc, ok := cm.Data[key]
	if !ok {
		return nil, exitcode.NotFoundf("configmap %s/%s has no key %q to back up", cm.Namespace, cm.Name, key)
	}
	meta := Meta{
		Server: server, Namespace: cm.Namespace, ConfigMap: cm.Name, UID: string(cm.UID),
		ResourceVersion: cm.ResourceVersion, PluginVersion: version.Version, Reason: reason,
	}
	if parsed == nil {
		parsed, _ = clusterconfig.Parse([]byte(doc))
	}
	if parsed != nil {
		meta.KubernetesVersion, meta.APIVersion = parsed.KubernetesVersion(), parsed.APIVersion()
	}
	return s.Write([]byte(doc), meta)
}

// Hook backs up the document a write is about to replace, as the engine's
// Backuper. The same copy (uid and resourceVersion) is backed up once
// however often the write retries; after each backup this ConfigMap's
// backups beyond Keep are pruned.
type Hook struct {
	Store  *Store
	Keep   int
	Server string
	Reason string

	mu              sync.Mutex
	lastUID, lastRV string
}

// Backup saves cm's document under key and returns the file's path, or ""
// when this copy was already saved.
func (h *Hook) Backup(_ context.Context, cm *corev1.ConfigMap, key string, parsed *clusterconfig.Document) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if string(cm.UID) == h.lastUID && cm.ResourceVersion == h.lastRV {
		return "", nil
	}
	b, err := h.Save(cm, key, parsed)
	if err != nil {
		return "", err
	}
	h.lastUID, h.lastRV = string(cm.UID), cm.ResourceVersion
	return b.Path, nil
}

// Save backs up cm's document under key, then prunes this ConfigMap's
// backups beyond Keep. Pruning is housekeeping: a file it cannot remove
// does not fail the backup ('backup prune' reports such errors).
func (h *Hook) Save(cm *corev1.ConfigMap, key string, parsed *clusterconfig.Document) (*Backup, error) {
	b, err := h.Store.Save(cm, key, h.Server, h.Reason, parsed)
	if err != nil {
		return nil, err
	}
	_, _ = h.Store.PruneOwner(h.Keep, b.Owner())
	return b, nil
}

// MismatchError is a backup that does not belong to the document it would
// replace: another ConfigMap uid, or another kubernetesVersion.
type MismatchError struct{ Reason string }

func (e *MismatchError) Error() string { return e.Reason }

// CheckTarget reports whether b may replace the document under key of cm: a
// backup of another ConfigMap uid (another cluster, or a re-created
// ConfigMap) or of another kubernetesVersion (a restore across an upgrade) is
// refused with exit code 4.
func (b *Backup) CheckTarget(cm *corev1.ConfigMap, key string) error {
	if b.UID != string(cm.UID) {
		return exitcode.New(exitcode.Conflict, &MismatchError{Reason: fmt.Sprintf(
			"backup %s is of configmap uid %s, the live one is %s (another cluster, or a re-created ConfigMap)", b.Name, b.UID, cm.UID)})
	}
	live := ""
	if doc, err := clusterconfig.Parse([]byte(cm.Data[key])); err == nil {
		live = doc.KubernetesVersion()
	}
	// A live document that does not even parse is what a restore is for:
	// there is no version to compare with.
	if live != "" && b.KubernetesVersion != live {
		return exitcode.New(exitcode.Conflict, &MismatchError{Reason: fmt.Sprintf(
			"backup %s is of kubernetesVersion %s, the live document is at %s (a restore across an upgrade)", b.Name, b.KubernetesVersion, live)})
	}
	return nil
}
