package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// What the rollout bench observes, all on its own monotonic clock: every
// line an agent logs as it arrives, every version of the rollout record as
// its watch delivers it, the agents' /proc, and the API servers' metrics.

// agentProc is a running agent and the lines it logged, each stamped when
// it arrived.
type agentProc struct {
	node    string
	cmd     *exec.Cmd
	done    chan struct{}
	metrics string // HOST:PORT of its /metrics

	mu    sync.Mutex
	lines []stamped
}

type stamped struct {
	at   time.Time
	text string
}

// nodeFlags are the node flags of node n of nodes, as an agent and
// reconfigure take them; its backups go to dir.
func nodeFlags(nodes *testcluster.Nodes, n *testcluster.Node, dir string) []string {
	return []string{"--node-name", n.Name, "--manifests-dir", n.ManifestsDir, "--patches", n.PatchesDir,
		"--kubeadm", nodes.Bins.Kubeadm, "--backup-dir", filepath.Join(dir, "backups-"+n.Name)}
}

// startAgent runs the plugin's agent of node with its node flags, and env
// added to the bench's environment; what it logs goes to log too.
func startAgent(plugin, kubeconfig string, n *testcluster.Node, flags, env []string, log string) (*agentProc, error) {
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	p := &agentProc{node: n.Name, done: make(chan struct{})}
	p.cmd = exec.Command(plugin, append([]string{"agent", "--kubeconfig", kubeconfig}, flags...)...)
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.done)
		defer f.Close()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			at := time.Now()
			p.mu.Lock()
			p.lines = append(p.lines, stamped{at, sc.Text()})
			p.mu.Unlock()
			fmt.Fprintf(f, "%s %s\n", at.Format("15:04:05.000"), sc.Text())
		}
		_ = p.cmd.Wait()
	}()
	return p, nil
}

// first is when the agent first logged a line holding what, after since.
func (p *agentProc) first(what string, since time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l.at.After(since) && strings.Contains(l.text, what) {
			return l.at, true
		}
	}
	return time.Time{}, false
}

// stop ends the agent as systemd would (SIGTERM) and waits for it.
func (p *agentProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// timeline is when the bench's watch of the record first saw each node of
// each rollout in progress (its BeginNode) and done (its FinishNode).
type timeline struct {
	mu            sync.Mutex
	begun, ended  map[string]time.Time // by rolloutNode
	versions      int
	lastVersionAt time.Time
}

func rolloutNode(id int64, node string) string { return strconv.FormatInt(id, 10) + "/" + node }

// follow watches the record until ctx ends.
func (tl *timeline) follow(ctx context.Context, client kubernetes.Interface) <-chan error {
	tl.begun, tl.ended = map[string]time.Time{}, map[string]time.Time{}
	record := engine.New(client, engine.Target{Namespace: "kube-system", Name: rollout.DefaultConfigMap}, engine.Options{})
	done := make(chan error, 1)
	go func() {
		done <- record.Follow(ctx, func(cm *corev1.ConfigMap) {
			at := time.Now()
			if cm == nil {
				return
			}
			r, err := rollout.FromConfigMap(cm)
			if err != nil || r.Status == nil {
				return
			}
			tl.mu.Lock()
			defer tl.mu.Unlock()
			tl.versions++
			tl.lastVersionAt = at
			for _, n := range r.Status.Nodes {
				key := rolloutNode(r.Status.ID, n.Name)
				if _, ok := tl.begun[key]; !ok && (n.Phase == rollout.NodeInProgress || n.Phase.Done()) {
					tl.begun[key] = at
				}
				if _, ok := tl.ended[key]; !ok && n.Phase.Done() {
					tl.ended[key] = at
				}
			}
		}, nil)
	}()
	return done
}

func (tl *timeline) times(id int64, node string) (begun, ended time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.begun[rolloutNode(id, node)], tl.ended[rolloutNode(id, node)]
}

// procSample is a process's CPU time so far and its memory now.
type procSample struct {
	at        time.Time
	cpu       time.Duration // utime + stime
	rss, hwm  int64         // KiB: VmRSS, VmHWM
	anon      int64         // KiB: RssAnon
	file      int64         // KiB: RssFile
	shmem     int64         // KiB: RssShmem
	threads   int64
	majFaults int64
}

// userHZ is the unit of /proc/PID/stat's times: USER_HZ, 100 on every
// Linux architecture the plugin is built for.
const userHZ = 100

func sampleProc(pid int) (procSample, error) {
	s := procSample{at: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The fields after the command name (in parentheses, which may hold
	// anything): state is field 3, majflt 12, utime 14, stime 15.
	i := strings.LastIndexByte(string(stat), ')')
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	field := func(n int) int64 { v, _ := strconv.ParseInt(fields[n-3], 10, 64); return v }
	s.majFaults = field(12)
	s.cpu = time.Duration(field(14)+field(15)) * time.Second / userHZ
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			s.rss = n
		case "VmHWM":
			s.hwm = n
		case "RssAnon":
			s.anon = n
		case "RssFile":
			s.file = n
		case "RssShmem":
			s.shmem = n
		case "Threads":
			s.threads = n
		}
	}
	return s, nil
}

// watchCounts sums, over every node's API server, the watches being served
// (kube-apiserver's apiserver_longrunning_requests, verb WATCH), by
// resource.
func watchCounts(ctx context.Context, nodes *testcluster.Nodes) (map[string]int, error) {
	base, err := clientcmd.BuildConfigFromFlags("", nodes.Kubeconfig)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, n := range nodes.Nodes {
		cfg := rest.CopyConfig(base)
		cfg.Host = fmt.Sprintf("https://%s:%d", n.Address, n.BindPort)
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %w", n.Name, err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			rest, ok := strings.CutPrefix(line, "apiserver_longrunning_requests{")
			if !ok || !strings.Contains(rest, `verb="WATCH"`) {
				continue
			}
			labels, value, _ := strings.Cut(rest, "} ")
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil || v == 0 {
				continue
			}
			out[label(labels, "resource")] += int(v)
		}
	}
	return out, nil
}

// label is one label's value in a Prometheus label set.
func label(labels, name string) string {
	for _, kv := range strings.Split(labels, ",") {
		if v, ok := strings.CutPrefix(kv, name+`="`); ok {
			return strings.TrimSuffix(v, `"`)
		}
	}
	return ""
}

// logTo is a progress log in file, a line each.
func logTo(file string) (func(format string, args ...any), func(), error) {
	f, err := os.Create(filepath.Clean(file))
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(f, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}, func() { _ = f.Close() }, nil
}
