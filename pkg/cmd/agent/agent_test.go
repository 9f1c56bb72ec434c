package agent

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
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
		{"kubelet restart timeout", o(func(o *Options) { o.KubeletRestartTimeout = 0 }), "--kubelet-restart-timeout must be positive, not 0s"},
		{"node name", o(func(o *Options) { o.Node.Name = "CP_1" }),
			`--node-name "CP_1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"wait", o(func(o *Options) { o.Wait = 10 * time.Second }),
			"--wait must be at least 30s, not 10s: a restarting kube-apiserver may take the kubelet's 30s grace period just to stop"},
		{"state configmap", o(func(o *Options) { o.StateConfigMap = "" }), "--state-configmap must not be empty"},
		{"manifests dir", o(func(o *Options) { o.ManifestsDir = "" }), "--manifests-dir must not be empty"},
		{"kubeadm", o(func(o *Options) { o.Kubeadm = " " }), "--kubeadm must not be empty"},
		{"keep", o(func(o *Options) { o.Backup.Keep = 0 }), "--keep must be at least 1, not 0"},
		{"metrics off", o(func(o *Options) { o.MetricsBindAddress = "0" }), ""},
		{"metrics on every address", o(func(o *Options) { o.MetricsBindAddress = ":10268" }), ""},
		{"metrics on an IPv6 address", o(func(o *Options) { o.MetricsBindAddress = "[::1]:9999" }), ""},
		{"metrics without a port", o(func(o *Options) { o.MetricsBindAddress = "127.0.0.1" }),
			`--metrics-bind-address must be HOST:PORT with a port of 1-65535 (or 0 to serve no metrics), not "127.0.0.1"`},
		{"metrics on port 0", o(func(o *Options) { o.MetricsBindAddress = "127.0.0.1:0" }),
			`--metrics-bind-address must be HOST:PORT with a port of 1-65535 (or 0 to serve no metrics), not "127.0.0.1:0"`},
		{"metrics on a named port", o(func(o *Options) { o.MetricsBindAddress = "127.0.0.1:http" }),
			`--metrics-bind-address must be HOST:PORT with a port of 1-65535 (or 0 to serve no metrics), not "127.0.0.1:http"`},
		{"metrics on a port out of range", o(func(o *Options) { o.MetricsBindAddress = "127.0.0.1:70000" }),
			`--metrics-bind-address must be HOST:PORT with a port of 1-65535 (or 0 to serve no metrics), not "127.0.0.1:70000"`},
		{"log format json", o(func(o *Options) { o.LogFormat = "json" }), ""},
		{"log format", o(func(o *Options) { o.LogFormat = "logfmt" }), `--log-format must be one of text, json, not "logfmt"`},
		{"log format in capitals", o(func(o *Options) { o.LogFormat = "JSON" }), `--log-format must be one of text, json, not "JSON"`},
	})
}

// An address already taken fails the agent before it starts, naming the
// flag; "0" serves nothing.
func TestServeMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	h := http.NotFoundHandler()
	_, err = serveMetrics(ln.Addr().String(), h, nil)
	if exitcode.FromError(err) != exitcode.Failure || !strings.Contains(fmt.Sprint(err), "cannot serve metrics on --metrics-bind-address "+ln.Addr().String()) {
		t.Errorf("a taken address: got %v (exit %d)", err, exitcode.FromError(err))
	}
	stop, err := serveMetrics("0", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop()
}
