package patch

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

// completePaths offers ClusterConfiguration field paths for --set and
// --unset, one level at a time.
func completePaths(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	prefix := toComplete
	if i := strings.IndexByte(prefix, '='); i >= 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, p := range clusterconfig.FieldPaths() {
		if strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}
