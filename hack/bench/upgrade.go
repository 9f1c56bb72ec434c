package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// The upgrade bench, on the local control plane of hack/localcluster run at
// the release before the harness's current one: three kubeadm
// control-plane nodes at v1.36.3 with a stacked etcd, an agent on each as a
// plain process with the node flags of an upgrade (those of the e2e tests'
// startUpgradeAgent), in namespaces of the bench's own (namespace.go). It
// runs one `upgrade-apply v1.37.2 --wait`, carried out by the agents with
// the real kubeadm, and prints, from the upgrade record's history (which
// steps ran, in which order) and the agents' logs (each line stamped on the
// bench's clock as it arrives; an agent logs a step's start and outcome
// right after the write that records it):
//
//   - per node: its control-plane step, from the write that began it to the
//     one that recorded it done, against the sum of its kubeadm runs (the
//     agent's "kubeadm ...: done in D" lines) and its gate; its kubelet step;
//   - each hand-off: from one step recorded done (its node healthy) to the
//     next step begun, by the next node's agent;
//   - the whole upgrade against the sum of all its kubeadm runs: what is
//     left is the agents' own work (records, gates, hand-offs, the etcd
//     snapshot, kubeadm-config) and the kubelets' restarts.
//
// Figures, not a test: it asserts nothing but that the upgrade completed.

// upgradeMain runs the bench in its namespaces and returns the exit code.
func upgradeMain() int { return namespacedMain("upgrade", benchUpgrade) }

// upgradeBench is the bench's cluster and agents.
type upgradeBench struct {
	in     inner
	nodes  *testcluster.Nodes
	client kubernetes.Interface
	agents []*agentProc
}

func benchUpgrade(ctx context.Context, in inner) error {
	logf, closeLog, err := logTo(filepath.Join(in.Dir, "cluster.log"))
	if err != nil {
		return err
	}
	defer closeLog()
	from, to := in.Bins.Previous.Version, in.Bins.Version
	say("starting 3 kubeadm control-plane nodes at %s with a stacked etcd (details in %s)", from, filepath.Join(in.Dir, "cluster.log"))
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	nodes, err := testcluster.StartLocal(sctx, in.Bins, testcluster.LocalOptions{
		Nodes: 3, Etcd: testcluster.EtcdStacked, KubernetesVersion: from, Dir: filepath.Join(in.Dir, "cluster"), Log: logf})
	cancel()
	if err != nil {
		return err
	}
	defer nodes.Stop()
	client, err := nodes.Clientset()
	if err != nil {
		return err
	}
	b := &upgradeBench{in: in, nodes: nodes, client: client}
	for i, n := range nodes.Nodes {
		// A metrics port each (rollout.go's metricsPort).
		flags := append(nodeFlags(nodes, n, in.Dir), upgradeFlags(n)...)
		flags = append(flags, "--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", metricsPort+10*i))
		// The agent renders with the node's kubeadm through the template,
		// which runs it in the node's root: what it hands kubeadm must be
		// under the root.
		env := []string{"TMPDIR=" + filepath.Join(n.Root, "tmp")}
		p, err := startAgent(in.Plugin, nodes.Kubeconfig, n, flags, env, filepath.Join(in.Dir, "agent-"+n.Name+".log"))
		if err != nil {
			return err
		}
		b.agents = append(b.agents, p)
	}
	defer b.stopAgents()
	if err := b.ready(ctx, to); err != nil {
		return err
	}

	say("upgrade-apply %s --wait: the agents upgrade the nodes from %s", to, from)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(wctx, in.Plugin, "upgrade-apply", to, "--wait", "--kubeconfig", nodes.Kubeconfig)
	cmd.Env = append(os.Environ(), "KUBEADMCFG_BACKUP_DIR="+filepath.Join(in.Dir, "backups"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("upgrade-apply %s --wait: %w:\n%s", to, err, out)
	}
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, upgrade.DefaultConfigMap, metav1.GetOptions{})
	if err != nil {
		return err
	}
	rec, _, err := upgrade.FromConfigMap(cm)
	if err != nil {
		return err
	}
	u, err := b.observe(rec, start)
	if err != nil {
		return err
	}
	u.from, u.to, u.wait = from, to, took
	printUpgrade(u)
	return nil
}

// upgradeFlags are the node flags an upgrade needs besides nodeFlags: the
// node's kubeadm of each release, its kubelet's restart command and
// configuration, its certificates, and SystemVerification ignored (a
// node's root has no /proc, /sys or /boot for kubeadm to check).
func upgradeFlags(n *testcluster.Node) []string {
	return []string{"--cert-dir", filepath.Join(n.Root, "etc", "kubernetes", "pki"),
		"--kubeadm-template", n.KubeadmTemplate, "--kubelet-restart-command", n.KubeletRestart,
		"--kubelet-config", filepath.Join(n.Root, "var", "lib", "kubelet", "config.yaml"),
		"--ignore-preflight-errors", "SystemVerification"}
}

// ready waits until every agent publishes what upgrade-apply's preflight
// asks of it: the target's kubeadm on its node and its etcd member healthy.
func (b *upgradeBench) ready(ctx context.Context, version string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		missing := ""
		for _, n := range b.nodes.Nodes {
			l, err := b.client.CoordinationV1().Leases("kube-system").Get(ctx, nodestate.LeaseName(n.Name), metav1.GetOptions{})
			if err != nil {
				missing = n.Name + ": " + err.Error()
				break
			}
			_, st, ok, err := nodestate.FromLease(l)
			if err != nil || !ok || st == nil || !slices.Contains(st.KubeadmVersions, version) || st.Etcd == nil || !st.Etcd.Healthy {
				missing = fmt.Sprintf("%s: %+v %v", n.Name, st, err)
				break
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agents do not publish kubeadm %s and a healthy etcd member after 2 minutes: %s", version, missing)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (b *upgradeBench) stopAgents() {
	for _, p := range b.agents {
		p.stop()
	}
	b.agents = nil
}

// upgradeRun is what the bench saw of the upgrade.
type upgradeRun struct {
	from, to string
	wait     time.Duration // upgrade-apply --wait, as the operator waited
	steps    []stepRun     // in the order the record's history has them
	// history is the record's transitions, in order; first and last are
	// when the first agent began its step and the last recorded its end.
	history     []upgrade.Transition
	first, last time.Time
}

// stepRun is one node's step, as its agent logged it.
type stepRun struct {
	node    string
	step    string // upgrading-control-plane-NODE, or upgrading-kubelet
	kubelet bool
	// begun and done: the agent logged the write that began the step and
	// the one that recorded it Done.
	begun, done time.Time
	kubeadm     []time.Duration // each kubeadm run, as the agent timed it
	// gate is from the agent recording the gate phase to its logging the
	// node healthy (control-plane steps only).
	gate time.Duration
}

func (s stepRun) kubeadmSum() time.Duration {
	var sum time.Duration
	for _, d := range s.kubeadm {
		sum += d
	}
	return sum
}

// observe finds each step the history records, in order, in its agent's
// log.
func (b *upgradeBench) observe(rec *upgrade.Record, since time.Time) (*upgradeRun, error) {
	u := &upgradeRun{history: rec.History}
	for _, t := range rec.History {
		s := stepRun{node: t.Host, step: t.To}
		switch {
		case t.Host == "" && strings.HasPrefix(t.To, "upgrading-control-plane-"):
			s.node = strings.TrimPrefix(t.To, "upgrading-control-plane-")
		case t.Host != "" && t.To == "upgrading-kubelet":
			s.kubelet = true
		default:
			continue
		}
		p := b.agent(s.node)
		if p == nil {
			return nil, fmt.Errorf("the history names a step of %s, which has no agent: %+v", s.node, t)
		}
		if err := p.step(&s, since); err != nil {
			return nil, err
		}
		since = s.done
		u.steps = append(u.steps, s)
	}
	if len(u.steps) == 0 {
		return nil, fmt.Errorf("the history records no step: %+v", rec.History)
	}
	u.first, u.last = u.steps[0].begun, u.steps[len(u.steps)-1].done
	return u, nil
}

func (b *upgradeBench) agent(node string) *agentProc {
	for _, p := range b.agents {
		if p.node == node {
			return p
		}
	}
	return nil
}

// step finds s in the agent's log after since: the line of the write that
// began it ("UpgradeStepStarted: node N begins STEP"), its kubeadm runs
// ("Kubeadm: kubeadm ...: done in D"), its gate, and the line of the write
// that recorded it Done ("UpgradeStepDone").
func (p *agentProc) step(s *stepRun, since time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gate time.Time
	for _, l := range p.lines {
		if !l.at.After(since) {
			continue
		}
		msg := l.text
		if s.begun.IsZero() {
			if strings.Contains(msg, " info UpgradeStepStarted: node "+s.node+" begins "+s.step+",") {
				s.begun = l.at
			}
			continue
		}
		switch {
		case strings.Contains(msg, " info Kubeadm: kubeadm "):
			_, d, ok := strings.Cut(msg, ": done in ")
			took, err := time.ParseDuration(d)
			if !ok || err != nil {
				return fmt.Errorf("node %s: a kubeadm run the bench cannot read: %q", s.node, msg)
			}
			s.kubeadm = append(s.kubeadm, took)
		case strings.HasSuffix(msg, ": phase gate"):
			gate = l.at
		case strings.Contains(msg, "on every component, healthy") && !gate.IsZero():
			s.gate = l.at.Sub(gate)
		case strings.Contains(msg, " info UpgradeStepDone: "):
			s.done = l.at
			return nil
		case strings.Contains(msg, " warning UpgradeStep"):
			return fmt.Errorf("node %s: %s did not end Done: %s", s.node, s.step, msg)
		}
	}
	return fmt.Errorf("node %s: its agent did not log %s begun and done after %s", s.node, s.step, since.Format("15:04:05.000"))
}
