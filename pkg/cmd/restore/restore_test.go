package restore

import (
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

var streams = genericiooptions.NewTestIOStreamsDiscard()

func TestRestoreValidate(t *testing.T) {
	r := func(mutate func(o *Options)) *Options {
		o := NewOptions(cmdutil.NewClusterFlags(), streams)
		o.Latest = true
		mutate(o)
		return o
	}
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"latest", r(func(*Options) {}), ""},
		{"both", r(func(o *Options) { o.Name = "x" }), "give a backup name or --latest, not both or neither"},
		{"neither", r(func(o *Options) { o.Latest = false }), "give a backup name or --latest, not both or neither"},
		{"node flags without a file", r(func(o *Options) { o.nodeFlags = true }),
			"--node-name, --advertise-address and --bind-port only go with --to-file: per-node values never go into the shared ConfigMap"},
		{"node name", r(func(o *Options) { o.ToFile, o.nodeFlags, o.Node.Name = "f", true, "Node_1" }),
			`--node-name "Node_1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"address", r(func(o *Options) { o.ToFile, o.nodeFlags, o.Node.AdvertiseAddress = "f", true, "node-1" }),
			`--advertise-address must be an IP address, not "node-1"`},
		{"port", r(func(o *Options) { o.ToFile, o.nodeFlags, o.bindPortSet, o.Node.BindPort = "f", true, true, 0 }),
			"--bind-port must be between 1 and 65535, not 0"},
		{"to file with node", r(func(o *Options) {
			o.ToFile, o.nodeFlags, o.bindPortSet = "f", true, true
			o.Node = clusterconfig.NodeConfig{Name: "controller-0", AdvertiseAddress: "192.0.2.10", BindPort: 6443}
		}), ""},
		{"write flags", r(func(o *Options) { o.Write.DryRun = "x" }), `--dry-run must be one of none, client, server, not "x"`},
		{"rollout", withArgs(t, r(func(*Options) {}), "--rollout", "--wait"), ""},
		{"rollout to a file", withArgs(t, r(func(o *Options) { o.ToFile = "f" }), "--rollout"),
			"--rollout does not go with --to-file: a file is not rolled out to the nodes"},
		{"wait without --rollout", withArgs(t, r(func(*Options) {}), "--wait"), "--wait only goes with --rollout"},
	})
}

// withArgs binds o's flags to a command and parses args, as cobra does
// before Complete reads which flags were given.
func withArgs(t *testing.T, o *Options, args ...string) *Options {
	t.Helper()
	cmd := &cobra.Command{Use: "restore"}
	o.AddFlags(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	o.Rollout.Complete(cmd)
	return o
}
