package reconfigure

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// source is the ClusterConfiguration a run applies.
type source struct {
	document   []byte
	doc        *clusterconfig.Document
	apiVersion string
	// cm is the ConfigMap it was read from (live or pinned); nil for a
	// backup.
	cm *corev1.ConfigMap
	// backup is the backup it came from; nil otherwise.
	backup *backup.Backup
	label  string
}

// source reads the ClusterConfiguration to apply: the live one, the pinned
// one, the backup named, or this node's last known good.
func (r *run) source(ctx context.Context) (*source, error) {
	s := r.req.Source
	chosen := 0
	for _, set := range []bool{s.Backup != "", s.LatestGood, s.Pinned != nil} {
		if set {
			chosen++
		}
	}
	switch {
	case chosen > 1:
		return nil, exitcode.Usagef("choose one ClusterConfiguration to apply: a backup, the last known good or a pinned copy")
	case s.Pinned != nil:
		return r.fromConfigMap(s.Pinned, "pinned")
	case chosen == 0:
		cm, err := r.node.Config.Get(ctx)
		if err != nil {
			return nil, err
		}
		return r.fromConfigMap(cm, "live")
	}
	return r.fromBackup(ctx)
}

// fromConfigMap takes the document of a copy of the ConfigMap; which says
// which copy ("live", "pinned").
func (r *run) fromConfigMap(cm *corev1.ConfigMap, which string) (*source, error) {
	raw, err := engine.DocumentOf(cm, r.node.Config.Target())
	if err != nil {
		return nil, err
	}
	doc, err := clusterconfig.Parse([]byte(raw))
	if err != nil {
		return nil, exitcode.Invalidf("the %s ClusterConfiguration cannot be applied: %w", which, err)
	}
	return &source{document: []byte(raw), doc: doc, apiVersion: doc.APIVersion(), cm: cm,
		label: fmt.Sprintf("the %s ClusterConfiguration (resourceVersion %s)", which, cm.ResourceVersion)}, nil
}

// fromBackup reads and verifies the backup named, or the node's last known
// good, and checks that it belongs to this cluster and version.
func (r *run) fromBackup(ctx context.Context) (*source, error) {
	store, t := r.node.Store, r.node.Config.Target()
	var b *backup.Backup
	var err error
	if r.req.Source.LatestGood {
		b, err = store.LastGood(t.Namespace, t.Name, r.node.Name)
	} else {
		b, err = store.Read(r.req.Source.Backup)
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
	cm, err := r.node.Config.Get(ctx)
	switch {
	case err == nil:
		if err := b.CheckTarget(cm, t.Key); err != nil {
			return nil, err
		}
	case errors.Is(err, engine.ErrUnreachable):
		r.emit(Event{Kind: EventWarning, Message: fmt.Sprintf("cannot compare backup %s with the live ConfigMap (%s); applying it anyway",
			b.Name, exitcode.Message(err))})
	default:
		return nil, err
	}
	doc, err := clusterconfig.Parse(b.Document)
	if err != nil {
		return nil, exitcode.Invalidf("backup %s cannot be applied: %w", b.Name, err)
	}
	return &source{document: b.Document, doc: doc, apiVersion: b.APIVersion, backup: b, label: "backup " + b.Name}, nil
}
