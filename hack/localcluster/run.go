package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// The run verb, outside the namespace: it checks the command line and the
// directory, finds (or builds) the binaries while the network is still there,
// and starts itself again as the first process of new user, network, PID and
// mount namespaces, where the cluster and CMD run (namespace.go). It passes
// signals on to that process and exits as it does.

// Exit codes of run besides CMD's own.
const (
	exitUsage     = 2   // bad command line or --dir
	exitNoCluster = 125 // the cluster did not start (as docker run)
	exitCannotRun = 126 // CMD could not be started
	exitNotFound  = 127 // CMD was not found
)

const runUsage = "localcluster run [--nodes N] [--etcd stacked|external] [--kubernetes-version V] [--dir DIR] -- CMD [ARGS...]"

// runHelp is what run --help prints: the package comment tells the rest.
const runHelp = `usage: ` + runUsage + `

Starts N kubeadm control-plane nodes cp-0..cp-(N-1) behind a load balancer on
192.0.2.10:8443, in namespaces of their own, runs CMD there, stops everything
when CMD ends, and exits with CMD's exit code (128+S if signal S killed it).
A SIGINT, SIGTERM or SIGHUP to run is passed on to CMD's job, which is killed
if CMD still runs 10s later. No process outlives run.

Flags:
  --nodes N   number of control-plane nodes, 1 to 3 (default 3)
  --etcd E    stacked: every node runs an etcd member from kubeadm's manifest,
              the first as kubeadm init starts it, the others as kubeadm join
              adds them (kubeadm's default); external: one etcd of run's own,
              in DIR/etcd (default stacked)
  --kubernetes-version V
              the control plane's version, a release make testbin built: the
              current one (the default, v1.37.2) or the one before (v1.36.3),
              which an upgrade starts from; that release's kubeadm sets the
              nodes up, and its binaries run
  --dir DIR   the cluster's files and logs, kept after run ends; new, empty, or
              an earlier run's, which run empties (default _output/localcluster)

CMD's variables, I from 0 to N-1:
  KUBECONFIG                  a system:masters kubeconfig through the load balancer
  KUBEADM                     the kubeadm binary the nodes were rendered with
  LOCALCLUSTER_NODES          the node names, space-separated: cp-0 cp-1 cp-2
  LOCALCLUSTER_ETCD           stacked or external, as --etcd
  LOCALCLUSTER_<I>_DIR        node I's root: its /etc/kubernetes is DIR/etc/kubernetes
  LOCALCLUSTER_<I>_MANIFESTS  node I's static Pod manifests directory
  LOCALCLUSTER_<I>_PATCHES    node I's kubeadm patches (--patches), if it has any
  LOCALCLUSTER_<I>_ADDRESS    node I's advertise address, 192.0.2.(11+I)
  LOCALCLUSTER_<I>_BIND_PORT  node I's API server port, 6443+I
  LOCALCLUSTER_<I>_ETCD_ENDPOINT  node I's etcd member, https://192.0.2.(11+I):2379
                              (stacked only; its client certificate is
                              DIR/etc/kubernetes/pki/etcd/healthcheck-client.crt)
  LOCALCLUSTER_KUBERNETES_VERSION  the control plane's version as it started
  LOCALCLUSTER_<I>_KUBEADM_TEMPLATE  node I's kubeadm of each version ({version}
                              replaced by it: DIR/usr/local/kubernetes/{version}/bin/kubeadm),
                              for the agent's --kubeadm-template: runs that
                              release's kubeadm with --rootfs DIR, so it upgrades
                              node I; a path under DIR in its arguments is passed
                              as the same path inside the root
  LOCALCLUSTER_<I>_KUBELET_RESTART  node I's kubelet restart command: installs kubelet
                              $KUBEADMCFG_KUBELET_VERSION and restarts it; node I
                              then reports that version, and serves /healthz again
  LOCALCLUSTER_<I>_KUBELET_HEALTHZ  node I's kubelet /healthz, http://127.0.0.1:(10248+10I)/healthz,
                              as DIR/var/lib/kubelet/config.yaml says
  LOCALCLUSTER_<I>_FAULTS     node I's fault files: while FAULTS/kubelet-config exists,
                              node I's 'kubeadm upgrade apply|node phase kubelet-config'
                              fails after it wrote the new config.yaml (a whole
                              upgrade is refused); while FAULTS/kubelet-restart
                              exists, the kubelet restart command exits 1; the
                              file's content is the error
  LOCALCLUSTER_<I>_METRICS_ADDRESS  127.0.0.1:(10300+10I), for node I's agent's
                              --metrics-bind-address: the nodes share one loopback,
                              where the agent's default, 10268, is cp-2's kubelet's
  LOCALCLUSTER_<I>_TMPDIR     node I's /tmp, DIR/tmp: node I's agent's TMPDIR, as
                              the kubeadm of its --kubeadm-template runs in the root
  LOCALCLUSTER_<I>_KUBELET_CONFIG  DIR/var/lib/kubelet/config.yaml, for the agent's
                              --kubelet-config
  LOCALCLUSTER_IGNORE_PREFLIGHT_ERRORS  SystemVerification, for the agent's
                              --ignore-preflight-errors: a node's root has no /proc
                              or /sys for kubeadm's check of the kernel and cgroups

docs/development.md ("Running an agent on it") has the command line that runs
node I's agent with them, for rollouts and upgrades.

Exit codes besides CMD's: 2 bad command line or --dir, 125 the cluster did not
start (DIR/localcluster.log says why), 126 CMD cannot be started, 127 CMD not
found.
`

// innerEnv carries the run's settings to the process in the namespace, and
// tells it that it is that process.
const innerEnv = "LOCALCLUSTER_INTERNAL_RUN"

// logName is run's log in DIR; its presence also marks DIR as one a run may
// empty.
const logName = "localcluster.log"

// runOptions is a parsed run command line.
type runOptions struct {
	nodes   int
	etcd    testcluster.EtcdMode
	version string // "" until the binaries are found: the current release
	dir     string // absolute
	command []string
}

// inner is what the process in the namespace needs besides the command line.
type inner struct {
	Bins testcluster.Binaries
	// Foreground: CMD gets the terminal (it is the foreground job's).
	Foreground bool
}

// usageError is a command line run refuses, exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func parseRun(args []string) (runOptions, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // one line of our own instead of the flag package's
	nodes := fs.Int("nodes", testcluster.MaxLocalNodes, "number of control-plane nodes")
	etcd := fs.String("etcd", string(testcluster.EtcdStacked), "where etcd runs: stacked or external")
	version := fs.String("kubernetes-version", "", "the control plane's version (the current release when empty)")
	dir := fs.String("dir", filepath.Join("_output", "localcluster"), "directory for the cluster's files and logs")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return runOptions{}, err
		}
		return runOptions{}, usagef("%v", err)
	}
	if *nodes < 1 || *nodes > testcluster.MaxLocalNodes {
		return runOptions{}, usagef("--nodes must be between 1 and %d, not %d", testcluster.MaxLocalNodes, *nodes)
	}
	if mode := testcluster.EtcdMode(*etcd); mode != testcluster.EtcdStacked && mode != testcluster.EtcdExternal {
		return runOptions{}, usagef("--etcd must be %s or %s, not %q", testcluster.EtcdStacked, testcluster.EtcdExternal, *etcd)
	}
	if fs.NArg() == 0 {
		return runOptions{}, usagef("give the command to run after --")
	}
	if *dir == "" {
		return runOptions{}, usagef("--dir must not be empty")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return runOptions{}, err
	}
	return runOptions{nodes: *nodes, etcd: testcluster.EtcdMode(*etcd), version: *version, dir: abs, command: fs.Args()}, nil
}

// run is the run verb; it returns the exit code.
func run(args []string) int {
	if spec := os.Getenv(innerEnv); spec != "" {
		return runInNamespace(args, spec)
	}
	o, err := parseRun(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Print(runHelp)
		return 0
	}
	// The binaries first: --kubernetes-version must name a release they
	// hold, and a bad command line writes nothing, DIR included.
	var bins testcluster.Binaries
	if err == nil {
		if bins, err = testcluster.FindBinaries(); err != nil {
			fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
			return exitNoCluster
		}
		err = checkVersion(o.version, bins)
	}
	if err == nil {
		err = prepareDir(o.dir)
	}
	var usage *usageError
	if errors.As(err, &usage) {
		fmt.Fprintf(os.Stderr, "localcluster: %v (usage: %s)\n", err, runUsage)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		return exitNoCluster
	}
	// While the lock is held no other run empties or uses DIR.
	lock, err := lockDir(o.dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v (usage: %s)\n", err, runUsage)
		return exitUsage
	}
	defer lock.Close()
	if err := emptyDir(o.dir); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		return exitNoCluster
	}
	return startInNamespace(args, inner{Bins: bins, Foreground: foregroundTerminal()})
}

// checkVersion refuses a --kubernetes-version the harness has no binaries
// of.
func checkVersion(version string, bins testcluster.Binaries) error {
	if version == "" {
		return nil
	}
	var have []string
	for _, r := range bins.Releases() {
		if r.Version == version {
			return nil
		}
		have = append(have, r.Version)
	}
	return usagef("--kubernetes-version must be %s, not %q", strings.Join(have, " or "), version)
}

// prepareDir makes sure DIR is new, empty, or an earlier run's (which run
// empties): run never empties a directory it did not fill.
func prepareDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return usagef("--dir %s: %v", dir, err)
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, logName)); err != nil {
		return usagef("--dir %s is not empty and holds no earlier run (no %s): give a new or empty directory", dir, logName)
	}
	return nil
}

// lockDir takes an exclusive lock on DIR for as long as the returned file
// stays open.
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, usagef("--dir %s is in use by another run: give another directory", dir)
	}
	return f, nil
}

// emptyDir removes what an earlier run left in dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// foregroundTerminal reports whether run is the terminal's foreground job:
// then CMD gets the terminal to itself, as a shell gives it to a job, so a
// Ctrl-C reaches CMD alone and an interactive CMD (bash) can read.
func foregroundTerminal() bool {
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return false
	}
	pgrp, err := unix.IoctlGetInt(int(os.Stdin.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// startInNamespace runs this program again as the first process of new user,
// network, PID and mount namespaces (`unshare -rn --pid --fork
// --mount-proc`, with no privilege), passes SIGINT, SIGTERM and SIGHUP on to
// it, and returns its exit code. The PID namespace is what makes sure no
// process outlives run: when its first process exits, the kernel kills every
// other process in it; and that process dies with run (Pdeathsig).
func startInNamespace(args []string, in inner) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		return exitNoCluster
	}
	spec, err := json.Marshal(in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		return exitNoCluster
	}
	cmd := exec.Command(self, append([]string{"run"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), innerEnv+"="+string(spec), testcluster.NetnsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: cannot create the cluster's namespaces (are unprivileged user namespaces allowed?): %v\n", err)
		return exitNoCluster
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				_ = cmd.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	return exitCode(cmd.ProcessState, err)
}

// exitCode is the code a shell would report for a finished process: its own,
// or 128 plus the signal that killed it.
func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		return exitNoCluster
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalNumber is the number of a signal run was sent, for 128+N exit
// codes.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// signalName names a signal as kill does (SIGTERM).
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		return unix.SignalName(s)
	}
	return sig.String()
}
