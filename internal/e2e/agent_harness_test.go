package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// The agents' control plane: three local nodes (testcluster.StartLocal), an
// agent on each as a plain process with the node flags, and the rollout
// record written by the test through the model, as the client that starts
// a rollout would write it and then go away.

// agentHeartbeat is the agents' --heartbeat-interval in the tests: they
// are taken for lost after three missed renewals.
const agentHeartbeat = 2 * time.Second

type agentCluster struct {
	*controlPlane
	top    *testing.T // agents stop when the whole test ends
	client kubernetes.Interface
	record *engine.Engine
	agents map[string]*agentProcess

	mu   sync.Mutex
	seen []*rollout.Status // every status the record was seen with, in order
}

func startAgentCluster(t *testing.T) *agentCluster {
	t.Helper()
	c := startAgentNodes(t)
	// The agents run with the rights deploy/rbac.yaml gives the DaemonSet's
	// ServiceAccount, and no more.
	wantExit(t, runLong(t, time.Minute, "kubectl", "apply", "-f", "../../deploy/rbac.yaml", "--kubeconfig", c.Kubeconfig), 0)
	for _, name := range c.names() {
		c.startAgent(t, name)
	}
	return c
}

// startAgentNodes starts the three nodes and follows the record, with no
// agent yet and no rights given.
func startAgentNodes(t *testing.T) *agentCluster {
	t.Helper()
	return startAgentNodesWith(t, testcluster.LocalOptions{Nodes: 3})
}

// startAgentNodesWith is startAgentNodes with other nodes (a stacked etcd,
// another release).
func startAgentNodesWith(t *testing.T, opts testcluster.LocalOptions) *agentCluster {
	t.Helper()
	bins, err := testcluster.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	dir := keptDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	opts.Dir, opts.Log = filepath.Join(dir, "cluster"), t.Logf
	nodes, err := testcluster.StartLocal(ctx, bins, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nodes.Stop)
	t.Logf("three control-plane nodes up in %s", time.Since(start).Round(time.Second))
	cp := &controlPlane{Nodes: nodes, dir: dir, nodes: map[string]*testNode{}}
	for _, n := range nodes.Nodes {
		cp.nodes[n.Name] = &testNode{Node: n, cp: cp, backups: filepath.Join(dir, "backups-"+n.Name)}
	}
	client, err := nodes.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	c := &agentCluster{controlPlane: cp, top: t, client: client, agents: map[string]*agentProcess{},
		record: engine.New(client, engine.Target{Namespace: "kube-system", Name: rollout.DefaultConfigMap}, engine.Options{CreateIfMissing: true})}
	// Every version of the record, from before the first rollout on.
	fctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.record.Follow(fctx, func(cm *corev1.ConfigMap) {
			if cm == nil {
				return
			}
			if r, err := rollout.FromConfigMap(cm); err == nil && r.Status != nil {
				c.mu.Lock()
				c.seen = append(c.seen, r.Status)
				c.mu.Unlock()
			}
		}, nil)
	}()
	t.Cleanup(func() { stop(); <-done })
	return c
}

// agentIdentity is whom the agents act as: the DaemonSet's ServiceAccount.
const agentIdentity = "system:serviceaccount:kube-system:kubeadmcfg-agent"

func (c *agentCluster) names() []string {
	var names []string
	for _, n := range c.Nodes.Nodes {
		names = append(names, n.Name)
	}
	return names
}

// agentProcess is a running agent and what it logged so far.
type agentProcess struct {
	cmd  *exec.Cmd
	log  syncBuffer
	done chan struct{}
}

func (p *agentProcess) stderrString() string { return p.log.String() }

// syncBuffer is a buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startAgent runs `kubectl kubeadmcfg agent` "on" node name.
func (c *agentCluster) startAgent(t *testing.T, name string) *agentProcess {
	t.Helper()
	n := c.node(t, name)
	args := append([]string{"kubeadmcfg", "agent", "--heartbeat-interval", agentHeartbeat.String(), "--wait", "90s",
		"--stop-grace", "20s", "--kubeconfig", c.Kubeconfig, "--as", agentIdentity, "--metrics-bind-address", metricsAddr(name)}, n.flags()...)
	return c.runAgent(t, name, exec.Command("kubectl", args...))
}

// metricsAddr is where node name's agent serves its metrics in a test: the
// nodes of a local control plane share their namespace's loopback, so each
// agent has a port of its own, cp-N's as `localcluster run` gives it
// (testcluster.LocalAgentMetricsAddress: cp-2's kubelet has the agent's
// default, 10268).
func metricsAddr(name string) string {
	n, err := strconv.Atoi(strings.TrimPrefix(name, "cp-"))
	if err != nil || !strings.HasPrefix(name, "cp-") {
		panic("a local control-plane node is named cp-N, not " + name)
	}
	return testcluster.LocalAgentMetricsAddress(n)
}

// runAgent starts cmd, an agent of node name, and keeps it until the
// whole test ends.
func (c *agentCluster) runAgent(t *testing.T, name string, cmd *exec.Cmd) *agentProcess {
	t.Helper()
	p := &agentProcess{cmd: cmd, done: make(chan struct{})}
	p.cmd.Stderr = &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	c.agents[name] = p
	c.top.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if c.top.Failed() {
			c.top.Logf("agent of %s (pid %d) logged:\n%s", name, p.cmd.Process.Pid, p.log.String())
		}
	})
	return p
}

// kill ends node name's agent with sig and waits for it: its exit code
// (-1 when the signal killed it) and what it logged.
func (c *agentCluster) kill(t *testing.T, name string, sig syscall.Signal) result {
	t.Helper()
	p := c.agents[name]
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the agent of %s did not end 3 minutes after %s", name, sig)
	}
	return result{stderr: p.log.String(), code: p.cmd.ProcessState.ExitCode()}
}

// start starts a rollout of the live document over every node, as
// `rollout start` would write it (with what kubeadm-config says its
// document replaced), and returns its id.
func (c *agentCluster) start(t *testing.T, try time.Duration) int64 {
	t.Helper()
	ctx := context.Background()
	cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	replaced, _ := engine.Replaced(cm, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey})
	_, err = c.record.Update(ctx, func(rec *corev1.ConfigMap) (bool, error) {
		r, changed, err := rollout.Apply(rec, func(r *rollout.Record) (bool, error) {
			return true, r.Start(rollout.Clock{Now: time.Now(), By: "e2e"}, rollout.Spec{
				Target: []byte(cm.Data["ClusterConfiguration"]), TargetResourceVersion: cm.ResourceVersion, Replaced: replaced,
				Nodes: c.names(), Try: try})
		})
		if err == nil {
			id = r.Status.ID
		}
		return changed, err
	})
	if err != nil {
		t.Fatalf("start a rollout: %v", err)
	}
	return id
}

// current reads the record.
func (c *agentCluster) current(t *testing.T) *rollout.Record {
	t.Helper()
	cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), rollout.DefaultConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rollout.FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitRecord waits until the record satisfies done, for at most timeout.
func (c *agentCluster) waitRecord(t *testing.T, timeout time.Duration, what string, done func(r *rollout.Record) bool) *rollout.Record {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r := c.current(t)
		if done(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record is not %s after %s: %+v", what, timeout, r.Status)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitEnded waits until rollout id (or whatever replaced it) ended.
func (c *agentCluster) waitEnded(t *testing.T, timeout time.Duration) *rollout.Status {
	t.Helper()
	return c.waitRecord(t, timeout, "ended", func(r *rollout.Record) bool { return !r.Status.Phase.Active() }).Status
}

// wantOneAtATime checks every status seen so far: never two nodes in
// progress at once.
func (c *agentCluster) wantOneAtATime(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) == 0 {
		t.Fatal("no status of the record was seen")
	}
	for _, s := range c.seen {
		var in []string
		for _, n := range s.Nodes {
			if n.Phase == rollout.NodeInProgress {
				in = append(in, n.Name)
			}
		}
		if len(in) > 1 {
			t.Errorf("rollout %d had %s in progress at once", s.ID, strings.Join(in, ", "))
		}
	}
}

// sawInProgress lists the nodes the watch saw in progress in rollout id.
func (c *agentCluster) sawInProgress(id int64) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, s := range c.seen {
		for _, n := range s.Nodes {
			if s.ID == id && n.Phase == rollout.NodeInProgress && !slices.Contains(names, n.Name) {
				names = append(names, n.Name)
			}
		}
	}
	return names
}

// nodeStarted counts the NodeStarted Events on the record per node, for
// rollout id.
func (c *agentCluster) nodeStarted(t *testing.T, id int64) map[string]int {
	t.Helper()
	list, err := c.client.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + rollout.DefaultConfigMap + ",reason=NodeStarted"})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, ev := range list.Items {
		var node, kind string
		var got int64
		if _, err := fmt.Sscanf(ev.Message, "node %s started its turn in %s %d", &node, &kind, &got); err == nil && got == id {
			counts[node]++
		}
	}
	return counts
}

// nodeState reads the state node name's agent publishes.
func (c *agentCluster) nodeState(t *testing.T, name string) (*nodestate.State, bool) {
	t.Helper()
	l, err := c.client.CoordinationV1().Leases("kube-system").Get(context.Background(), nodestate.LeaseName(name), metav1.GetOptions{})
	if err != nil {
		return nil, false
	}
	node, st, ok, err := nodestate.FromLease(l)
	if err != nil || !ok || node != name || st == nil {
		return nil, false
	}
	return st, nodestate.Alive(l, time.Now(), 3*agentHeartbeat)
}

// waitStates waits until every node's published state satisfies ok.
func (c *agentCluster) waitStates(t *testing.T, what string, ok func(st *nodestate.State) bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for _, name := range c.names() {
		for {
			st, alive := c.nodeState(t, name)
			if st != nil && alive && ok(st) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s does not publish %s: %+v (alive %v)", name, what, st, alive)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
}

// patch changes kubeadm-config with the plugin, without a rollout.
func (c *agentCluster) patch(t *testing.T, args ...string) {
	t.Helper()
	full := append(append([]string{"kubeadmcfg", "patch", "--backup-dir", filepath.Join(c.dir, "backups-patch")}, args...),
		"--kubeconfig", c.Kubeconfig)
	wantExit(t, runLong(t, time.Minute, "kubectl", full...), 0)
}

// allManifests reads every node's manifests directory.
func (c *agentCluster) allManifests(t *testing.T) map[string]map[string][]byte {
	t.Helper()
	out := map[string]map[string][]byte{}
	for _, name := range c.names() {
		out[name] = readManifests(t, c.node(t, name))
	}
	return out
}

// apiServers lists the command lines of the running kube-apiserver
// processes of this test's nodes, as pgrep shows them.
func (c *agentCluster) apiServers(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("pgrep", "-a", "-f", "kube-apiserver .*"+regexp.QuoteMeta(c.dir+"/")).Output()
	if err != nil {
		t.Fatalf("pgrep: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// waitLog waits until node name's agent logged a line holding want.
func (c *agentCluster) waitLog(t *testing.T, name, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(c.agents[name].stderrString(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent of %s did not log %q:\n%s", name, want, c.agents[name].stderrString())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// updates counts the new manifests every component picked up.
func (c *agentCluster) updates() map[string]int {
	out := map[string]int{}
	for _, n := range c.Nodes.Nodes {
		for _, comp := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			out[n.Name+"/"+comp] = n.Runner.Stats(comp).Updates
		}
	}
	return out
}

// putDocument writes doc into kubeadm-config, as an administrator would.
func (c *agentCluster) putDocument(t *testing.T, doc string) {
	t.Helper()
	ctx := context.Background()
	cms := c.client.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["ClusterConfiguration"] = doc
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
