package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// The rollout bench, on the local control plane of hack/localcluster run:
// three kubeadm control-plane nodes with a stacked etcd, an agent on each as
// a plain process with the node flags (the plugin built as released), in
// namespaces of the bench's own (namespace.go). In alternating rounds it
// changes one kube-apiserver flag and carries it to the nodes either with
// three reconfigure runs, one node after the other, or with one
// `rollout start --wait`; then it leaves the agents idle and watches them.
// It prints:
//
//   - each hand-off of a rollout: from one node's agent finding its node
//     healthy (the line it logs) to the next node's start in the record
//     (its BeginNode, as the bench's watch of the record delivers it),
//     split into the steps between;
//   - the whole rollout against the sum of the three reconfigure runs;
//   - an idle agent: CPU, memory, and the watches it holds.
//
// Figures, not a test: it asserts nothing but that every step succeeded.

type rolloutOptions struct {
	Rounds int
	Idle   time.Duration
}

// rolloutMain runs the bench in its namespaces and returns the exit code.
func rolloutMain(o rolloutOptions) int {
	return namespacedMain("rollout", func(ctx context.Context, in inner) error { return benchRollout(ctx, in, o) })
}

// rolloutBench is the bench's cluster, agents and observations.
type rolloutBench struct {
	in     inner
	nodes  *testcluster.Nodes
	client kubernetes.Interface
	agents []*agentProc
	tl     timeline
	value  int // the flag's last value
}

// say is the bench's progress, on stderr.
func say(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }

func benchRollout(ctx context.Context, in inner, o rolloutOptions) error {
	logf, closeLog, err := logTo(filepath.Join(in.Dir, "cluster.log"))
	if err != nil {
		return err
	}
	defer closeLog()
	say("starting 3 kubeadm control-plane nodes with a stacked etcd (details in %s)", filepath.Join(in.Dir, "cluster.log"))
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	nodes, err := testcluster.StartLocal(sctx, in.Bins, testcluster.LocalOptions{
		Nodes: 3, Etcd: testcluster.EtcdStacked, Dir: filepath.Join(in.Dir, "cluster"), Log: logf})
	cancel()
	if err != nil {
		return err
	}
	defer nodes.Stop()
	client, err := nodes.Clientset()
	if err != nil {
		return err
	}
	b := &rolloutBench{in: in, nodes: nodes, client: client, value: 100}
	fctx, stopFollowing := context.WithCancel(ctx)
	following := b.tl.follow(fctx, client)
	defer func() {
		stopFollowing()
		if err := <-following; err != nil && !errors.Is(err, context.Canceled) {
			say("the watch of the record ended: %v", err)
		}
	}()
	for i, n := range nodes.Nodes {
		// The agents share the namespace's loopback: a metrics port each,
		// 10 apart as the local nodes' components are.
		metrics := fmt.Sprintf("127.0.0.1:%d", metricsPort+10*i)
		p, err := startAgent(in.Plugin, nodes.Kubeconfig, n, append(nodeFlags(nodes, n, in.Dir), "--metrics-bind-address", metrics), nil,
			filepath.Join(in.Dir, "agent-"+n.Name+".log"))
		if err != nil {
			return err
		}
		p.metrics = metrics
		b.agents = append(b.agents, p)
	}
	defer b.stopAgents()
	if err := b.settle(ctx); err != nil {
		return err
	}

	var rounds []round
	for i := range o.Rounds {
		say("round %d of %d: three reconfigure runs", i+1, o.Rounds)
		r := round{}
		if r.reconfigure, err = b.reconfigureRound(ctx); err != nil {
			return err
		}
		say("round %d of %d: one rollout", i+1, o.Rounds)
		if r.rollout, r.handoffs, err = b.rolloutRound(ctx); err != nil {
			return err
		}
		rounds = append(rounds, r)
	}

	say("the agents idle for %s", o.Idle)
	if err := b.settle(ctx); err != nil {
		return err
	}
	idle, versions, err := b.idle(o.Idle)
	if err != nil {
		return err
	}
	watches, err := b.agentWatches(ctx)
	if err != nil {
		return err
	}
	printRollout(rounds, idle, versions, watches)
	return nil
}

// plugin runs the plugin and returns how long it took.
func (b *rolloutBench) plugin(ctx context.Context, args ...string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, b.in.Plugin, append(args, "--kubeconfig", b.nodes.Kubeconfig)...)
	cmd.Env = append(os.Environ(), "KUBEADMCFG_BACKUP_DIR="+filepath.Join(b.in.Dir, "backups"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		return took, fmt.Errorf("%s: %w:\n%s", strings.Join(args, " "), err, out)
	}
	return took, nil
}

// patch changes the kube-apiserver flag to a new value, without a rollout,
// and waits until the agents are done looking at it.
func (b *rolloutBench) patch(ctx context.Context) error {
	b.value++
	if _, err := b.plugin(ctx, "patch", "--set", fmt.Sprintf("apiServer.extraArgs.audit-log-maxbackup=%d", b.value)); err != nil {
		return err
	}
	return b.settle(ctx)
}

// settle waits until every agent published its node's state for the live
// kubeadm-config, and the record has not changed for 2s: nothing runs but
// what is measured next.
func (b *rolloutBench) settle(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cm, err := b.client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
		if err != nil {
			return err
		}
		settled := true
		for _, n := range b.nodes.Nodes {
			l, err := b.client.CoordinationV1().Leases("kube-system").Get(ctx, nodestate.LeaseName(n.Name), metav1.GetOptions{})
			if err != nil {
				settled = false
				break
			}
			_, st, ok, err := nodestate.FromLease(l)
			if err != nil || !ok || st == nil || st.LiveResourceVersion != cm.ResourceVersion {
				settled = false
			}
		}
		b.tl.mu.Lock()
		quiet := time.Since(b.tl.lastVersionAt) > 2*time.Second
		b.tl.mu.Unlock()
		if settled && quiet {
			time.Sleep(time.Second)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agents did not publish their nodes' state for kubeadm-config resourceVersion %s within 2 minutes", cm.ResourceVersion)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// round is one round's figures.
type round struct {
	reconfigure []time.Duration // per node, in order
	rollout     time.Duration
	handoffs    []handoff
}

// handoff is the way from one node turning healthy to the next node's
// start, on the bench's clock.
type handoff struct {
	from, to string
	// healthy: the agent of from logged its node healthy; recorded: the
	// watch saw from's outcome; acting: the agent of to logged that it
	// renders for its turn; started: the watch saw to's start.
	healthy, recorded, acting, started time.Time
}

// reconfigureRound changes the flag, then runs reconfigure on every node in
// turn, as a person would with ssh.
func (b *rolloutBench) reconfigureRound(ctx context.Context) ([]time.Duration, error) {
	if err := b.patch(ctx); err != nil {
		return nil, err
	}
	var took []time.Duration
	for _, n := range b.nodes.Nodes {
		d, err := b.plugin(ctx, append([]string{"reconfigure"}, nodeFlags(b.nodes, n, b.in.Dir)...)...)
		if err != nil {
			return nil, err
		}
		took = append(took, d)
	}
	return took, nil
}

// rolloutRound changes the flag, then carries it to the nodes with a
// rollout, and finds its hand-offs.
func (b *rolloutBench) rolloutRound(ctx context.Context) (time.Duration, []handoff, error) {
	if err := b.patch(ctx); err != nil {
		return 0, nil, err
	}
	since := time.Now()
	took, err := b.plugin(ctx, "rollout", "start", "--wait")
	if err != nil {
		return 0, nil, err
	}
	cm, err := b.client.CoreV1().ConfigMaps("kube-system").Get(ctx, rollout.DefaultConfigMap, metav1.GetOptions{})
	if err != nil {
		return 0, nil, err
	}
	r, err := rollout.FromConfigMap(cm)
	if err != nil {
		return 0, nil, err
	}
	var hs []handoff
	for i := 1; i < len(r.Status.Order); i++ {
		from, to := b.agent(r.Status.Order[i-1]), b.agent(r.Status.Order[i])
		h := handoff{from: from.node, to: to.node}
		var ok1, ok2 bool
		h.healthy, ok1 = from.first("Reconfigure: kube-apiserver: healthy", since)
		h.acting, ok2 = to.first("Reconfigure: rendering the manifests", since)
		_, h.recorded = b.tl.times(r.Status.ID, from.node)
		h.started, _ = b.tl.times(r.Status.ID, to.node)
		if !ok1 || !ok2 || h.recorded.IsZero() || h.started.IsZero() {
			return 0, nil, fmt.Errorf("rollout %d: the hand-off %s -> %s was not seen whole: %+v", r.Status.ID, h.from, h.to, h)
		}
		hs = append(hs, h)
	}
	return took, hs, nil
}

func (b *rolloutBench) agent(node string) *agentProc {
	for _, p := range b.agents {
		if p.node == node {
			return p
		}
	}
	panic("no agent of node " + node)
}

// idleAgent is one agent's figures over the idle period.
type idleAgent struct {
	node       string
	cpu        float64 // percent of a core
	start, end procSample
	elapsed    time.Duration
	scrapes    int // of its metrics, as Prometheus would make them
	scraped    int // bytes of the last scrape
}

// metricsPort is the first agent's metrics port; the others follow, 10
// apart. The agents share the namespace's loopback with the nodes'
// components and kubelets: node I's kubelet answers /healthz on 10248+10I,
// so the agent's default, 10268, is cp-2's kubelet's.
const metricsPort = 10300

// scrapeEvery is how often the idle agents' metrics are read, as a
// Prometheus scraping them every 15s would.
const scrapeEvery = 15 * time.Second

// idle samples every agent, waits d, and samples them again. It also
// returns how many versions of the record the watch saw meanwhile.
func (b *rolloutBench) idle(d time.Duration) ([]idleAgent, int, error) {
	b.tl.mu.Lock()
	before := b.tl.versions
	b.tl.mu.Unlock()
	var out []idleAgent
	for _, p := range b.agents {
		s, err := sampleProc(p.cmd.Process.Pid)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, idleAgent{node: p.node, start: s})
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(min(scrapeEvery, time.Until(end))) {
		for i, p := range b.agents {
			n, err := scrape(client, p.metrics)
			if err != nil {
				return nil, 0, fmt.Errorf("scrape the agent of %s: %w", p.node, err)
			}
			out[i].scrapes, out[i].scraped = out[i].scrapes+1, n
		}
	}
	b.tl.mu.Lock()
	after := b.tl.versions
	b.tl.mu.Unlock()
	for i, p := range b.agents {
		s, err := sampleProc(p.cmd.Process.Pid)
		if err != nil {
			return nil, 0, err
		}
		a := &out[i]
		a.end, a.elapsed = s, s.at.Sub(a.start.at)
		a.cpu = 100 * float64(s.cpu-a.start.cpu) / float64(a.elapsed)
	}
	return out, after - before, nil
}

// agentWatches is the watches the agents hold, by resource: those the API
// servers serve with the agents running, less those they serve once the
// agents stopped.
func (b *rolloutBench) agentWatches(ctx context.Context) (map[string]int, error) {
	with, err := watchCounts(ctx, b.nodes)
	if err != nil {
		return nil, err
	}
	b.stopAgents()
	time.Sleep(3 * time.Second)
	without, err := watchCounts(ctx, b.nodes)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	// Other clients' watches come and go between the two counts; a
	// stopped agent cannot have added any, so a fall is theirs.
	for r, n := range with {
		if d := n - without[r]; d > 0 {
			out[r] = d
		}
	}
	return out, nil
}

func (b *rolloutBench) stopAgents() {
	for _, p := range b.agents {
		p.stop()
	}
	b.agents = nil
}

// scrape reads an agent's /metrics once and returns its size.
func scrape(client *http.Client, addr string) (int, error) {
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return len(body), err
}

func median(xs []time.Duration) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
