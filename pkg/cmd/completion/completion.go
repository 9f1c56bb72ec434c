// Package completion is shell completion: cobra's completion command and
// its hidden __complete protocol, which kubectl also uses through the
// kubectl_complete-kubeadmcfg helper shipped beside the binary. This
// package completes the enumerated flags of every verb; what a verb
// completes from the cluster or the backups it registers itself, with
// pkg/cmd/cmdutil's helpers. It drives no domain package.
package completion

import (
	"github.com/spf13/cobra"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

// RegisterFlagCompletions completes the enumerated flags wherever they
// exist under root: the root calls it once every verb is added, and a
// verb's own completion of such a flag, registered first, wins.
func RegisterFlagCompletions(root *cobra.Command) {
	fixed := map[string][]string{
		"output":   {"json", "yaml", "jsonpath=", "go-template=", "jsonpath-file=", "go-template-file="},
		"dry-run":  {"none", "client", "server"},
		"validate": {"strict", "warn", "ignore"},
		"type":     {"merge", "json"},
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for name, values := range fixed {
			if c.Flags().Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, cmdutil.FixedCompletion(values...))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
