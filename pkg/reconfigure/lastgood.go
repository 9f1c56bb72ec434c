package reconfigure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The last known good: the ClusterConfiguration backup a node last came up
// healthy on, over every component, its etcd member included. A run records
// it only once the node is healthy, so a failed or rolled-back run never
// moves it.

// appliedBackup is the ClusterConfiguration backup a run applies: the
// backup it came from, or a backup of the live (or pinned) document taken
// now; the node's last known good already, when it holds the same
// document.
func (r *run) appliedBackup(src *source) (*backup.Backup, error) {
	if src.backup != nil {
		return src.backup, nil
	}
	store, t := r.node.Store, r.node.Config.Target()
	sum := sha256.Sum256(src.document)
	if lg, err := store.LastGood(t.Namespace, t.Name, r.node.Name); err == nil &&
		lg.UID == string(src.cm.UID) && lg.SHA256 == hex.EncodeToString(sum[:]) {
		return lg, nil
	}
	hook := &backup.Hook{Store: store, Keep: r.node.Keep, Server: r.node.Server, Reason: backup.ReasonReconfigure}
	b, err := hook.Save(src.cm, t.Key, nil)
	if err != nil {
		return nil, &StageError{Stage: StageBackup, Err: fmt.Errorf("back up the ClusterConfiguration to apply, nothing was changed: %w", err)}
	}
	return b, nil
}

// markHealthy makes the configuration a node already runs its last known
// good, when every component is on it and healthy. Only a refusal to read
// the mirror Pods is an error: the rights are missing.
func (r *run) markHealthy(ctx context.Context, src *source, plan *controlplane.Plan, opts controlplane.Options, rep *Report) error {
	if !r.allComponents() {
		return nil
	}
	if err := controlplane.Check(ctx, plan, opts); err != nil {
		if exitcode.FromError(err) == exitcode.Forbidden {
			return err
		}
		rep.Warnings = append(rep.Warnings, &NotRecordedError{Err: err})
		return nil
	}
	applied, err := r.appliedBackup(src)
	if err != nil {
		rep.Warnings = append(rep.Warnings, &NotRecordedError{Err: err})
		return nil
	}
	rep.Backup = applied.Name
	r.markLastGood(applied, rep)
	return nil
}

// markLastGood records b as the node's last known good after a healthy run
// over every component, its etcd member included when it has one.
func (r *run) markLastGood(b *backup.Backup, rep *Report) {
	if !r.allComponents() {
		rep.Warnings = append(rep.Warnings, &PartialError{Components: r.components})
		return
	}
	if err := r.node.Store.MarkLastGood(b, rep.Node); err != nil {
		rep.Warnings = append(rep.Warnings, &NotRecordedError{Healthy: true, Err: err})
		return
	}
	rep.LastKnownGood = b.Name
}

// LastKnownGoods returns, for each backup that is some node's last known
// good, those nodes, in the order the store lists its records: what
// 'backup list' shows beside each backup.
func LastKnownGoods(store *backup.Store) (map[string][]string, error) {
	marks, err := store.LastGoods()
	if err != nil {
		return nil, err
	}
	nodes := map[string][]string{}
	for _, m := range marks {
		nodes[m.Backup] = append(nodes[m.Backup], m.Node)
	}
	return nodes, nil
}
