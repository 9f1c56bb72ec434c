package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// The run verb inside its namespaces, as their first process: it starts the
// cluster, runs CMD with the cluster's variables, passes signals on to CMD,
// and once CMD has exited stops what CMD left behind, then the cluster.
// Whatever still runs when it returns, the kernel kills.

// cmdGrace is how long CMD has to exit after run passed it a signal, before
// run kills it.
const cmdGrace = 10 * time.Second

// leftoverGrace is how long the processes CMD left behind have to exit after
// SIGTERM.
const leftoverGrace = 2 * time.Second

// runInNamespace is run in the namespace; it returns the exit code.
func runInNamespace(args []string, spec string) int {
	var in inner
	if err := json.Unmarshal([]byte(spec), &in); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %s: %v\n", innerEnv, err)
		return exitNoCluster
	}
	o, err := parseRun(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		return exitUsage
	}
	if err := mountProc(); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		return exitNoCluster
	}
	l, err := openLog(filepath.Join(o.dir, logName))
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		return exitNoCluster
	}
	defer l.close()
	// client-go logs (klog) to os.Stderr: into the log with it, and CMD
	// alone writes to run's stderr.
	os.Stderr = l.f
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)

	nodes, code := startCluster(o, in, l, sigs)
	if nodes == nil {
		return code
	}
	code = runCommand(o, in, nodes, l, sigs)
	start := time.Now()
	stopLeftovers(l)
	nodes.Stop()
	l.say("stopped in %s", time.Since(start).Round(100*time.Millisecond))
	return code
}

// mountProc gives the namespace a /proc of its own PID namespace, so that
// CMD's ps, pgrep and kill see the namespace's process IDs.
func mountProc() error {
	if os.Getpid() != 1 {
		return errors.New("run in the namespace must be its first process")
	}
	if err := syscall.Mount("none", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the namespace's mounts private: %w", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount the namespace's /proc: %w", err)
	}
	return nil
}

// startCluster starts the nodes. A signal stops the start; then, or when the
// start fails, it returns nil and run's exit code.
func startCluster(o runOptions, in inner, l *runLog, sigs <-chan os.Signal) (*testcluster.Nodes, int) {
	if o.version == "" {
		o.version = in.Bins.Version
	}
	l.say("starting %d control-plane node(s) of Kubernetes %s with %s etcd in %s; details in %s", o.nodes, o.version, o.etcd, o.dir, filepath.Join(o.dir, logName))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type started struct {
		nodes *testcluster.Nodes
		err   error
	}
	result := make(chan started, 1)
	begin := time.Now()
	go func() {
		n, err := testcluster.StartLocal(ctx, in.Bins, testcluster.LocalOptions{Nodes: o.nodes, Etcd: o.etcd,
			KubernetesVersion: o.version, Dir: o.dir, Log: l.logf})
		result <- started{n, err}
	}()
	var caught os.Signal
	for {
		select {
		case sig := <-sigs:
			if caught == nil {
				caught = sig
				l.say("%s: stopping the start", signalName(sig))
				cancel()
			}
		case r := <-result:
			if caught != nil {
				if r.nodes != nil {
					r.nodes.Stop()
				}
				return nil, 128 + signalNumber(caught)
			}
			if r.err != nil {
				l.logf("start failed: %v", r.err)
				first, _, _ := strings.Cut(r.err.Error(), "\n")
				l.say("the cluster did not start: %s (see %s)", first, filepath.Join(o.dir, logName))
				return nil, exitNoCluster
			}
			l.say("%s up in %s behind %s", strings.Join(nodeNames(r.nodes), " "),
				time.Since(begin).Round(100*time.Millisecond), testcluster.LocalEndpoint)
			return r.nodes, 0
		}
	}
}

// runCommand runs CMD with the cluster's variables and returns its exit code.
// It passes a signal run receives on to CMD's process group, and kills the
// group if CMD still runs cmdGrace later.
func runCommand(o runOptions, in inner, nodes *testcluster.Nodes, l *runLog, sigs <-chan os.Signal) int {
	name := filepath.Base(o.command[0])
	cmd := exec.Command(o.command[0], o.command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, l.stderr
	cmd.Env = commandEnv(os.Environ(), nodes)
	// CMD's job is a process group of its own, which a signal to run
	// reaches as a terminal's Ctrl-C reaches a job: a shell waiting for its
	// child would not act on a SIGINT sent to itself alone. In a terminal
	// it is the foreground job.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Foreground: in.Foreground, Ctty: 0}
	if err := cmd.Start(); err != nil {
		l.say("cannot run %s: %v; stopping the cluster", o.command[0], err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotRun
	}
	l.logf("running %q (pid %d in the namespace)", o.command, cmd.Process.Pid)
	exited := make(chan struct{})
	var err error
	go func() { err = cmd.Wait(); close(exited) }()
	// A Ctrl-Z stops the foreground job, CMD, which the shell that started
	// run knows nothing of: it would wait for run with the terminal held by
	// a stopped job. CMD is continued instead. (An interactive shell as CMD
	// never stops itself; its own jobs are its business.)
	var children chan os.Signal
	if in.Foreground {
		children = make(chan os.Signal, 1)
		signal.Notify(children, syscall.SIGCHLD)
		defer signal.Stop(children)
	}
	var kill <-chan time.Time
	for {
		select {
		case <-children:
			if processState(cmd.Process.Pid) == 'T' {
				l.say("%s was stopped (Ctrl-Z?): continued, as run cannot be suspended", name)
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
			}
		case sig := <-sigs:
			l.say("%s passed on to %s", signalName(sig), name)
			if s, ok := sig.(syscall.Signal); ok {
				_ = syscall.Kill(-cmd.Process.Pid, s)
			}
			if kill == nil {
				kill = time.After(cmdGrace)
			}
		case <-kill:
			l.say("%s still runs %s after the signal: killing it", name, cmdGrace)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-exited:
			code := exitCode(cmd.ProcessState, err)
			l.say("%s exited with code %d; stopping the cluster", name, code)
			return code
		}
	}
}

// commandEnv is CMD's environment: run's own, without the variables of run
// itself or of an enclosing run, with the cluster's.
func commandEnv(environ []string, nodes *testcluster.Nodes) []string {
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "LOCALCLUSTER_") || k == testcluster.NetnsEnv || k == "KUBECONFIG" || k == "KUBEADM" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "KUBECONFIG="+nodes.Kubeconfig, "KUBEADM="+nodes.Release.Kubeadm,
		"LOCALCLUSTER_NODES="+strings.Join(nodeNames(nodes), " "), "LOCALCLUSTER_ETCD="+string(nodes.Etcd),
		"LOCALCLUSTER_KUBERNETES_VERSION="+nodes.Release.Version,
		"LOCALCLUSTER_IGNORE_PREFLIGHT_ERRORS="+testcluster.IgnorePreflightErrors)
	for i, n := range nodes.Nodes {
		p := "LOCALCLUSTER_" + strconv.Itoa(i) + "_"
		env = append(env, p+"DIR="+n.Root, p+"MANIFESTS="+n.ManifestsDir, p+"ADDRESS="+n.Address,
			p+"BIND_PORT="+strconv.Itoa(int(n.BindPort)), p+"KUBEADM_TEMPLATE="+n.KubeadmTemplate,
			p+"KUBELET_RESTART="+n.KubeletRestart, p+"KUBELET_HEALTHZ="+n.KubeletHealthz, p+"FAULTS="+n.FaultsDir,
			p+"METRICS_ADDRESS="+n.AgentMetricsAddress, p+"TMPDIR="+n.TmpDir, p+"KUBELET_CONFIG="+n.KubeletConfig)
		if n.PatchesDir != "" {
			env = append(env, p+"PATCHES="+n.PatchesDir)
		}
		if n.Etcd != nil {
			env = append(env, p+"ETCD_ENDPOINT="+n.Etcd.ClientURL)
		}
	}
	return env
}

func nodeNames(nodes *testcluster.Nodes) []string {
	names := make([]string, len(nodes.Nodes))
	for i, n := range nodes.Nodes {
		names[i] = n.Name
	}
	return names
}

// stopLeftovers stops the processes CMD left behind, those that carry its
// environment, before the cluster stops under them: SIGTERM, and SIGKILL
// after leftoverGrace. (The kernel would kill them when run exits, but
// without a chance to finish, and after they had watched the cluster go.)
func stopLeftovers(l *runLog) {
	left := leftovers()
	if len(left) == 0 {
		return
	}
	var names []string
	for _, pid := range left {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		names = append(names, strings.TrimSpace(string(comm)))
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	l.say("stopping %d process(es) the command left behind: %s", len(left), strings.Join(names, ", "))
	deadline := time.Now().Add(leftoverGrace)
	for len(leftovers()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range leftovers() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// leftovers are the live processes of the namespace that carry CMD's
// environment (LOCALCLUSTER_NODES): CMD's descendants, which the cluster's
// processes never are.
func leftovers() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 {
			continue
		}
		// A zombie only its parent, or run's exit, can clear.
		if state := processState(pid); state == 0 || state == 'Z' {
			continue
		}
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && strings.Contains("\x00"+string(environ), "\x00LOCALCLUSTER_NODES=") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// runLog is run's log file, with a line to stderr for what a person watching
// needs to know.
type runLog struct {
	mu     sync.Mutex
	f      *os.File
	stderr *os.File // run's own
}

func openLog(path string) (*runLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &runLog{f: f, stderr: os.Stderr}, nil
}

// logf writes a line to the log file only.
func (l *runLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.f, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// say writes a line to stderr and to the log file.
func (l *runLog) say(format string, args ...any) {
	l.logf(format, args...)
	fmt.Fprintf(l.stderr, "localcluster: %s\n", fmt.Sprintf(format, args...))
}

func (l *runLog) close() { _ = l.f.Close() }

// processState is a process's state as /proc/PID/stat gives it (R, S, T, Z,
// ...), 0 when the process is gone.
func processState(pid int) byte {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The state follows the command name, in parentheses, which may hold
	// anything.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}
