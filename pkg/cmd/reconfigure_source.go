package cmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Where reconfigure takes the ClusterConfiguration from, and what it records
// once the node is healthy on it.

// reconfigureSource is the ClusterConfiguration a run applies.
type reconfigureSource struct {
	document   []byte
	apiVersion string
	// cm is the live ConfigMap it was read from; nil for a backup.
	cm *corev1.ConfigMap
	// backup is the backup it came from; nil for the live document.
	backup *backup.Backup
	label  string
}

// source reads the ClusterConfiguration to apply: the live one, the backup
// named, or this node's last known good.
func (o *ReconfigureOptions) source(ctx context.Context, p *reconfigurePrinter) (*reconfigureSource, error) {
	store := o.Backup.Store()
	if o.FromBackup == "" && !o.LatestGood {
		cm, err := o.engine.Get(ctx)
		if err != nil {
			return nil, err
		}
		raw, err := engine.DocumentOf(cm, o.engine.Target())
		if err != nil {
			return nil, err
		}
		doc, err := clusterconfig.Parse([]byte(raw))
		if err != nil {
			return nil, exitcode.Invalidf("the live ClusterConfiguration cannot be applied: %w", err)
		}
		return &reconfigureSource{document: []byte(raw), apiVersion: doc.APIVersion(), cm: cm,
			label: fmt.Sprintf("the live ClusterConfiguration (resourceVersion %s)", cm.ResourceVersion)}, nil
	}
	var b *backup.Backup
	var err error
	if o.LatestGood {
		b, err = store.LastGood(o.Cluster.Namespace(), o.Cluster.ConfigMap, o.Node.Name)
	} else {
		b, err = store.Read(o.FromBackup)
	}
	if err != nil {
		return nil, err
	}
	if problems := b.Verify(clusterconfig.ValidateOptions{}); len(problems) > 0 {
		return nil, exitcode.Invalidf("backup %s failed verification, nothing was changed: %s", b.Name, strings.Join(problems, "; "))
	}
	// A backup of another cluster, or of another Kubernetes version, would
	// take this node somewhere it never was. When the API is down (the
	// reason to go back, often), the check is left out, with a warning.
	cm, err := o.engine.Get(ctx)
	switch {
	case err == nil:
		if err := b.CheckTarget(cm, o.Key); err != nil {
			return nil, err
		}
	case errors.Is(err, engine.ErrUnreachable):
		p.warn("cannot compare backup %s with the live ConfigMap (%s); applying it anyway", b.Name, exitcode.Message(err))
	default:
		return nil, err
	}
	return &reconfigureSource{document: b.Document, apiVersion: b.APIVersion, backup: b, label: "backup " + b.Name}, nil
}

// appliedBackup is the ClusterConfiguration backup a run applies: the
// backup it came from, or a backup of the live document taken now (the
// node's last known good already, when it holds the same document).
func (o *ReconfigureOptions) appliedBackup(src *reconfigureSource) (*backup.Backup, error) {
	if src.backup != nil {
		return src.backup, nil
	}
	store := o.Backup.Store()
	sum := sha256.Sum256(src.document)
	if lg, err := store.LastGood(o.Cluster.Namespace(), o.Cluster.ConfigMap, o.Node.Name); err == nil &&
		lg.UID == string(src.cm.UID) && lg.SHA256 == hex.EncodeToString(sum[:]) {
		return lg, nil
	}
	hook := &backup.Hook{Store: store, Keep: o.Backup.Keep, Server: o.server, Reason: backup.ReasonReconfigure}
	b, err := hook.Save(src.cm, o.Key, nil)
	if err != nil {
		return nil, exitcode.WithHint(fmt.Errorf("back up the ClusterConfiguration to apply, nothing was changed: %w", err), "check --backup-dir")
	}
	return b, nil
}

// markHealthy makes the configuration a node already runs its last known
// good, when every component is on it and healthy. Only a refusal to read
// the mirror Pods is an error: the rights are missing.
func (o *ReconfigureOptions) markHealthy(ctx context.Context, src *reconfigureSource, plan *controlplane.Plan, opts controlplane.Options, res *ReconfigureResult) error {
	if !o.allComponents() {
		return nil
	}
	if err := controlplane.Check(ctx, plan, opts); err != nil {
		if exitcode.FromError(err) == exitcode.Forbidden {
			return err
		}
		res.Warnings = append(res.Warnings, "not recorded as the last known good: "+exitcode.Message(err))
		return nil
	}
	applied, err := o.appliedBackup(src)
	if err != nil {
		res.Warnings = append(res.Warnings, "not recorded as the last known good: "+exitcode.Message(err))
		return nil
	}
	res.Backup = applied.Name
	o.markLastGood(applied, res)
	return nil
}

// markLastGood records b as the node's last known good after a healthy run
// over every component.
func (o *ReconfigureOptions) markLastGood(b *backup.Backup, res *ReconfigureResult) {
	if !o.allComponents() {
		res.Warnings = append(res.Warnings, "not recorded as the last known good: only "+strings.Join(o.Components, ",")+" reconfigured")
		return
	}
	if err := o.Backup.Store().MarkLastGood(b, res.Node); err != nil {
		res.Warnings = append(res.Warnings, "the node is healthy, but its last known good was not recorded: "+exitcode.Message(err))
		return
	}
	res.LastKnownGood = b.Name
}

// manifestBackups keeps the manifests a run replaces beside the
// ClusterConfiguration backup it applies.
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
