package backup

import (
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

var streams = genericiooptions.NewTestIOStreamsDiscard()

func TestBackupValidate(t *testing.T) {
	b := func(mutate func(o *Options)) *Options {
		o := NewOptions(cmdutil.NewClusterFlags(), streams)
		mutate(o)
		return o
	}
	verify := func(all bool, names ...string) *VerifyOptions {
		o := NewVerifyOptions(streams)
		o.All, o.Names = all, names
		return o
	}
	prune := NewPruneOptions(streams)
	prune.Backup.Keep = -1
	pruneSnapshots := NewPruneOptions(streams)
	pruneSnapshots.KeepEtcdSnapshots = 0
	badVersion := verify(true)
	badVersion.KubeadmVersion = "1"
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"backup valid", b(func(*Options) {}), ""},
		{"backup keep", b(func(o *Options) { o.Backup.Keep = 0 }), "--keep must be at least 1, not 0"},
		{"backup key", b(func(o *Options) { o.Key = "" }), "--key must not be empty"},
		{"backup timeout", b(func(o *Options) { o.Timeout = 0 }), "--timeout must be positive, not 0s"},
		{"list", NewListOptions(streams), ""},
		{"verify all", verify(true), ""},
		{"verify names", verify(false, "a"), ""},
		{"verify neither", verify(false), "give backup names or --all, not both or neither"},
		{"verify both", verify(true, "a"), "give backup names or --all, not both or neither"},
		{"verify kubeadm-version", badVersion, `--kubeadm-version: want a version such as v1.37.2, not "1"`},
		{"prune keep", prune, "--keep must be at least 1, not -1"},
		{"prune keep etcd snapshots", pruneSnapshots, "--keep-etcd-snapshots must be at least 1, not 0"},
	})
}
