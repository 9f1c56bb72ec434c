package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// etcdRollout: with an agent on every node (plain processes with the node
// flags, acting as the DaemonSet's ServiceAccount with the rights
// deploy/rbac.yaml gives it), `nodes` shows every member's etcd drift from
// the API alone, and `rollout start --wait` carries the change to every
// member, one at a time, through the agents: the agent runs reconfigure's
// code in process, etcd lock, checks and snapshot included.
func etcdRollout(t *testing.T, c *etcdCluster) {
	wantExit(t, runLong(t, time.Minute, "kubectl", "apply", "-f", "../../deploy/rbac.yaml", "--kubeconfig", c.Kubeconfig), 0)
	for _, n := range c.order {
		c.startEtcdAgent(t, n)
	}
	c.patch(t, c.order[0], "--set", "etcd.local.extraArgs.snapshot-count=23456")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	waitFor(t, ctx, "every node out of sync on etcd alone", func() error { return c.wantNodes(t, "no", "etcd") })

	watch := watchEtcd(t, c.Nodes.Nodes)
	updates := map[string]int{}
	for _, n := range c.order {
		updates[n.Name] = n.Runner.Stats("etcd").Updates + 1
	}
	start := time.Now()
	r := runLong(t, 10*time.Minute, "kubectl", "kubeadmcfg", "rollout", "start", "--wait", "--timeout", "9m", "--kubeconfig", c.Kubeconfig)
	took := time.Since(start)
	verdict := judge(watch.names, watch.stopAndGet())
	wantExit(t, r, 0)
	t.Logf("rollout of an etcd flag over three members through the agents took %s; etcd: %s", took.Round(100*time.Millisecond), verdict)
	if verdict.minUp < 2 || verdict.minListed != 3 {
		t.Errorf("quorum was at risk: %s", verdict)
	}
	c.wantEtcdUpdates(t, updates)
	c.wantOneAtATime(t)
	for _, n := range c.order {
		if line := commandLine(t, n, "etcd"); !flagIn(line, "--snapshot-count=23456") {
			t.Errorf("%s: etcd runs without the new flag: %s", n.Name, line)
		}
		if snaps := c.snapshots(t, n); len(snaps) != 2 {
			t.Errorf("%s: want the agent's snapshot beside reconfigure's, got %d", n.Name, len(snaps))
		}
	}
	c.wantNoLock(t)
	waitFor(t, ctx, "every node in sync", func() error { return c.wantNodes(t, "yes", "") })
}

// wantNodes checks what `nodes -o json` says of every node.
func (c *etcdCluster) wantNodes(t *testing.T, inSync, reason string) error {
	t.Helper()
	r := runLong(t, time.Minute, "kubectl", "kubeadmcfg", "nodes", "-o", "json", "--kubeconfig", c.Kubeconfig)
	if r.code != 0 {
		return fmt.Errorf("nodes: %s", r)
	}
	var view struct {
		Nodes []struct {
			Name         string `json:"name"`
			InSync       string `json:"inSync"`
			InSyncReason string `json:"inSyncReason"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &view); err != nil {
		return err
	}
	if len(view.Nodes) != len(c.order) {
		return fmt.Errorf("nodes shows %d nodes: %s", len(view.Nodes), r.stdout)
	}
	for _, n := range view.Nodes {
		if n.InSync != inSync || n.InSyncReason != reason {
			return fmt.Errorf("%s: in sync %q (%s), want %q (%s)", n.Name, n.InSync, n.InSyncReason, inSync, reason)
		}
	}
	return nil
}

// startEtcdAgent runs node n's agent until the test ends, as the
// DaemonSet's ServiceAccount.
func (c *etcdCluster) startEtcdAgent(t *testing.T, n *testNode) {
	t.Helper()
	args := append([]string{"kubeadmcfg", "agent", "--heartbeat-interval", "2s", "--wait", "2m", "--stop-grace", "20s",
		"--kubeconfig", c.Kubeconfig, "--as", agentIdentity, "--cert-dir", filepath.Join(n.Root, "etc", "kubernetes", "pki"),
		"--metrics-bind-address", metricsAddr(n.Name)}, n.flags()...)
	p := &agentProcess{cmd: exec.Command("kubectl", args...), done: make(chan struct{})}
	p.cmd.Stderr = &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(time.Minute):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if log := p.log.String(); t.Failed() || strings.Contains(log, "etcd:") {
			t.Logf("agent of %s logged:\n%s", n.Name, log)
		}
	})
}
