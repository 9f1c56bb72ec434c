package agent

import (
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

func TestAgentValidate(t *testing.T) {
	o := func(mutate func(o *Options)) *Options {
		o := NewOptions(cmdutil.NewClusterFlags(), genericiooptions.NewTestIOStreamsDiscard())
		o.Node.Name = "cp-1"
		mutate(o)
		return o
	}
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"defaults", o(func(*Options) {}), ""},
		{"heartbeat", o(func(o *Options) { o.HeartbeatInterval = 500 * time.Millisecond }), "--heartbeat-interval must be at least 1s, not 500ms"},
		{"stop grace", o(func(o *Options) { o.StopGrace = 0 }), "--stop-grace must be positive, not 0s"},
		{"node name", o(func(o *Options) { o.Node.Name = "CP_1" }),
			`--node-name "CP_1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"wait", o(func(o *Options) { o.Wait = 10 * time.Second }),
			"--wait must be at least 30s, not 10s: a restarting kube-apiserver may take the kubelet's 30s grace period just to stop"},
		{"state configmap", o(func(o *Options) { o.StateConfigMap = "" }), "--state-configmap must not be empty"},
		{"manifests dir", o(func(o *Options) { o.ManifestsDir = "" }), "--manifests-dir must not be empty"},
		{"kubeadm", o(func(o *Options) { o.Kubeadm = " " }), "--kubeadm must not be empty"},
		{"keep", o(func(o *Options) { o.Backup.Keep = 0 }), "--keep must be at least 1, not 0"},
	})
}
