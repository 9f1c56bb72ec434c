package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// A node's kubelet step of an upgrade: the operator's command installs the
// kubelet of the target release and restarts it; then the kubelet must
// answer /healthz, and the API must show its Node Ready, reporting the
// target as its kubeletVersion.

// KubeletVersionEnv names the release the kubelet restart command
// installs, in its environment.
const KubeletVersionEnv = "KUBEADMCFG_KUBELET_VERSION"

// DefaultKubeletRestart is the kubelet restart command of a node whose
// kubelet package the operator upgraded beforehand.
var DefaultKubeletRestart = []string{"systemctl", "restart", "kubelet"}

// kubelet runs the node's kubelet step.
func (w *upgrades) kubelet(ctx context.Context, rec *upgradestate.Record, turn upgradestate.Turn) error {
	a := w.a
	rn, err := w.begin(ctx, rec, string(turn.Host), a.cfg.Name, turn.Lost, phaseKubelet)
	if err != nil {
		return err
	}
	version := rec.ToVersion
	var failure *phaseError
	a.job(ctx, func(jctx, wctx context.Context) {
		hb := w.heartbeat(wctx, rn)
		defer func() {
			if hb != nil {
				hb.Stop()
			}
		}()
		if out, err := w.restartKubelet(jctx, version); err != nil {
			failure = &phaseError{phase: phaseKubelet, err: err, output: out}
		} else if err := w.kubeletGate(jctx, version); err != nil {
			failure = &phaseError{phase: phaseGate, err: err}
		}
		ok, outcome, reason := failure == nil, upgradestate.NodeDone, fmt.Sprintf("upgrade-apply: node %s's kubelet runs %s", a.cfg.Name, version)
		if failure != nil {
			// The kubelet is the node's own: nothing puts it back but the
			// operator's command, which upgrade-resume runs again.
			outcome = upgradestate.NodeFailed
			reason = upgradestate.PhaseFailure(a.cfg.Name, string(turn.Host), failure.phase, exitcode.Message(failure.err), failure.output)
		}
		cm, err := w.update(wctx, func(rec *upgradestate.Record) (bool, error) {
			if _, err := rec.EndRun(w.clock(), rn.ID, ok, reason); err != nil {
				return false, err
			}
			rec.Agents.EndNode(a.cfg.Name, outcome, reason)
			return true, nil
		})
		if err != nil {
			a.warn("UpgradeNotRecorded", "node %s: its kubelet step ended %s, but the record could not say so: %s", a.cfg.Name, outcome, exitcode.Message(err))
			return
		}
		a.upgradeEvent(wctx, cm, !ok, "UpgradeStep"+outcome, reason)
	})
	w.waiting = ""
	return nil
}

// restartKubelet runs the kubelet restart command with the release in its
// environment, bounded by Wait.
func (w *upgrades) restartKubelet(ctx context.Context, version string) (string, error) {
	a := w.a
	command := a.cfg.KubeletRestart
	if len(command) == 0 {
		command = DefaultKubeletRestart
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Env = append(os.Environ(), KubeletVersionEnv+"="+version)
	tail := &upgradestate.Tail{}
	cmd.Stdout, cmd.Stderr = tail, tail
	supervise(cmd)
	a.info("UpgradePhase", "node %s: restarting its kubelet on %s: %s", a.cfg.Name, version, strings.Join(command, " "))
	err := cmd.Run()
	out := tail.Last(phaseTailLines, phaseTailBytes)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out, nil
	case ctx.Err() != nil:
		return out, fmt.Errorf("the kubelet restart command did not end within %s", a.cfg.Wait)
	case errors.As(err, &exit):
		return out, fmt.Errorf("the kubelet restart command exited with %s", exit.ProcessState)
	}
	return out, fmt.Errorf("cannot run the kubelet restart command: %w", err)
}

// kubeletGate waits, within Wait, until the kubelet answers /healthz and
// its Node is Ready and reports version.
func (w *upgrades) kubeletGate(ctx context.Context, version string) error {
	a := w.a
	healthz, err := kubeletHealthz(a.cfg.KubeletConfig)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(a.cfg.Wait)
	last := ""
	for {
		last = ""
		if resp, err := client.Get(healthz); err != nil {
			last = fmt.Sprintf("%s: %v", healthz, err)
		} else {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				last = fmt.Sprintf("%s answers %s", healthz, resp.Status)
			}
		}
		if last == "" {
			last = nodeReport(ctx, a, version)
		}
		if last == "" {
			return nil
		}
		if !time.Now().Add(time.Second).Before(deadline) {
			return fmt.Errorf("the kubelet is not back on %s within %s: %s", version, a.cfg.Wait, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for the kubelet: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// nodeReport says what keeps the node from being Ready on version ("" when
// nothing does).
func nodeReport(ctx context.Context, a *Agent, version string) string {
	n, err := a.cfg.Config.Node(ctx, a.cfg.Name)
	if err != nil {
		return exitcode.Message(err)
	}
	if got := n.Status.NodeInfo.KubeletVersion; got != version {
		return fmt.Sprintf("node %s reports kubelet %s", a.cfg.Name, got)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return ""
		}
	}
	return fmt.Sprintf("node %s is not Ready", a.cfg.Name)
}

// kubeletHealthz is the kubelet's /healthz, as its configuration file says
// (healthzBindAddress, healthzPort; kubeadm's defaults 127.0.0.1:10248).
func kubeletHealthz(path string) (string, error) {
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
