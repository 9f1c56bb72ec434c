package cmd

import (
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
)

// addReconfigureInfo fills in, for backup list, which nodes have a backup
// as their last known good and which manifests reconfigure kept with it.
func addReconfigureInfo(store *backup.Store, infos []BackupInfo) error {
	marks, err := store.LastGoods()
	if err != nil {
		return err
	}
	for i := range infos {
		for _, m := range marks {
			if m.Backup == infos[i].Name {
				infos[i].LastKnownGoodOf = append(infos[i].LastKnownGoodOf, m.Node)
			}
		}
		if infos[i].Problems == nil {
			if infos[i].Manifests, err = store.Manifests(infos[i].Name); err != nil {
				return err
			}
		}
	}
	return nil
}
