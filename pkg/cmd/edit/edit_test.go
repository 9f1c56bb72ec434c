package edit

import (
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

var streams = genericiooptions.NewTestIOStreamsDiscard()

func TestEditValidate(t *testing.T) {
	edit := func(mutate func(o *Options)) *Options {
		o := NewOptions(cmdutil.NewClusterFlags(), streams)
		o.Editor = cmdutil.Editor{Args: []string{"vi"}}
		mutate(o)
		return o
	}
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"valid", edit(func(*Options) {}), ""},
		{"no editor", edit(func(o *Options) { o.Editor = cmdutil.Editor{} }), "no editor to run: set KUBE_EDITOR or EDITOR"},
		{"validate", edit(func(o *Options) { o.Write.Validate = "lax" }),
			`--validate must be one of strict, warn, ignore, not "lax"`},
		{"dry-run", edit(func(o *Options) { o.Write.DryRun = "maybe" }),
			`--dry-run must be one of none, client, server, not "maybe"`},
		{"timeout", edit(func(o *Options) { o.Write.Timeout = 0 }), "--timeout must be positive, not 0s"},
		{"if-leader", edit(func(o *Options) { o.Write.IfLeader = "kube-system" }),
			`--if-leader must be NAMESPACE/NAME, not "kube-system"`},
		{"keep", edit(func(o *Options) { o.Backup.Keep = 0 }), "--keep must be at least 1, not 0"},
	})
}
