// Command localcluster runs local control planes for the demo, the
// benchmarks, the tests and anyone who wants to try the plugin on one.
//
// run starts an HA kubeadm control plane of N nodes (1 to 3, default 3) in
// network, user, PID and mount namespaces of its own, runs CMD in there, and
// stops everything when CMD ends:
//
//	go build -o _output/bin/localcluster ./hack/localcluster
//	_output/bin/localcluster run --nodes 3 --dir _output/localcluster -- bash
//
// Each node cp-0..cp-(N-1) runs kubeadm's own kube-apiserver,
// kube-controller-manager and kube-scheduler manifests with the static Pod
// runner of internal/testcluster (StartLocal), which maps the node's
// /etc/kubernetes, and what its components write, under its directory
// DIR/cp-I; node I advertises 192.0.2.(11+I) and serves its API on port
// 6443+I. A load balancer on the controlPlaneEndpoint 192.0.2.10:8443
// forwards to the API servers.
//
// With --etcd stacked (the default, as kubeadm builds a control plane)
// every node also runs an etcd member from kubeadm's own manifest
// (etcd.local, data in DIR/cp-I/var/lib/etcd), with the real etcd binary
// and kubeadm's etcd certificates: cp-0's as `kubeadm init phase etcd
// local` renders it, the others as `kubeadm join --control-plane` adds
// them (a learner, its manifest naming the members with
// --initial-cluster-state=existing, then promoted), and each API server
// uses its own node's member. The member's peer and client URLs are on
// its node's address (ports 2380 and 2379); its loopback client URL, which
// its API server uses, and its metrics, which its probes ask, are on ports
// 2379+10I and 2381+10I, moved by node I's kubeadm patches, as its
// controller-manager's and scheduler's are. With --etcd external one etcd
// of run's own serves every node (one member, DIR/etcd).
//
// The addresses exist only
// inside the namespace; nothing in there reaches outside, and nothing
// outside sees in. DIR (default _output/localcluster) must be new, empty,
// or an earlier run's, which run empties; it keeps the files and logs after
// run ends, DIR/localcluster.log the detail of run's own progress, which goes
// to stderr in a few lines prefixed "localcluster:".
//
// CMD runs in the namespace with run's stdin, stdout and stderr, run's
// environment, and these variables:
//
//	KUBECONFIG               a system:masters kubeconfig through the load balancer
//	KUBEADM                  the kubeadm binary the nodes were rendered with
//	LOCALCLUSTER_NODES       the node names, space-separated: cp-0 cp-1 cp-2
//	LOCALCLUSTER_ETCD        stacked or external, as --etcd
//	LOCALCLUSTER_<I>_DIR     node I's root directory: its /etc/kubernetes is
//	                         $LOCALCLUSTER_<I>_DIR/etc/kubernetes, and its
//	                         components' arguments name paths under it
//	LOCALCLUSTER_<I>_MANIFESTS  node I's static Pod manifests directory
//	LOCALCLUSTER_<I>_PATCHES    node I's kubeadm patches directory, only for a
//	                         node that has patches (nodes 1 and 2: their
//	                         controller-manager, scheduler and etcd ports);
//	                         give it to reconfigure as --patches
//	LOCALCLUSTER_<I>_ADDRESS    node I's advertise address
//	LOCALCLUSTER_<I>_BIND_PORT  node I's API server port
//	LOCALCLUSTER_<I>_ETCD_ENDPOINT  node I's etcd member's client URL, only
//	                         with a stacked etcd; node I's etcd client
//	                         certificate and CA are in
//	                         $LOCALCLUSTER_<I>_DIR/etc/kubernetes/pki/etcd
//	                         (healthcheck-client.crt, .key, ca.crt)
//	LOCALCLUSTER_KUBERNETES_VERSION  the control plane's version as it
//	                         started (--kubernetes-version)
//	LOCALCLUSTER_<I>_KUBEADM_TEMPLATE  node I's kubeadm of each release the
//	                         harness built, {version} standing for the
//	                         version (v1.37.2):
//	                         $LOCALCLUSTER_<I>_DIR/usr/local/kubernetes/{version}/bin/kubeadm,
//	                         where a package would install it on a real
//	                         node; give it to the agent as --kubeadm-template.
//	                         It runs that kubeadm with --rootfs
//	                         $LOCALCLUSTER_<I>_DIR, so that `kubeadm upgrade`
//	                         upgrades node I; an argument naming a path under
//	                         $LOCALCLUSTER_<I>_DIR is passed as the same path
//	                         inside it
//	LOCALCLUSTER_<I>_KUBELET_RESTART  node I's kubelet restart command: it
//	                         installs kubelet $KUBEADMCFG_KUBELET_VERSION (a
//	                         release the harness built) and restarts it, and
//	                         returns once it restarted; node I then reports
//	                         that version (status.nodeInfo.kubeletVersion)
//	                         and serves /healthz as its config.yaml says
//	LOCALCLUSTER_<I>_KUBELET_HEALTHZ  node I's kubelet /healthz,
//	                         http://127.0.0.1:(10248+10I)/healthz, as
//	                         $LOCALCLUSTER_<I>_DIR/var/lib/kubelet/config.yaml
//	                         says (healthzBindAddress, healthzPort)
//	LOCALCLUSTER_<I>_FAULTS  node I's fault files, which a test creates and
//	                         removes: while kubelet-config exists there, node
//	                         I's `kubeadm upgrade apply|node phase
//	                         kubelet-config` fails (exit 1, the file's
//	                         content on stderr) after kubeadm wrote the new
//	                         /var/lib/kubelet/config.yaml, and a whole
//	                         `kubeadm upgrade apply|node` is refused; while
//	                         kubelet-restart exists, the kubelet restart
//	                         command exits 1 with the file's content on
//	                         stderr, installing and restarting nothing
//	LOCALCLUSTER_<I>_METRICS_ADDRESS  where node I's agent serves its
//	                         metrics, 127.0.0.1:(10300+10I); give it to the
//	                         agent as --metrics-bind-address: the nodes share
//	                         one loopback, where the agent's default,
//	                         127.0.0.1:10268, is cp-2's kubelet's /healthz
//	LOCALCLUSTER_<I>_TMPDIR  node I's /tmp, $LOCALCLUSTER_<I>_DIR/tmp, the
//	                         TMPDIR of node I's agent: the kubeadm of
//	                         --kubeadm-template runs in node I's root, where
//	                         it must find the files the agent hands it
//	LOCALCLUSTER_<I>_KUBELET_CONFIG  node I's kubelet configuration,
//	                         $LOCALCLUSTER_<I>_DIR/var/lib/kubelet/config.yaml;
//	                         give it to the agent as --kubelet-config
//	LOCALCLUSTER_IGNORE_PREFLIGHT_ERRORS  SystemVerification, the kubeadm
//	                         preflight check to ignore on every node; give it
//	                         to the agent as --ignore-preflight-errors: it
//	                         checks the kernel and cgroups, and a node's root
//	                         has no /proc or /sys to show them
//
// for each node I from 0 to N-1. Variables of those names that run itself
// got are not passed on. The command line that runs node I's agent with
// them, for rollouts and upgrades, is in docs/development.md ("Running an
// agent on it").
//
// With --kubernetes-version the control plane starts at another release
// the harness built (make testbin builds the current one, the default, and
// the one before, v1.36.3): that release's kubeadm sets the nodes up and
// its binaries run. Each node's static Pod runner runs a manifest's
// component with the binary of the manifest's image (kube-apiserver:v1.37.2
// is kube-apiserver 1.37.2; an image it has no binary for leaves the Pod
// Pending, as ErrImagePull), so a `kubeadm upgrade` that rewrites the
// manifests moves the node to the new binaries. Each node's root holds what
// kubeadm reads on a node (internal/testcluster/noderoot.go): the kubelet's
// files, a container runtime's CRI socket (served by nodebox), a static cp.
//
// When CMD exits, run stops the processes CMD left behind (SIGTERM, SIGKILL
// 2s later), then the cluster, and exits with CMD's exit code, or 128 plus
// the signal that killed CMD. No process outlives run: all run in its PID
// namespace, whose processes the kernel kills when run ends, even by SIGKILL.
//
// CMD runs as a job of its own (a process group): a SIGINT, SIGTERM or SIGHUP
// sent to run is passed on to that job, as a terminal passes a Ctrl-C on,
// and the job is killed if CMD still runs 10s later. In a terminal CMD is the
// foreground job: a Ctrl-C reaches CMD alone, so an interactive shell keeps
// its cluster; a Ctrl-Z that stops CMD is undone, as run cannot be suspended.
//
// run's own exit codes: 2 for a bad command line or --dir, 125 when the
// cluster does not start, 126 when CMD cannot be started, 127 when it is not
// found. `go run` reports every non-zero exit code as 1: build the tool for
// CMD's code. `localcluster run --help` prints the variables and the codes.
//
// up and down start and stop the single-node control plane of the demo and
// the benchmarks: a real etcd and kube-apiserver on loopback, with
// kube-system/kubeadm-config uploaded by the real kubeadm, left running:
//
//	go run ./hack/localcluster up --dir _output/demo
//	go run ./hack/localcluster down --dir _output/demo
//
// up's DIR must be new, empty, or an earlier up's (it holds the marker
// .localcluster-up, which up writes first): up stops the processes an
// earlier up left there and empties it. Any other DIR is refused with exit
// 2 and one line, and left as it was.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

const usage = `usage: localcluster run [--nodes N] [--etcd stacked|external] [--kubernetes-version V] [--dir DIR] -- CMD [ARGS...]   (run --help tells more)
       localcluster up|down [--dir DIR]`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(exitUsage)
	}
	switch os.Args[1] {
	case "run":
		os.Exit(run(os.Args[2:]))
	case "up", "down":
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(exitUsage)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", "_output/demo", "directory for the control plane's data, logs and kubeconfig")
	_ = fs.Parse(os.Args[2:])
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if os.Args[1] == "up" {
		if err := prepareUpDir(abs); err != nil {
			fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
			os.Exit(exitUsage)
		}
	}
	if err := upDown(os.Args[1], abs); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// upMarker is the file up writes into DIR first: only a directory that
// holds it, or an empty one, is one up may empty, and whose pid files name
// processes up may stop.
const upMarker = ".localcluster-up"

// prepareUpDir refuses a DIR that is neither new, nor empty, nor an
// earlier up's.
func prepareUpDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--dir %s: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, upMarker)); err != nil {
		return fmt.Errorf("--dir %s is not empty and holds no earlier up (no %s): give a new or empty directory", dir, upMarker)
	}
	return nil
}

// upDown starts (up) or stops (down) the demo's single-node control plane.
func upDown(verb, dir string) error {
	if verb == "down" {
		if err := testcluster.Down(dir); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "local control plane stopped")
		return nil
	}
	if err := testcluster.Down(dir); err != nil { // a previous demo's leftovers
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, upMarker), []byte("written by localcluster up, which empties this directory when it starts again\n"), 0o600); err != nil {
		return err
	}
	bins, err := testcluster.FindBinaries()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "  "+format+"\n", args...) }
	c, err := testcluster.Start(ctx, bins, testcluster.Options{Dir: dir, Detach: true, Log: logf})
	if err != nil {
		return err
	}
	logf("seeding kube-system/kubeadm-config with kubeadm init phase upload-config kubeadm")
	if _, err := c.SeedKubeadm(ctx, ""); err != nil {
		_ = testcluster.Down(dir)
		return err
	}
	fmt.Println(c.Kubeconfig)
	return nil
}
