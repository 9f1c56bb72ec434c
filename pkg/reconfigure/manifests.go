package reconfigure

import (
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
)

// manifestBackups keeps the manifests a run replaces beside the
// ClusterConfiguration backup it applies, as controlplane.Apply's
// ManifestBackuper: pruning that backup removes them too, and a node can be
// put back by hand from them.
type manifestBackups struct {
	store  *backup.Store
	config string
	node   string
}

func (m *manifestBackups) BackupManifest(c controlplane.Component, path string, manifest []byte) (string, error) {
	b, err := m.store.WriteManifest(manifest, backup.ManifestMeta{Node: m.node, Component: c.PodName(), Path: path, ConfigBackup: m.config})
	if err != nil {
		return "", err
	}
	return b.Name, nil
}
