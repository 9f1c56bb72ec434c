package cmd

import (
	"github.com/spf13/cobra"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

// Shell completion: cobra's `completion` command and its hidden __complete
// protocol, which kubectl also uses through the kubectl_complete-kubeadmcfg
// helper shipped beside the binary. Values that live in the cluster (node
// names) are looked up with a short timeout so a TAB never hangs.

// registerFlagCompletions completes the enumerated flags wherever they exist.
func registerFlagCompletions(root *cobra.Command) {
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
