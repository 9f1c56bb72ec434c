package cmdutil

import (
	"sort"

	"github.com/spf13/cobra"
)

// Completions more than one verb offers. Values that live in the cluster
// are looked up by the verb that needs them, with a short timeout so a TAB
// never hangs.

// FixedCompletion offers a fixed list of values, and no file names: the
// root completes the enumerated flags of every verb with it, and a verb its
// own.
func FixedCompletion(values ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// CompleteBackupNames lists the backups in the command's --backup-dir,
// newest first, for every verb that takes a backup's name.
func CompleteBackupNames(flags *BackupFlags) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		names, err := flags.Store().List()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		sort.Sort(sort.Reverse(sort.StringSlice(names))) // newest first
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
