package reconfigure

import (
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

var streams = genericiooptions.NewTestIOStreamsDiscard()

func TestReconfigureValidate(t *testing.T) {
	r := func(mutate func(o *Options)) *Options {
		o := NewOptions(cmdutil.NewClusterFlags(), streams)
		o.Node.Name = "cp-1"
		mutate(o)
		return o
	}
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"defaults", r(func(*Options) {}), ""},
		{"latest good, one component, dry run", r(func(o *Options) {
			o.LatestGood, o.Components, o.DryRun = true, []string{"kube-apiserver"}, "client"
		}), ""},
		// etcd is a component since issue 22 (it was refused before).
		{"etcd", r(func(o *Options) { o.Components = []string{"apiserver", "etcd"} }), ""},
		{"etcd alone", r(func(o *Options) { o.Components = []string{"etcd"} }), ""},
		{"unknown component", r(func(o *Options) { o.Components = []string{"apiserver", "kubelet"} }),
			`--components: unknown component "kubelet" (want apiserver, controller-manager, scheduler or etcd)`},
		{"no component", r(func(o *Options) { o.Components = nil }),
			"--components: no component given (want apiserver, controller-manager, scheduler or etcd)"},
		{"two sources", r(func(o *Options) { o.FromBackup, o.LatestGood = "b", true }),
			"give --from-backup or --latest-good, not both"},
		{"node name", r(func(o *Options) { o.Node.Name = "CP_1" }),
			`--node-name "CP_1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"advertise address", r(func(o *Options) { o.Node.AdvertiseAddress = "cp-1" }),
			`--advertise-address must be an IP address, not "cp-1"`},
		{"bind port", r(func(o *Options) { o.BindPortGiven, o.Node.BindPort = true, 70000 }),
			"--bind-port must be between 1 and 65535, not 70000"},
		{"server dry run", r(func(o *Options) { o.DryRun = "server" }),
			`--dry-run must be none or client, not "server": reconfigure changes files on this node, not objects in the API`},
		{"other dry run", r(func(o *Options) { o.DryRun = "all" }), `--dry-run must be none or client, not "all"`},
		{"wait", r(func(o *Options) { o.Wait = 0 }), waitTooShort("0s")},
		{"wait below the minimum", r(func(o *Options) { o.Wait = 30*time.Second - time.Millisecond }), waitTooShort("29.999s")},
		{"wait of a second", r(func(o *Options) { o.Wait = time.Second }), waitTooShort("1s")},
		{"wait at the minimum", r(func(o *Options) { o.Wait = 30 * time.Second }), ""},
		{"wait below the minimum on a dry run", r(func(o *Options) { o.Wait, o.DryRun = 3*time.Second, "client" }), waitTooShort("3s")},
		{"manifests dir", r(func(o *Options) { o.ManifestsDir = " " }), "--manifests-dir must not be empty"},
		{"kubeadm", r(func(o *Options) { o.Kubeadm = "" }), "--kubeadm must not be empty"},
		{"key", r(func(o *Options) { o.Key = "" }), "--key must not be empty"},
		{"state configmap", r(func(o *Options) { o.StateConfigMap = "" }), "--state-configmap must not be empty"},
		{"both overrides", r(func(o *Options) { o.AllowVersionChange, o.AllowDuringUpgrade = true, true }), ""},
		{"keep", r(func(o *Options) { o.Backup.Keep = 0 }), "--keep must be at least 1, not 0"},
	})
}

// waitTooShort is Validate's refusal of a --wait under 30s: below it, a
// healthy kube-apiserver, which may take the kubelet's 30s grace period
// just to stop, could not be confirmed, and every change would be rolled
// back (review R2).
func waitTooShort(got string) string {
	return "--wait must be at least 30s, not " + got + ": a restarting kube-apiserver may take the kubelet's 30s grace period just to stop"
}
