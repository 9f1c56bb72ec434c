package kubeadmupgrade

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Kubelet is how the node's kubelet is upgraded and checked.
type Kubelet struct {
	// Restart is the command that installs the kubelet of release
	// $KUBEADMCFG_KUBELET_VERSION (KubeletVersionEnv) and restarts it;
	// nil is DefaultKubeletRestart.
	Restart []string
	// Config is the kubelet's configuration file: where its /healthz
	// answers ("": kubeadm's default, 127.0.0.1:10248).
	Config string
	// RestartTimeout bounds the restart command, apart from Request.Wait,
	// which bounds the gate after it: an install from a package mirror
	// takes longer than a component's restart (0 is
	// DefaultKubeletRestartTimeout).
	RestartTimeout time.Duration
	// RestartGrace is how long the restart command has to end once it is
	// told to stop (SIGTERM: its timeout passed, or the agent was told to
	// stop) before its process group is killed (0 is
	// DefaultKubeletRestartGrace). A command that runs the install
	// elsewhere (a systemd unit) stops it within this time, so that no
	// install goes on after the step failed.
	RestartGrace time.Duration
}

// The defaults of Kubelet's bounds: ten minutes for an install and
// restart, and a minute for a command told to stop to stop what it
// started (the drop-in's install script gives its unit 30s).
const (
	DefaultKubeletRestartTimeout = 10 * time.Minute
	DefaultKubeletRestartGrace   = time.Minute
)

// KubeletVersionEnv names the release the kubelet restart command
// installs, in its environment.
const KubeletVersionEnv = "KUBEADMCFG_KUBELET_VERSION"

// DefaultKubeletRestart is the kubelet restart command of a node whose
// kubelet package the operator upgraded beforehand.
var DefaultKubeletRestart = []string{"systemctl", "restart", "kubelet"}

// restartKubelet runs the kubelet restart command with the release in its
// environment, bounded by RestartTimeout; stopped, it gets SIGTERM and
// RestartGrace before it is killed.
func (s *step) restartKubelet(ctx context.Context, _ string) error {
	k := s.node.Kubelet
	command := k.Restart
	if len(command) == 0 {
		command = DefaultKubeletRestart
	}
	cmd := proc.Command(command[0], command[1:]...)
	cmd.Env = []string{KubeletVersionEnv + "=" + s.req.Version}
	cmd.Timeout = orDefault(k.RestartTimeout, DefaultKubeletRestartTimeout)
	cmd.Grace = orDefault(k.RestartGrace, DefaultKubeletRestartGrace)
	s.emit(false, "UpgradePhase", "node %s: restarting its kubelet on %s: %s", s.node.Name, s.req.Version, strings.Join(command, " "))
	return s.start(ctx, cmd, "the kubelet restart command")
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// kubeletGate waits, within Wait, until the kubelet answers /healthz and
// its Node is Ready and reports the target as its kubeletVersion.
func (s *step) kubeletGate(ctx context.Context, _ string) error {
	healthz, err := KubeletHealthz(s.node.Kubelet.Config)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(s.req.Wait)
	for {
		last := ""
		if resp, err := client.Get(healthz); err != nil {
			last = fmt.Sprintf("%s: %v", healthz, err)
		} else {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				last = fmt.Sprintf("%s answers %s", healthz, resp.Status)
			}
		}
		if last == "" {
			last = s.nodeReport(ctx)
		}
		if last == "" {
			return nil
		}
		if !time.Now().Add(time.Second).Before(deadline) {
			return fmt.Errorf("the kubelet is not back on %s within %s: %s", s.req.Version, s.req.Wait, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for the kubelet: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// nodeReport says what keeps the node from being Ready on the target (""
// when nothing does).
func (s *step) nodeReport(ctx context.Context) string {
	n, err := s.node.Config.Node(ctx, s.node.Name)
	if err != nil {
		return exitcode.Message(err)
	}
	if got := n.Status.NodeInfo.KubeletVersion; got != s.req.Version {
		return fmt.Sprintf("node %s reports kubelet %s", s.node.Name, got)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return ""
		}
	}
	return fmt.Sprintf("node %s is not Ready", s.node.Name)
}

// KubeletHealthz is the kubelet's /healthz, as its configuration file at
// path says (healthzBindAddress, healthzPort; kubeadm's defaults
// 127.0.0.1:10248 when path is "").
func KubeletHealthz(path string) (string, error) {
	host, port := "127.0.0.1", 10248
	if path != "" {
		data, err := input.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("cannot read the kubelet's configuration: %w", err)
		}
		var cfg struct {
			HealthzBindAddress string `json:"healthzBindAddress"`
			HealthzPort        *int   `json:"healthzPort"`
		}
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			return "", fmt.Errorf("the kubelet's configuration %s: %w", path, err)
		}
		if cfg.HealthzBindAddress != "" {
			host = cfg.HealthzBindAddress
		}
		if cfg.HealthzPort != nil {
			port = *cfg.HealthzPort
		}
	}
	if port == 0 {
		return "", fmt.Errorf("the kubelet serves no /healthz (healthzPort 0 in %s)", path)
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/healthz", nil
}
