package cmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/version"
)

// BackupFlags choose where backups go and how many are kept.
type BackupFlags struct {
	Dir      string
	Keep     int
	NoBackup bool
}

// NewBackupFlags returns the defaults.
func NewBackupFlags() *BackupFlags {
	return &BackupFlags{Keep: 50}
}

// AddFlags binds --backup-dir and --keep; withNoBackup adds --no-backup for
// commands whose backup is automatic.
func (f *BackupFlags) AddFlags(cmd *cobra.Command, withNoBackup bool) {
	cmd.Flags().StringVar(&f.Dir, "backup-dir", f.Dir, backupDirHelp)
	cmd.Flags().IntVar(&f.Keep, "keep", f.Keep, "Keep this many backups in --backup-dir, removing the oldest the plugin wrote")
	if withNoBackup {
		cmd.Flags().BoolVar(&f.NoBackup, "no-backup", f.NoBackup, "Do not back up the document before replacing it")
	}
}

const backupDirHelp = "Directory of backups (default: $KUBEADMCFG_BACKUP_DIR, else /etc/kubernetes/kubeadmcfg/backups as root, else $XDG_STATE_HOME/kubeadmcfg/backups)"

// Check validates the flags.
func (f *BackupFlags) Check() error {
	if f.Keep < 1 {
		return exitcode.Usagef("--keep must be at least 1, not %d", f.Keep)
	}
	return nil
}

// Store returns the backup store in --backup-dir, or the default directory.
func (f *BackupFlags) Store() *backup.Store {
	if f.Dir == "" {
		return &backup.Store{Dir: backup.DefaultDir()}
	}
	return &backup.Store{Dir: f.Dir}
}

// Save backs up the document under key of cm, then prunes.
func (f *BackupFlags) Save(cm *corev1.ConfigMap, key, server, reason string) (*backup.Backup, error) {
	doc, ok := cm.Data[key]
	if !ok {
		return nil, exitcode.NotFoundf("configmap %s/%s has no key %q to back up", cm.Namespace, cm.Name, key)
	}
	meta := backup.Meta{
		Server: server, Namespace: cm.Namespace, ConfigMap: cm.Name, UID: string(cm.UID),
		ResourceVersion: cm.ResourceVersion, PluginVersion: version.Version, Reason: reason,
	}
	if parsed, err := clusterconfig.Parse([]byte(doc)); err == nil {
		meta.KubernetesVersion, meta.APIVersion = parsed.KubernetesVersion(), parsed.APIVersion()
	}
	b, err := f.Store().Write([]byte(doc), meta)
	if err != nil {
		return nil, err
	}
	// Pruning is housekeeping: a file it cannot remove must not stop the
	// write the backup was for ('backup prune' reports such errors).
	_, _ = f.Store().PruneConfigMap(f.Keep, cm.Name)
	return b, nil
}

// Hook returns the engine's BeforeWrite hook: back up the exact copy the
// Update is about to replace, unless --no-backup. A failed backup aborts the
// write. The same copy is backed up once however often a write retries.
func (f *BackupFlags) Hook(key, server, reason string, saved *string) func(context.Context, *corev1.ConfigMap) error {
	if f.NoBackup {
		return nil
	}
	var lastUID, lastRV string
	return func(_ context.Context, cm *corev1.ConfigMap) error {
		if string(cm.UID) == lastUID && cm.ResourceVersion == lastRV {
			return nil
		}
		b, err := f.Save(cm, key, server, reason)
		if err != nil {
			return fmt.Errorf("backup before writing failed, nothing was written (use --no-backup to skip it): %w", err)
		}
		lastUID, lastRV = string(cm.UID), cm.ResourceVersion
		*saved = b.Path
		return nil
	}
}

// Attach wires the backup hook into an engine; the path of the backup it
// writes lands in saved.
func (f *BackupFlags) Attach(eng *engine.Engine, server, reason string, saved *string) {
	eng.Options.BeforeWrite = f.Hook(eng.Target.Key, server, reason, saved)
}
