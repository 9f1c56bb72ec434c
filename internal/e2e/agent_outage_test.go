package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// agentLine is the agent's one line per event: the API server's time,
// info or warning, a reason and a message (docs/agent.md, "What it does").
var agentLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (info|warning) [A-Z][A-Za-z]+: `)

// TestAgentLogsAnOutageInItsOwnFormat: while the API server is away, the
// agent's stderr holds its own lines only, a failure said once per
// distinct message, never client-go's klog lines ("E1202 ...
// retrywatcher.go:176] "Watch failed"", twice a second in the review's
// run: 290 of them in 150s). The agent runs through a proxy that drops
// every connection for six seconds.
func TestAgentLogsAnOutageInItsOwnFormat(t *testing.T) {
	e := newEnv(t)
	p := startProxy(t)
	dir := t.TempDir()
	var log syncBuffer
	agent := exec.Command("kubectl", "kubeadmcfg", "agent", "--node-name", "cp-outage", "--manifests-dir", filepath.Join(dir, "manifests"),
		"--backup-dir", filepath.Join(dir, "backups"), "--heartbeat-interval", "2s", "--wait", "30s", "--stop-grace", "5s", "--metrics-bind-address", "0",
		"--kubeconfig", p.Kubeconfig, "--context", testcluster.AdminContext, "-n", e.ns)
	agent.Stderr = &log
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	done := make(chan struct{})
	go func() { waitErr = agent.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(log.String(), "AgentStarted") {
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not start:\n%s", log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.SetFaults(testcluster.Faults{Blackout: true})
	time.Sleep(6 * time.Second)
	p.SetFaults(testcluster.Faults{})
	time.Sleep(3 * time.Second)
	if err := agent.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		if waitErr != nil {
			t.Errorf("the agent did not stop cleanly: %v", waitErr)
		}
	case <-time.After(time.Minute):
		t.Fatal("the agent did not stop within a minute of SIGTERM")
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	watchFailed := map[string]int{}
	for _, l := range lines {
		if !agentLine.MatchString(l) {
			t.Errorf("a line outside the agent's format: %q", l)
		}
		if msg, ok := strings.CutPrefix(l[strings.Index(l, " ")+1:], "warning WatchFailed: "); ok {
			watchFailed[msg]++
		}
	}
	for msg, n := range watchFailed {
		if n > 1 {
			t.Errorf("logged %d times: WatchFailed: %s", n, msg)
		}
	}
	t.Logf("the agent logged %d lines over the outage", len(lines))
}
