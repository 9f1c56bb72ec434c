package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"
)

// A node's root (Node.Root) is its "/": what kubeadm reads and writes on a
// control-plane node is there, so that the real `kubeadm upgrade` runs on
// it as on a real node, with `kubeadm --rootfs ROOT`, which chroots into
// the root before it does anything (the test's user namespace, where it is
// uid 0, allows the chroot). Besides /etc/kubernetes and /var/lib/etcd,
// which the node has from the start, the root holds:
//
//   - /var/lib/kubelet/{config.yaml,kubeadm-flags.env,instance-config.yaml},
//     the kubelet's files as `kubeadm init phase kubelet-start` writes them
//     (with the node's patches: a node's kubelet healthz port is its own,
//     see LocalNodePatches), which kubeadm's kubelet-config phase backs up
//     and rewrites;
//   - /var/run/containerd/containerd.sock, kubeadm's default CRI socket,
//     which instance-config.yaml names: a container runtime's CRI endpoint,
//     served by `nodebox cri` from outside the root, which kubeadm's
//     preflight (ContainerRuntimeVersion) and image pull dial; it holds the
//     images kubeadm lists for the node's release, as a node that runs it
//     has pulled them;
//   - /usr/bin/cp, a static `cp` (nodebox): kubeadm backs etcd's data
//     directory up with `cp -r`, and the host's cp, dynamically linked,
//     cannot run in the root;
//   - /dev/null, an empty regular file: Go's os/exec opens /dev/null for the
//     stdin of what it runs (cp), and a user namespace cannot make device
//     nodes;
//   - /tmp;
//   - /usr/local/kubernetes/VERSION/bin/kubeadm for every release the
//     harness built: a wrapper that runs that release's kubeadm with
//     --rootfs ROOT (see kubeadmWrapper for the contract);
//   - /harness, the harness's own: the kubelet restart command
//     (kubelet-restart), the kubelet stand-in's restart requests (kubelet/),
//     and the fault files a test creates (faults/).
//
// What kubeadm finds on the host is none of this: it never sees the host's
// files, and the host's processes (the API servers, etcd) only through the
// network, as on a real node.

// Where the harness's own files of a node are, under its root.
const (
	harnessDir = "harness"
	// FaultKubeletConfig, in a node's FaultsDir, makes the node's kubeadm
	// wrapper fail a `kubeadm upgrade apply|node phase kubelet-config` run
	// after kubeadm wrote the new /var/lib/kubelet/config.yaml: the wrapper
	// runs kubeadm, and then exits 1 with the file's content (or a line of
	// its own) on stderr. Removing it is fixing the cause: the next run
	// succeeds. While it exists, a whole `kubeadm upgrade apply|node` run
	// (no phase) is refused before it starts, as its kubelet-config phase
	// cannot fail alone.
	FaultKubeletConfig = "kubelet-config"
	// FaultKubeletRestart, in a node's FaultsDir, makes the node's kubelet
	// restart command exit 1, with the file's content on stderr, before it
	// installs or restarts anything.
	FaultKubeletRestart = "kubelet-restart"
)

// IgnorePreflightErrors are kubeadm's preflight checks a kubeadm in a
// node's root must ignore, as its --ignore-preflight-errors takes them:
// SystemVerification validates the host's kernel configuration and cgroups,
// which a node's root has no /proc, /sys or /boot to show (it fails on
// `kubelet --version` first: the node's kubelet is the harness's stand-in,
// not a program in the root). Every other check runs and passes.
const IgnorePreflightErrors = "SystemVerification"

// criSocket is kubeadm's default CRI socket, the one the kubelet's
// instance-config.yaml names, inside the root.
const criSocket = "var/run/containerd/containerd.sock"

// listImages asks each release's kubeadm which images its control plane
// runs (`kubeadm config images list`) and maps those the harness has a
// binary for to it: kube-apiserver, kube-controller-manager and
// kube-scheduler of the release's version, etcd of the version its
// kubeadm deploys, and the pause image (nodebox). CoreDNS and kube-proxy
// have none: the harness runs no addon.
func (n *Nodes) listImages(ctx context.Context) error {
	n.Images, n.releaseImages = map[string]string{}, map[string][]string{}
	for _, r := range n.Bins.Releases() {
		out, err := exec.CommandContext(ctx, r.Kubeadm, "config", "images", "list", "--kubernetes-version", r.Version).Output()
		if err != nil {
			return fmt.Errorf("kubeadm %s config images list: %w", r.Version, err)
		}
		binaries := map[string]string{"kube-apiserver": r.APIServer, "kube-controller-manager": r.ControllerManager,
			"kube-scheduler": r.Scheduler, "etcd": r.Etcd, "pause": n.Bins.Nodebox}
		tags := map[string]string{"kube-apiserver": r.Version, "kube-controller-manager": r.Version,
			"kube-scheduler": r.Version, "etcd": strings.TrimPrefix(r.EtcdVersion, "v") + "-0"}
		for _, image := range strings.Fields(string(out)) {
			n.releaseImages[r.Version] = append(n.releaseImages[r.Version], image)
			name, tag, _ := strings.Cut(ImageKey(image), ":")
			bin, ok := binaries[name]
			if !ok {
				continue
			}
			if want, ok := tags[name]; ok && tag != want {
				return fmt.Errorf("kubeadm %s runs %s, but the harness built %s:%s (make testbin)", r.Version, image, name, want)
			}
			n.Images[ImageKey(image)] = bin
		}
	}
	return nil
}

// setUpRoot adds to a node's root what kubeadm needs on a node besides the
// certificates, kubeconfigs and manifests (see above).
func (n *Nodes) setUpRoot(ctx context.Context, node *Node, configFile string) error {
	root := node.Root
	node.FaultsDir = filepath.Join(root, harnessDir, "faults")
	for _, d := range []string{"var/lib/kubelet", filepath.Dir(criSocket), "usr/bin", "dev", "tmp",
		harnessDir + "/faults", harnessDir + "/kubelet"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil { //nolint:gosec // a node's directories, as on a node
			return err
		}
	}
	node.TmpDir = filepath.Join(root, "tmp")
	if err := os.Chmod(node.TmpDir, 0o777|os.ModeSticky); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "dev", "null"), nil, 0o666); err != nil { //nolint:gosec // an empty file standing in for /dev/null
		return err
	}
	if err := copyExecutable(n.Bins.Nodebox, filepath.Join(root, "usr", "bin", "cp")); err != nil {
		return err
	}
	if err := n.writeKubeletFiles(ctx, node, configFile); err != nil {
		return err
	}
	node.KubeadmTemplate = filepath.Join(root, "usr", "local", "kubernetes", "{version}", "bin", "kubeadm")
	for _, r := range n.Bins.Releases() {
		path := strings.ReplaceAll(node.KubeadmTemplate, "{version}", r.Version)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // as a package installs it
			return err
		}
		if err := os.WriteFile(path, []byte(kubeadmWrapper(node, r)), 0o755); err != nil { //nolint:gosec // an executable
			return err
		}
	}
	node.KubeletRestart = filepath.Join(root, harnessDir, "kubelet-restart")
	return os.WriteFile(node.KubeletRestart, []byte(kubeletRestartScript(node, n.Bins.Releases())), 0o755) //nolint:gosec // an executable
}

// writeKubeletFiles writes the kubelet's files into the node's
// /var/lib/kubelet as `kubeadm init phase kubelet-start` writes them: it
// renders them into a private directory (--dry-run), and they are copied.
// A node that joined has the same files from `kubeadm join`, which writes
// config.yaml from the kubelet-config ConfigMap that init uploaded from the
// same configuration. The node's healthz address is read back from
// config.yaml.
func (n *Nodes) writeKubeletFiles(ctx context.Context, node *Node, configFile string) error {
	dir, err := os.MkdirTemp(node.Root, "kubeadm-kubelet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, n.Release.Kubeadm, "init", "phase", "kubelet-start", "--config", configFile, "--dry-run")
	cmd.Env = append(os.Environ(), "KUBEADM_INIT_DRYRUN_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubeadm init phase kubelet-start: %w: %s", err, out)
	}
	for _, f := range []string{"config.yaml", "kubeadm-flags.env", "instance-config.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(node.Root, "var", "lib", "kubelet", f), data, 0o644); err != nil { //nolint:gosec // as kubeadm writes them
			return err
		}
	}
	node.KubeletConfig = filepath.Join(node.Root, "var", "lib", "kubelet", "config.yaml")
	cfg, err := readKubeletConfig(node.Root)
	if err != nil {
		return err
	}
	node.KubeletHealthz = cfg.healthzURL()
	return nil
}

// kubeletConfig is what the harness reads of a node's
// /var/lib/kubelet/config.yaml: where the kubelet serves /healthz.
type kubeletConfig struct {
	HealthzBindAddress string `json:"healthzBindAddress"`
	HealthzPort        *int32 `json:"healthzPort"`
}

// readKubeletConfig reads the node's config.yaml, with the kubelet's
// defaults (127.0.0.1:10248).
func readKubeletConfig(root string) (kubeletConfig, error) {
	path := filepath.Join(root, "var", "lib", "kubelet", "config.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return kubeletConfig{}, err
	}
	var cfg kubeletConfig
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return kubeletConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	if cfg.HealthzBindAddress == "" {
		cfg.HealthzBindAddress = "127.0.0.1"
	}
	if cfg.HealthzPort == nil {
		port := int32(10248)
		cfg.HealthzPort = &port
	}
	return cfg, nil
}

// healthzURL is the kubelet's healthz endpoint ("" when the port is 0,
// which turns it off).
func (c kubeletConfig) healthzURL() string {
	if *c.HealthzPort == 0 {
		return ""
	}
	return fmt.Sprintf("http://%s:%d/healthz", c.HealthzBindAddress, *c.HealthzPort)
}

// kubeadmWrapper is the script at /usr/local/kubernetes/VERSION/bin/kubeadm
// in the node's root: kubeadm r as a package installs it, for this node.
//
// The contract with whoever runs it (the agent through its
// --kubeadm-template): it is called exactly as kubeadm is on a real node,
// and runs `kubeadm --rootfs ROOT ARGS...`, so kubeadm's own paths
// (/etc/kubernetes, /var/lib/kubelet, /var/lib/etcd, the CRI socket) are
// the node's. An argument that names a path under ROOT on the host, alone
// or as --flag=PATH, is passed as the same path inside the root (ROOT/x as
// /x): paths the caller derives from its node flags (--manifests-dir's
// parent as /etc/kubernetes, --patches) work unchanged, as long as the
// files it hands kubeadm (an UpgradeConfiguration for --config) are under
// the node's directories; any other path is one kubeadm looks for inside
// the root. kubeadm's environment is the caller's but for PATH, which is a
// node's standard one (inside the root, where only cp is), and
// KUBEADM_INIT_DRYRUN_DIR and KUBEADM_UPGRADE_DRYRUN_DIR, where a dry run
// writes its files, passed as the path inside the root when under it (an agent whose TMPDIR is
// the root's /tmp renders with the node's kubeadm of its release). Its exit code
// is kubeadm's, but for the FaultKubeletConfig knob.
func kubeadmWrapper(node *Node, r Release) string {
	return fmt.Sprintf(`#!/bin/sh
# kubeadm %[1]s of node %[2]s of the local control plane: runs kubeadm with
# --rootfs, the node's root, and passes a path under the root on the host as
# the same path inside it (internal/testcluster/noderoot.go, kubeadmWrapper).
root=%[3]s
kubeadm=%[4]s
fault=%[5]s
n=$#
kubelet_config=0
phase=0
while [ "$n" -gt 0 ]; do
	a=$1
	shift
	n=$((n - 1))
	case "$a" in
	"$root"/*) a=${a#"$root"} ;;
	--*=*)
		case "${a#*=}" in
		"$root"/*) a=${a%%%%=*}=${a#*="$root"} ;;
		esac
		;;
	phase) phase=1 ;;
	kubelet-config) kubelet_config=1 ;;
	esac
	set -- "$@" "$a"
done
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
case "${KUBEADM_INIT_DRYRUN_DIR:-}" in
"$root"/*) export KUBEADM_INIT_DRYRUN_DIR="${KUBEADM_INIT_DRYRUN_DIR#"$root"}" ;;
esac
case "${KUBEADM_UPGRADE_DRYRUN_DIR:-}" in
"$root"/*) export KUBEADM_UPGRADE_DRYRUN_DIR="${KUBEADM_UPGRADE_DRYRUN_DIR#"$root"}" ;;
esac
if [ -e "$fault" ]; then
	if [ "$phase" = 0 ]; then
		echo "error: the harness's fault $fault is set: it fails only 'kubeadm upgrade apply|node phase kubelet-config', not a whole upgrade" >&2
		exit 1
	fi
	if [ "$kubelet_config" = 1 ]; then
		"$kubeadm" --rootfs "$root" "$@" || exit $?
		msg=$(cat "$fault")
		echo "error: ${msg:-kubelet-config failed after it wrote /var/lib/kubelet/config.yaml (the harness's fault $fault is set)}" >&2
		exit 1
	fi
fi
exec "$kubeadm" --rootfs "$root" "$@"
`, r.Version, node.Name, shellQuote(node.Root), shellQuote(r.Kubeadm), shellQuote(filepath.Join(node.FaultsDir, FaultKubeletConfig)))
}

// kubeletRestartScript is the node's kubelet restart command: it stands in
// for installing kubelet $KUBEADMCFG_KUBELET_VERSION (a release the harness
// built, else it fails as a package manager would) and restarting it. The
// node's kubelet stand-in (the runner, kubelet.go) takes the request, stops
// serving /healthz, reads config.yaml again, and comes back as the new
// version; the command returns once it did (at most 60s), as
// `systemctl restart kubelet` returns once the kubelet started, whether or
// not it then stays up. FaultKubeletRestart makes it fail first.
func kubeletRestartScript(node *Node, releases []Release) string {
	var versions []string
	for _, r := range releases {
		versions = append(versions, r.Version)
	}
	sort.Strings(versions)
	return fmt.Sprintf(`#!/bin/sh
# Installs node %[1]s's kubelet at $KUBEADMCFG_KUBELET_VERSION and restarts it,
# as the local control plane's harness stands it in
# (internal/testcluster/noderoot.go and kubelet.go).
set -eu
dir=%[2]s
fault="$dir/faults/%[3]s"
if [ -e "$fault" ]; then
	msg=$(cat "$fault")
	echo "kubelet-restart: ${msg:-the harness's fault $fault is set}" >&2
	exit 1
fi
version=${KUBEADMCFG_KUBELET_VERSION:-}
case " %[4]s " in
*" $version "*) ;;
*)
	echo "kubelet-restart: no kubelet package of version '$version' (KUBEADMCFG_KUBELET_VERSION): the harness has %[4]s" >&2
	exit 1
	;;
esac
id="$$-$(date +%%s%%N)"
printf '%%s %%s\n' "$id" "$version" >"$dir/kubelet/restart.tmp"
mv "$dir/kubelet/restart.tmp" "$dir/kubelet/restart"
i=0
while [ "$i" -lt 600 ]; do
	if [ -e "$dir/kubelet/restarted" ]; then
		read -r got result <"$dir/kubelet/restarted" || true
		if [ "$got" = "$id" ]; then
			echo "kubelet-restart: %[1]s: $result" >&2
			exit 0
		fi
	fi
	sleep 0.1
	i=$((i + 1))
done
echo "kubelet-restart: %[1]s's kubelet did not restart within 60s" >&2
exit 1
`, node.Name, shellQuote(filepath.Join(node.Root, harnessDir)), FaultKubeletRestart, strings.Join(versions, " "))
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// copyExecutable copies an executable file.
func copyExecutable(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o755) //nolint:gosec // an executable
}

// nodeProcess is a node's daemon besides its static Pods: its container
// runtime.
type nodeProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startCRI starts the node's container runtime, `nodebox cri` on the
// root's CRI socket, holding the images of the node's release, and waits
// for the socket (5s at most).
func (n *Nodes) startCRI(node *Node) error {
	logs := filepath.Join(node.Root, "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(logs, "cri.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	socket := filepath.Join(node.Root, criSocket)
	args := []string{"cri", "--socket", socket}
	for _, image := range n.releaseImages[n.Release.Version] {
		args = append(args, "--image", image)
		if name, _, _ := strings.Cut(ImageKey(image), ":"); name == "pause" {
			args = append(args, "--sandbox-image", image)
		}
	}
	cmd := exec.Command(n.Bins.Nodebox, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the container runtime: %w", err)
	}
	p := &nodeProcess{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	node.cri = p
	deadline := time.Now().Add(5 * time.Second)
	for {
		if fi, err := os.Stat(socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("the container runtime exited: %s", lastLines(filepath.Join(logs, "cri.log"), 3))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("the container runtime did not create its socket in 5s")
		}
	}
}

// stop stops the process: SIGTERM, SIGKILL 2s later.
func (p *nodeProcess) stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(2 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
