package cmdutil

import (
	"github.com/spf13/cobra"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
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

const backupDirHelp = "Directory of backups (default: $KUBEADMCFG_BACKUP_DIR, else /etc/kubernetes/kubeadmcfg/backups as root, else $XDG_STATE_HOME/kubeadmcfg/backups)"

// AddDirFlag binds --backup-dir alone (commands that only read backups).
func (f *BackupFlags) AddDirFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.Dir, "backup-dir", f.Dir, backupDirHelp)
}

// AddFlags binds --backup-dir and --keep; withNoBackup adds --no-backup for
// commands whose backup is automatic.
func (f *BackupFlags) AddFlags(cmd *cobra.Command, withNoBackup bool) {
	f.AddDirFlag(cmd)
	cmd.Flags().IntVar(&f.Keep, "keep", f.Keep, "Keep this many backups of the ConfigMap in --backup-dir, removing the oldest the plugin wrote")
	if withNoBackup {
		cmd.Flags().BoolVar(&f.NoBackup, "no-backup", f.NoBackup, "Do not back up the document before replacing it")
	}
}

// Validate checks the flags.
func (f *BackupFlags) Validate() error {
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

// Hook returns the engine's backup hook for a write to server, or nil with
// --no-backup.
func (f *BackupFlags) Hook(server, reason string) engine.Backuper {
	if f.NoBackup {
		return nil
	}
	return &backup.Hook{Store: f.Store(), Keep: f.Keep, Server: server, Reason: reason}
}
