package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/unitfile"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
)

// The deployment of agents that run upgrades, as docs/agent.md ("Agents
// that run upgrades") tells operators to deploy it: the rights of
// deploy/rbac.yaml, deploy/agent-policy.yaml and deploy/agent-node-rbac.yaml, and
// one node's agent run with the command line of the systemd unit with its
// drop-in deploy/kubeadmcfg-agent.service.d/upgrades.conf, seeing the node's
// root as that unit's sandbox shows the node. The node's root stands for /
// wherever the files name a path of the node.

// The files of the deployment, from internal/e2e.
const (
	agentUnitFile    = "../../deploy/kubeadmcfg-agent.service"
	upgradesDropIn   = "../../deploy/kubeadmcfg-agent.service.d/upgrades.conf"
	agentNodeRBAC    = "../../deploy/agent-node-rbac.yaml"
	agentPolicyFile  = "../../deploy/agent-policy.yaml"
	agentRBACFile    = "../../deploy/rbac.yaml"
	unitKubeletHook  = "/usr/local/sbin/kubeadmcfg-kubelet-install"
	unitKubeadmTmpl  = "/usr/local/kubernetes/{version}/bin/kubeadm"
	unitPluginBinary = "/usr/local/bin/kubectl-kubeadmcfg"
)

// applyAgentRights applies the agents' rights as docs/agent.md gives
// them for the systemd agents, every control-plane node's own Lease
// included; the DaemonSet's agents need no more.
func (c *agentUpgradeCluster) applyAgentRights(t *testing.T) {
	t.Helper()
	wantExit(t, runLong(t, time.Minute, "kubectl", "apply", "-f", agentRBACFile, "-f", agentPolicyFile, "--kubeconfig", c.Kubeconfig), 0)
	var nodeRBAC strings.Builder
	for _, name := range c.names() {
		nodeRBAC.WriteString(strings.ReplaceAll(readString(t, agentNodeRBAC), "@NODE@", name))
		nodeRBAC.WriteString("\n")
	}
	file := filepath.Join(t.TempDir(), "agent-node-rbac.yaml")
	if err := os.WriteFile(file, []byte(nodeRBAC.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	wantExit(t, runLong(t, time.Minute, "kubectl", "apply", "-f", file, "--kubeconfig", c.Kubeconfig), 0)
}

// daemonSetIdentity is the identity of the DaemonSet's agent on node: its
// ServiceAccount, with the node a Pod-bound token names, which
// deploy/agent-policy.yaml ties its Lease to.
func daemonSetIdentity(node string) []string {
	return []string{"--as", agentIdentity, "--as-user-extra", "authentication.kubernetes.io/node-name=" + node}
}

// systemdIdentity is the identity of the systemd agent of node: the user
// of the certificate deploy/kubeadmcfg-agent-kubeconfig.sh makes, in the
// agents' group (TestAgentAsDocumented runs the recipe itself).
func systemdIdentity(node string) []string {
	return []string{"--as", "kubeadmcfg-agent:" + node, "--as-group", "kubeadmcfg:agents"}
}

// upgradeUnit is the agent's unit with its drop-in for upgrades, read as
// systemd reads them.
func upgradeUnit(t *testing.T) *unitfile.Unit {
	t.Helper()
	u, err := unitfile.Read(agentUnitFile, upgradesDropIn)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// unitSandbox is the script that shows a command a node's root as the
// unit u's sandbox shows the node, in a mount namespace of its own: the
// root read-only (ProtectSystem=strict), but for the unit's ReadWritePaths,
// its /tmp (PrivateTmp=, the root's own here) and outside, the paths of the
// root that stand for what runs outside the sandbox (the harness's
// directory, where its stand-in for systemd-run's service installs and
// restarts the kubelet). It refuses a unit whose
// sandbox it cannot show (a TemporaryFileSystem=, paths bound elsewhere):
// the drop-in resets those. Only the file system is shown: the unit's
// capabilities and system call filter are systemd-analyze's and
// hack/imagecheck's to check (kubeadm --rootfs, the harness's way to run
// kubeadm on a node's root, itself needs CAP_SYS_CHROOT).
func unitSandbox(t *testing.T, u *unitfile.Unit, outside ...string) []string {
	t.Helper()
	for _, key := range []string{"TemporaryFileSystem", "BindPaths", "BindReadOnlyPaths", "ReadOnlyPaths", "InaccessiblePaths"} {
		if v := u.Values("Service", key); len(v) > 0 {
			t.Fatalf("the unit has %s=%q: the sandbox here shows ProtectSystem=strict and ReadWritePaths= alone", key, v)
		}
	}
	for key, want := range map[string]string{"ProtectSystem": "strict", "PrivateTmp": "yes"} {
		if got, _ := u.Value("Service", key); got != want {
			t.Fatalf("the unit has %s=%s: the sandbox here shows %s=%s", key, got, key, want)
		}
	}
	writable := append([]string{"/tmp"}, outside...)
	for _, p := range u.Words("Service", "ReadWritePaths") {
		if strings.HasPrefix(p, "-") || !strings.HasPrefix(p, "/") {
			t.Fatalf("ReadWritePaths=%s: the sandbox here shows paths that must exist", p)
		}
		writable = append(writable, p)
	}
	script := []string{`set -eu`, `root=$1; shift`, `mount --bind "$root" "$root"`}
	for _, p := range writable {
		script = append(script, fmt.Sprintf(`mount --bind "$root"%q "$root"%q`, p, p))
	}
	return append(script, `mount -o remount,bind,ro "$root"`, `exec "$@"`)
}

// startUnitUpgradeAgent starts node name's agent with the command line of
// the unit and its drop-in, in the unit's sandbox of the node's root: the
// unit's paths are the root's, its plugin the built one, its kubeadm of
// each release the node's (through the template), and its kubelet restart
// command the harness's stand-in for what systemd-run runs outside the
// sandbox. The test's own flags come last and win: the systemd agent's
// identity through the cluster's kubeconfig (no recipe here), the node's
// name, the harness's heartbeat and --stop-grace, the node's certificates
// directory, and the preflight checks a node's root cannot pass.
func (c *agentUpgradeCluster) startUnitUpgradeAgent(t *testing.T, name string) *agentProcess {
	t.Helper()
	return c.runAgent(t, name, c.unitUpgradeAgent(t, name))
}

func (c *agentUpgradeCluster) unitUpgradeAgent(t *testing.T, name string) *exec.Cmd {
	t.Helper()
	u := upgradeUnit(t)
	n := c.node(t, name)
	plugin, err := exec.LookPath("kubectl-kubeadmcfg")
	if err != nil {
		t.Fatal(err)
	}
	rooted := func(a string) string {
		for _, p := range []string{"/etc/kubernetes", "/var/lib/kubelet"} {
			if a == p || strings.HasPrefix(a, p+"/") {
				return filepath.Join(n.Root, a)
			}
		}
		return a
	}
	subst := func(argv []string) []string {
		out := make([]string, len(argv))
		for i, a := range argv {
			switch {
			case a == unitPluginBinary:
				a = plugin
			case a == "/usr/bin/kubeadm":
				a = n.cp.Bins.Kubeadm
			case a == unitKubeadmTmpl:
				a = n.KubeadmTemplate
			case i > 0 && argv[i-1] == "--kubelet-restart-command":
				if f := strings.Fields(a); len(f) == 0 || f[0] != unitKubeletHook {
					t.Fatalf("the drop-in's kubelet restart command is %q, not %s, which the harness stands in for", a, unitKubeletHook)
				}
				a = n.KubeletRestart
			default:
				a = rooted(a)
			}
			out[i] = a
		}
		return out
	}
	argv := append(unitStart(t, u, subst), "--kubeconfig", c.Kubeconfig, "--node-name", name, "--stop-grace", "20s",
		"--heartbeat-interval", agentHeartbeat.String(), "--metrics-bind-address", metricsAddr(name),
		"--cert-dir", filepath.Join(n.Root, "etc", "kubernetes", "pki"), "--ignore-preflight-errors", strings.Join(upgradeIgnored, ","))
	argv = append(argv, systemdIdentity(name)...)
	harness, err := filepath.Rel(n.Root, filepath.Dir(n.FaultsDir))
	if err != nil || strings.HasPrefix(harness, "..") {
		t.Fatalf("the harness's directory %s is not in the node's root %s", filepath.Dir(n.FaultsDir), n.Root)
	}
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "--", "bash", "-c",
		strings.Join(unitSandbox(t, u, "/"+harness), "\n"), "sandbox", n.Root}, argv...)...)
	// As startUpgradeAgent: a render through the template runs the node's
	// kubeadm in its root, so what the agent hands it is under the root
	// (its /tmp, the unit's PrivateTmp).
	cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Join(n.Root, "tmp"))
	return cmd
}

// wantUpgradeSandbox checks what the unit's sandbox lets a process write
// on node name, with a shell in place of the agent: /etc/kubernetes and
// /var/lib/kubelet, and neither the etcd data nor the rest of the node.
func (c *agentUpgradeCluster) wantUpgradeSandbox(t *testing.T, name string) {
	t.Helper()
	cmd := c.unitUpgradeAgent(t, name)
	i := slices.Index(cmd.Args, "sandbox")
	probe := `cd "$1"; for p in etc/kubernetes etc/kubernetes/pki var/lib/kubelet var/lib/etcd var/lib usr/bin etc .; do
  if touch "$p/.probe" 2>/dev/null; then rm "$p/.probe"; echo "$p writable"; else echo "$p read-only"; fi
done`
	cmd.Args = append(cmd.Args[:i+2:i+2], "bash", "-c", probe, "probe", c.node(t, name).Root)
	r := runCmd(t, cmd)
	wantExit(t, r, 0)
	want := "etc/kubernetes writable\netc/kubernetes/pki writable\nvar/lib/kubelet writable\nvar/lib/etcd read-only\n" +
		"var/lib read-only\nusr/bin read-only\netc read-only\n. read-only\n"
	if r.stdout != want {
		t.Errorf("the unit's sandbox of %s lets write:\n%s\nwant:\n%s", name, r.stdout, want)
	}
}

// wantPolicyInForce checks that deploy/agent-policy.yaml holds in the
// cluster: the DaemonSet's agent of one node may not change another
// node's Lease, so that the upgrade's heartbeats, which the agents renew
// under the same policy, show that it lets them through.
func (c *agentUpgradeCluster) wantPolicyInForce(t *testing.T, self, other string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	lease, err := c.client.CoordinationV1().Leases("kube-system").Get(ctx, nodestate.LeaseName(other), metav1.GetOptions{})
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(time.Second)
		lease, err = c.client.CoordinationV1().Leases("kube-system").Get(ctx, nodestate.LeaseName(other), metav1.GetOptions{})
	}
	if err != nil {
		t.Fatalf("the agent of %s holds no Lease a minute after it started: %v", other, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: agentIdentity,
		Extra: map[string][]string{"authentication.kubernetes.io/node-name": {self}}}
	// The agent of other renews its Lease every few seconds: an update of
	// the copy read here can meet a newer one, a conflict that says
	// nothing of the policy. Read it again and retry, as any client does.
	asAgent := kubernetesFor(t, cfg).CoordinationV1().Leases("kube-system")
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := asAgent.Update(ctx, lease, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if l, gerr := c.client.CoordinationV1().Leases("kube-system").Get(ctx, lease.Name, metav1.GetOptions{}); gerr == nil {
				lease = l
			}
		}
		return err
	})
	wantRefused(t, "the DaemonSet's agent of "+self+" updates "+other+"'s Lease", err,
		"the agent of node "+self+" may not change Lease "+nodestate.LeaseName(other))
}

// wantUnitPhases checks, after the upgrade, that node name's agent, run as
// the unit with the drop-in, ran every phase of its kubeadm step in the
// sandbox, backed the etcd data up through it (read-only), and was never
// refused by the file system or the API.
func (c *agentUpgradeCluster) wantUnitPhases(t *testing.T, name, command string, phases []string) {
	t.Helper()
	log := c.agents[name].stderrString()
	for _, phase := range phases {
		if want := "info Kubeadm: kubeadm upgrade " + command + " phase " + phase + ": done in "; !strings.Contains(log, want) {
			t.Errorf("the agent of %s, run as the unit with its drop-in, did not log %q", name, want)
		}
	}
	for _, refusal := range []string{"read-only file system", "permission denied", "forbidden", "NoHeartbeat"} {
		if strings.Contains(log, refusal) {
			t.Errorf("the agent of %s, run as the unit with its drop-in, logged %q:\n%s", name, refusal, log)
		}
	}
	backups, _ := filepath.Glob(filepath.Join(c.node(t, name).Root, "etc", "kubernetes", "tmp", "kubeadm-backup-etcd-*"))
	if len(backups) == 0 {
		t.Errorf("kubeadm on %s left no backup of the etcd data in /etc/kubernetes/tmp", name)
	}
}
