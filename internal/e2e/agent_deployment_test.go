package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/unitfile"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// The agents deployed exactly as docs/agent.md tells operators to deploy
// them, on three local control-plane nodes: each node's kubeconfig made by
// the recipe with the real kubeadm and the node's CA, the rights of
// deploy/rbac.yaml, deploy/agent-policy.yaml and deploy/agent-node-rbac.yaml and
// nothing more, each agent run with the systemd unit's command line and
// seeing only the files the unit binds into its sandbox. The node's root
// stands for / wherever the documents name /etc/kubernetes.

// docAgentWait is the agents' --wait here (the unit's is 2m): how long a
// component may take to come up, and a rollback with it.
const docAgentWait = 30 * time.Second

type docCluster struct {
	*agentCluster
	repo string // the repository's root, where the documented commands run
}

func TestAgentAsDocumented(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	repo, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	d := &docCluster{agentCluster: startAgentNodes(t), repo: repo}
	runSteps(t, d, []step[*docCluster]{
		{"the recipe: every node's kubeconfig names the controlPlaneEndpoint, with the node's own identity", docRecipe},
		{"the rights: a node's identity changes its own Lease, never another node's", docRights},
		{"an agent whose kubeconfig names its own node's API server refuses to start", docOwnServer},
		{"the agents run as the systemd unit runs them, and a rollout reaches every node", docRollout},
		{"the renewal: a certificate near its end is renewed and the agent restarted, never during a turn", docRenewal},
		{"cp-0 broken beyond rollback: --wait exits 9 naming it, and rollout status says RollbackFailed", docBeyondRollback},
	})
}

// documented runs a command line docs/agent.md gives, word for word, with
// bash in the repository's root, as the cluster's administrator.
func (d *docCluster) documented(t *testing.T, line string) result {
	t.Helper()
	if !strings.Contains(readString(t, filepath.Join(d.repo, "docs", "agent.md")), line) {
		t.Fatalf("docs/agent.md does not give the command %s", line)
	}
	cmd := exec.Command("bash", "-c", "set -euo pipefail; "+line)
	cmd.Dir = d.repo
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.Kubeconfig)
	r := runCmd(t, cmd)
	wantExit(t, r, 0)
	return r
}

// etc is node name's /etc/kubernetes.
func (d *docCluster) etc(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(d.node(t, name).Root, "etc", "kubernetes")
}

// kubeconfigOf is the agent's kubeconfig on node name.
func (d *docCluster) kubeconfigOf(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(d.etc(t, name), "kubeadmcfg-agent.conf")
}

// recipe runs deploy/kubeadmcfg-agent-kubeconfig.sh on node name, as it is
// installed (kubeadmcfg-agent-kubeconfig) and run by hand or by its timer's
// service, with the node's root and name, and the node's kubeadm, kubectl
// and openssl on PATH. systemctl is a stand-in that logs its arguments to
// the node's systemctl.log.
func (d *docCluster) recipe(t *testing.T, name string, args ...string) result {
	t.Helper()
	n := d.node(t, name)
	bin := filepath.Join(n.Root, "test-bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	stub := "#!/bin/sh\necho \"$@\" >>" + filepath.Join(n.Root, "systemctl.log") + "\n"
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(stub), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(n.Root, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(d.repo, "deploy", "kubeadmcfg-agent-kubeconfig.sh"),
		append(args, "--node", name, "--rootfs", n.Root)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+filepath.Dir(d.Bins.Kubeadm)+":"+os.Getenv("PATH"))
	return runCmd(t, cmd)
}

// systemctlCalls is what the recipe asked systemctl to do on node name.
func (d *docCluster) systemctlCalls(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(d.node(t, name).Root, "systemctl.log"))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// agentCertificate reads the client certificate of kubeconfig path.
func agentCertificate(t *testing.T, path string) (server string, cert *x509.Certificate) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.Clusters[ctx.Cluster] == nil || cfg.AuthInfos[ctx.AuthInfo] == nil {
		t.Fatalf("%s has no current context with a cluster and a user", path)
	}
	block, _ := pem.Decode(cfg.AuthInfos[ctx.AuthInfo].ClientCertificateData)
	if block == nil {
		t.Fatalf("%s holds no client certificate", path)
	}
	if cert, err = x509.ParseCertificate(block.Bytes); err != nil {
		t.Fatal(err)
	}
	return cfg.Clusters[ctx.Cluster].Server, cert
}

// clientOf is a client with kubeconfig path's identity.
func clientOf(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetesFor(t, cfg)
}

func kubernetesFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func docRecipe(t *testing.T, d *docCluster) {
	// kubeadm init binds admin.conf's group to cluster-admin, and so does
	// the local control plane's setup (kubeadm's phases): the recipe's
	// kubeadm acts with admin.conf.
	wantExit(t, run(t, "kubectl", "get", "clusterrolebinding", "kubeadm:cluster-admins", "--kubeconfig", d.Kubeconfig), 0)
	d.documented(t, "kubectl apply -f deploy/rbac.yaml -f deploy/agent-policy.yaml")
	d.documented(t, `for node in cp-0 cp-1 cp-2; do sed "s/@NODE@/${node}/g" deploy/agent-node-rbac.yaml; done | kubectl apply -f -`)
	if !strings.Contains(readString(t, filepath.Join(d.repo, "deploy", "kubeadmcfg-agent.service")), "\n#   kubeadmcfg-agent-kubeconfig\n") {
		t.Fatal("the unit's installation does not run kubeadmcfg-agent-kubeconfig")
	}
	endpoint := "https://" + testcluster.LocalEndpoint
	for _, name := range d.names() {
		r := d.recipe(t, name)
		wantExit(t, r, 0)
		path := d.kubeconfigOf(t, name)
		if want := "kubeadmcfg-agent-kubeconfig: wrote " + path + " for kubeadmcfg-agent:" + name + " (server " + endpoint; !strings.HasPrefix(r.stdout, want) {
			t.Errorf("the recipe on %s said %s, want %q...", name, r, want)
		}
		server, cert := agentCertificate(t, path)
		if server != endpoint {
			t.Errorf("%s's agent kubeconfig names %s, want the controlPlaneEndpoint %s", name, server, endpoint)
		}
		if cert.Subject.CommonName != "kubeadmcfg-agent:"+name || !slices.Equal(cert.Subject.Organization, []string{"kubeadmcfg:agents"}) {
			t.Errorf("%s's agent certificate is for %s", name, cert.Subject)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v, want 0600", path, err, fi.Mode().Perm())
		}
	}
}

// leaseFor is an agent's Lease of node.
func leaseFor(node string) *coordinationv1.Lease {
	holder := "e2e"
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: nodestate.LeaseName(node), Namespace: "kube-system",
		Labels: map[string]string{nodestate.Label: node}}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
}

// wantRefused fails the test unless err is a refusal (403) saying want.
func wantRefused(t *testing.T, what string, err error, want string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: got %v, want a refusal saying %q", what, err, want)
	}
}

// ownLeaseWorks creates, updates and deletes node's own Lease as c.
func ownLeaseWorks(t *testing.T, who string, c kubernetes.Interface, node string) {
	t.Helper()
	ctx := context.Background()
	leases := c.CoordinationV1().Leases("kube-system")
	l, err := leases.Create(ctx, leaseFor(node), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s cannot create its own Lease: %v", who, err)
	}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Errorf("%s cannot update its own Lease: %v", who, err)
	}
	if err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("%s cannot delete its own Lease: %v", who, err)
	}
}

// othersLeaseRefused: c may neither create, nor update, nor delete
// other's Lease.
func othersLeaseRefused(t *testing.T, d *docCluster, who string, c kubernetes.Interface, other, createRefusal, changeRefusal string) {
	t.Helper()
	ctx := context.Background()
	name := nodestate.LeaseName(other)
	_, err := c.CoordinationV1().Leases("kube-system").Create(ctx, leaseFor(other), metav1.CreateOptions{})
	wantRefused(t, who+" creates "+name, err, createRefusal)
	l, err := d.client.CoordinationV1().Leases("kube-system").Create(ctx, leaseFor(other), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.client.CoordinationV1().Leases("kube-system").Delete(ctx, name, metav1.DeleteOptions{}) }()
	_, err = c.CoordinationV1().Leases("kube-system").Update(ctx, l, metav1.UpdateOptions{})
	wantRefused(t, who+" updates "+name, err, changeRefusal)
	err = c.CoordinationV1().Leases("kube-system").Delete(ctx, name, metav1.DeleteOptions{})
	wantRefused(t, who+" deletes "+name, err, changeRefusal)
}

// heartbeatRights (review S1): c, an agent identity of node own, may hold
// an upgrade step's heartbeat Lease in its own node's name alone: it may
// neither renew nor delete the heartbeat other's agent holds, nor create
// one in other's agent's name. It may take a slot over in its own name,
// as it takes over one a killed runner left behind.
func heartbeatRights(t *testing.T, d *docCluster, who string, c kubernetes.Interface, own, other string) {
	t.Helper()
	ctx := context.Background()
	heartbeat := func(slot int, holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: engine.HeartbeatName("kubeadmcfg-upgrade", slot), Namespace: "kube-system"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	}
	leases := c.CoordinationV1().Leases("kube-system")
	admin := d.client.CoordinationV1().Leases("kube-system")
	theirs, err := admin.Create(ctx, heartbeat(0, "agent/"+other+"/1-aaaa"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Delete(ctx, theirs.Name, metav1.DeleteOptions{}) }()
	_, err = leases.Update(ctx, theirs, metav1.UpdateOptions{})
	wantRefused(t, who+" renews "+other+"'s heartbeat", err,
		"the agent of node "+own+" may hold heartbeat Lease "+theirs.Name+" only as itself (agent/"+own+"/...), not as agent/"+other+"/1-aaaa")
	err = leases.Delete(ctx, theirs.Name, metav1.DeleteOptions{})
	wantRefused(t, who+" deletes "+other+"'s heartbeat", err,
		"the agent of node "+own+" may not delete heartbeat Lease "+theirs.Name+", held by agent/"+other+"/1-aaaa")
	_, err = leases.Create(ctx, heartbeat(1, "agent/"+other+"/3-cccc"), metav1.CreateOptions{})
	wantRefused(t, who+" creates a heartbeat in "+other+"'s name", err,
		"may hold heartbeat Lease "+engine.HeartbeatName("kubeadmcfg-upgrade", 1)+" only as itself")
	mine := "agent/" + own + "/2-bbbb"
	taken := theirs.DeepCopy()
	taken.Spec.HolderIdentity = &mine
	if taken, err = leases.Update(ctx, taken, metav1.UpdateOptions{}); err != nil {
		t.Errorf("%s cannot take a slot over in its own name: %v", who, err)
	} else if err := leases.Delete(ctx, taken.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("%s cannot delete the slot it took over: %v", who, err)
	}
	l, err := leases.Create(ctx, heartbeat(1, mine), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s cannot create its own heartbeat: %v", who, err)
	}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Errorf("%s cannot renew its own heartbeat: %v", who, err)
	}
	if err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("%s cannot delete its own heartbeat: %v", who, err)
	}
}

// patchCondition sets a test condition on node's status as c, as an agent
// sets its own (engine.SetNodeCondition).
func patchCondition(c kubernetes.Interface, node string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := engine.New(c, engine.Target{Namespace: "kube-system", Name: "kubeadmcfg-rollout"}, engine.Options{Timeout: 30 * time.Second}).
		SetNodeCondition(ctx, node, corev1.NodeCondition{Type: "KubeadmcfgRightsCheck", Status: corev1.ConditionTrue,
			Reason: "E2E", LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()})
	return err
}

// nodeStatusRights: c may patch its own Node's status, never other's.
func nodeStatusRights(t *testing.T, who string, c kubernetes.Interface, own, other, refusal string) {
	t.Helper()
	if err := patchCondition(c, own); err != nil {
		t.Errorf("%s cannot set a condition on its own Node %s: %v", who, own, err)
	}
	wantRefused(t, who+" sets a condition on node "+other, patchCondition(c, other), refusal)
}

func docRights(t *testing.T, d *docCluster) {
	ctx := context.Background()
	// The systemd recipe's identity: cp-1's kubeconfig.
	cp1 := clientOf(t, d.kubeconfigOf(t, "cp-1"))
	othersLeaseRefused(t, d, "kubeadmcfg-agent:cp-1", cp1, "cp-0",
		"the agent of node cp-1 may not change Lease kubeadmcfg-agent-cp-0, only its own, kubeadmcfg-agent-cp-1",
		`User "kubeadmcfg-agent:cp-1" cannot`)
	ownLeaseWorks(t, "kubeadmcfg-agent:cp-1", cp1, "cp-1")
	nodeStatusRights(t, "kubeadmcfg-agent:cp-1", cp1, "cp-1", "cp-0", `User "kubeadmcfg-agent:cp-1" cannot patch resource "nodes/status"`)
	heartbeatRights(t, d, "kubeadmcfg-agent:cp-1", cp1, "cp-1", "cp-0")

	// The DaemonSet's identity: tokens of its ServiceAccount bound to a Pod
	// on each node, as the kubelet gets them for the DaemonSet's Pods (no
	// kubelet runs them here, but the tokens are real).
	pods := d.client.CoreV1().Pods("kube-system")
	tokens := map[string]string{}
	for _, node := range []string{"cp-0", "cp-1"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kubeadmcfg-agent-" + node, Namespace: "kube-system"},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "kubeadmcfg-agent",
				Containers: []corev1.Container{{Name: "agent", Image: "ghcr.io/kubeadmcfg/kubectl-kubeadmcfg:VERSION"}}}}
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			zero := int64(0)
			_ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
		r := run(t, "kubectl", "create", "token", "kubeadmcfg-agent", "-n", "kube-system", "--bound-object-kind", "Pod",
			"--bound-object-name", pod.Name, "--kubeconfig", d.Kubeconfig)
		wantExit(t, r, 0)
		tokens[node] = strings.TrimSpace(r.stdout)
	}
	r := run(t, "kubectl", "create", "token", "kubeadmcfg-agent", "-n", "kube-system", "--kubeconfig", d.Kubeconfig)
	wantExit(t, r, 0)
	unbound := strings.TrimSpace(r.stdout)
	admin, err := clientcmd.BuildConfigFromFlags("", d.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	withToken := func(token string) kubernetes.Interface {
		cfg := rest.AnonymousClientConfig(admin)
		cfg.BearerToken = token
		return kubernetesFor(t, cfg)
	}
	sa := withToken(tokens["cp-1"])
	review, err := sa.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"]; !slices.Equal(got, []string{"cp-1"}) {
		t.Fatalf("the token bound to a Pod on cp-1 names node %q (user %+v)", got, review.Status.UserInfo)
	}
	saRefusal := "the agent of node cp-1 may not change Lease kubeadmcfg-agent-cp-0, only its own, kubeadmcfg-agent-cp-1"
	othersLeaseRefused(t, d, "the ServiceAccount on cp-1", sa, "cp-0", saRefusal, saRefusal)
	ownLeaseWorks(t, "the ServiceAccount on cp-1", sa, "cp-1")
	ownLeaseWorks(t, "the ServiceAccount on cp-0", withToken(tokens["cp-0"]), "cp-0")
	nodeStatusRights(t, "the ServiceAccount on cp-1", sa, "cp-1", "cp-0", "the agent of node cp-1 may not change the status of node cp-0, only its own")
	heartbeatRights(t, d, "the ServiceAccount on cp-1", sa, "cp-1", "cp-0")
	_, err = withToken(unbound).CoordinationV1().Leases("kube-system").Create(ctx, leaseFor("cp-1"), metav1.CreateOptions{})
	wantRefused(t, "a token bound to no Pod", err, "the identity system:serviceaccount:kube-system:kubeadmcfg-agent names no node")
}

// unitAgent is the command line the systemd unit runs on node name, with
// the node's root for / and kubeconfig as its --kubeconfig, in a sandbox
// that, as the unit's, shows it nothing of /etc/kubernetes but what the
// unit binds in: a mount namespace of its own where the node's
// /etc/kubernetes is an empty read-only tmpfs with those paths bound into
// it. The unit's ExecStartPre lines run first. The test's own flags come
// last and win: the node's name (the hostname is not), a shorter --wait and
// --stop-grace, and the harness's heartbeat.
func (d *docCluster) unitAgent(t *testing.T, name, kubeconfig string) *exec.Cmd {
	t.Helper()
	u, err := unitfile.Read(filepath.Join(d.repo, "deploy", "kubeadmcfg-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	etc := d.etc(t, name)
	plugin, err := exec.LookPath("kubectl-kubeadmcfg")
	if err != nil {
		t.Fatal(err)
	}
	subst := func(argv []string) []string {
		out := make([]string, len(argv))
		for i, a := range argv {
			switch a {
			case "/usr/local/bin/kubectl-kubeadmcfg":
				a = plugin
			case "/usr/bin/kubeadm":
				a = d.Bins.Kubeadm
			default:
				a = strings.ReplaceAll(a, "/etc/kubernetes", etc)
			}
			out[i] = a
		}
		return out
	}
	argv := append(unitStart(t, u, subst), "--kubeconfig", kubeconfig, "--node-name", name, "--wait", docAgentWait.String(),
		"--stop-grace", "20s", "--heartbeat-interval", agentHeartbeat.String(), "--metrics-bind-address", metricsAddr(name))

	script := []string{`set -eu`, `etc=$1; shift`, `stage=$(mktemp -d)`, `mount --bind "$etc" "$stage"`,
		`mount -t tmpfs -o mode=0755 tmpfs "$etc"`,
		`bind() { # MODE PATH OPTIONAL: bind the node's PATH (under /etc/kubernetes) into the sandbox
  if [ ! -e "$stage/$2" ]; then [ "$3" = 1 ] && return 0; echo "sandbox: no /etc/kubernetes/$2" >&2; exit 1; fi
  if [ -d "$stage/$2" ]; then mkdir -p "$etc/$2"; else mkdir -p "$(dirname "$etc/$2")"; : >"$etc/$2"; fi
  mount --bind "$stage/$2" "$etc/$2"
  if [ "$1" = ro ]; then mount -o remount,bind,ro "$etc/$2"; fi
}`}
	tmpfs := u.Words("Service", "TemporaryFileSystem")
	if !slices.Equal(tmpfs, []string{"/etc/kubernetes:ro"}) {
		t.Fatalf("the unit's TemporaryFileSystem is %q, want /etc/kubernetes:ro alone (the sandbox here has no other)", tmpfs)
	}
	for key, mode := range map[string]string{"BindPaths": "rw", "BindReadOnlyPaths": "ro"} {
		for _, p := range u.Words("Service", key) {
			optional := "0"
			if rest, ok := strings.CutPrefix(p, "-"); ok {
				p, optional = rest, "1"
			}
			rel, ok := strings.CutPrefix(p, "/etc/kubernetes/")
			if !ok || strings.Contains(rel, ":") {
				t.Fatalf("%s=%s: the sandbox here binds paths of /etc/kubernetes alone, as themselves", key, p)
			}
			script = append(script, fmt.Sprintf("bind %s %q %s", mode, rel, optional))
		}
	}
	script = append(script, `mount -o remount,ro "$etc"`, `umount -l "$stage"`, `exec "$@"`)
	return exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "--", "bash", "-c",
		strings.Join(script, "\n"), "sandbox", etc}, argv...)...)
}

// wantSandboxed checks what the unit's sandbox shows of node name's
// /etc/kubernetes, with a shell in place of the agent: the paths bound in,
// and nothing it cannot write but them.
func (d *docCluster) wantSandboxed(t *testing.T, name string) {
	t.Helper()
	cmd := d.unitAgent(t, name, d.kubeconfigOf(t, name))
	etc := d.etc(t, name)
	i := slices.Index(cmd.Args, "sandbox")
	probe := `cd "$1"; find . -mindepth 1 -maxdepth 2 -not -name '*.yaml' -not -name '.*' | LC_ALL=C sort
for p in . kubeadmcfg pki; do touch "$p/probe" 2>/dev/null && echo "$p writable"; done
for p in manifests kubeadmcfg/backups; do touch "$p/.probe" && rm "$p/.probe" || echo "$p read-only"; done`
	cmd.Args = append(cmd.Args[:i+2:i+2], "bash", "-c", probe, "probe", etc)
	r := runCmd(t, cmd)
	wantExit(t, r, 0)
	want := "./kubeadmcfg\n./kubeadmcfg-agent.conf\n./kubeadmcfg/backups\n./manifests\n./patches\n"
	if r.stdout != want {
		t.Errorf("the sandbox of %s shows, of /etc/kubernetes:\n%s\nwant:\n%s", name, r.stdout, want)
	}
}

// startUnitAgent starts node name's agent as the unit does.
func (d *docCluster) startUnitAgent(t *testing.T, name string) *agentProcess {
	t.Helper()
	return d.runAgent(t, name, d.unitAgent(t, name, d.kubeconfigOf(t, name)))
}

func docOwnServer(t *testing.T, d *docCluster) {
	n := d.node(t, "cp-1")
	own := fmt.Sprintf("https://%s:%d", n.Address, n.BindPort)
	cfg, err := clientcmd.LoadFromFile(d.kubeconfigOf(t, "cp-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = own
	}
	path := filepath.Join(d.dir, "cp-1-own-server.conf")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	cmd := d.unitAgent(t, "cp-1", path)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := runCmd(t, exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...))
	wantExit(t, r, 4)
	wantStderr(t, r, "error: the kubeconfig's server "+own+" is node cp-1's own API server", "and the control plane has 3 nodes",
		"give the agent a kubeconfig whose server is the controlPlaneEndpoint")
	if _, err := d.client.CoordinationV1().Leases("kube-system").Get(context.Background(), nodestate.LeaseName("cp-1"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused agent left a Lease: %v", err)
	}
}

func docRollout(t *testing.T, d *docCluster) {
	d.wantSandboxed(t, "cp-1")
	for _, name := range d.names() {
		d.startUnitAgent(t, name)
	}
	d.wantNodes(t, nodestate.SyncYes, "")
	r := d.plugin(t, 8*time.Minute, "patch", "--no-backup", "--set", "apiServer.extraArgs.audit-log-maxage=9", "--rollout", "--wait")
	wantEnded(t, r, 0)
	wantEveryNode(t, d.current(t).Status, rollout.NodeUpdated)
	d.wantAPIServerFlag(t, "--audit-log-maxage=9")
	for _, name := range d.names() {
		backups, err := os.ReadDir(filepath.Join(d.etc(t, name), "kubeadmcfg", "backups"))
		if err != nil || len(backups) == 0 {
			t.Errorf("%s: no backup in /etc/kubernetes/kubeadmcfg/backups after its turn: %v", name, err)
		}
		if log := d.agents[name].stderrString(); strings.Contains(log, "forbidden") || strings.Contains(log, "warning") {
			t.Errorf("the agent of %s warned:\n%s", name, log)
		}
	}
	d.wantOneAtATime(t)
}

// renewalService is the command line of the timer's service,
// deploy/kubeadmcfg-agent-kubeconfig.service, without the installed script's
// path.
func (d *docCluster) renewalService(t *testing.T) []string {
	t.Helper()
	u, err := unitfile.Read(filepath.Join(d.repo, "deploy", "kubeadmcfg-agent-kubeconfig.service"))
	if err != nil {
		t.Fatal(err)
	}
	start, _ := u.Value("Service", "ExecStart")
	_, argv := unitfile.Command(start)
	if argv[0] != "/usr/local/sbin/kubeadmcfg-agent-kubeconfig" {
		t.Fatalf("the renewal runs %s, not the installed kubeadmcfg-agent-kubeconfig", argv[0])
	}
	if timer := readString(t, filepath.Join(d.repo, "deploy", "kubeadmcfg-agent-kubeconfig.timer")); !strings.Contains(timer, "\nOnCalendar=daily\n") {
		t.Fatal("the renewal's timer does not run it daily")
	}
	return argv[1:]
}

func docRenewal(t *testing.T, d *docCluster) {
	const node = "cp-2"
	service := d.renewalService(t)
	path := d.kubeconfigOf(t, node)
	before := readString(t, path)

	r := d.recipe(t, node, service...)
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "more than 30 days: not renewed") || readString(t, path) != before || d.systemctlCalls(t, node) != "" {
		t.Fatalf("a year-long certificate was renewed: %s (systemctl %q)", r, d.systemctlCalls(t, node))
	}

	// A certificate with 10 days left, made as the recipe makes it: from
	// the cluster's ClusterConfiguration and the node's InitConfiguration.
	config := filepath.Join(d.node(t, node).Root, "tmp", "short.yaml")
	if err := os.WriteFile(config, []byte(d.node(t, node).ConfigFile(d.liveDocument(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	short, err := exec.Command(d.Bins.Kubeadm, "kubeconfig", "user", "--rootfs", d.node(t, node).Root, "--config", "/tmp/short.yaml",
		"--client-name", "kubeadmcfg-agent:"+node, "--org", "kubeadmcfg:agents", "--validity-period", "240h").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, short, 0o600); err != nil {
		t.Fatal(err)
	}
	_, old := agentCertificate(t, path)

	// A turn, or a reconfigure, holds the manifests directory: nothing is
	// written, nothing restarted.
	lock, err := os.OpenFile(filepath.Join(d.node(t, node).ManifestsDir, ".kubeadmcfg-reconfigure.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	r = d.recipe(t, node, service...)
	_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	_ = lock.Close()
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "a turn, an upgrade step or a reconfigure holds") || !bytes.Equal([]byte(readString(t, path)), short) || d.systemctlCalls(t, node) != "" {
		t.Fatalf("renewed during a turn: %s (systemctl %q)", r, d.systemctlCalls(t, node))
	}

	r = d.recipe(t, node, service...)
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "and restarted kubeadmcfg-agent.service") {
		t.Errorf("the renewal said %s", r)
	}
	if got := d.systemctlCalls(t, node); got != "try-restart kubeadmcfg-agent.service\n" {
		t.Errorf("the renewal ran systemctl %q, want try-restart kubeadmcfg-agent.service once", got)
	}
	server, renewed := agentCertificate(t, path)
	if renewed.SerialNumber.Cmp(old.SerialNumber) == 0 || time.Until(renewed.NotAfter) < 300*24*time.Hour ||
		server != "https://"+testcluster.LocalEndpoint || renewed.Subject.CommonName != "kubeadmcfg-agent:"+node {
		t.Errorf("the renewed certificate: serial %s (was %s), for %s, until %s, server %s", renewed.SerialNumber, old.SerialNumber,
			renewed.Subject, renewed.NotAfter, server)
	}
	// The restart systemd would make: the agent stops cleanly, and the
	// new one works with the new certificate.
	if r := d.kill(t, node, syscall.SIGTERM); r.code != 0 {
		t.Fatalf("the agent of %s did not stop cleanly: %s", node, r)
	}
	d.startUnitAgent(t, node)
	d.wantNodes(t, nodestate.SyncYes, "")
}

func docBeyondRollback(t *testing.T, d *docCluster) {
	patch := startProcess(t, exec.Command("kubectl", "kubeadmcfg", "patch", "--no-backup", "--set", "apiServer.extraArgs.no-such-flag=1",
		"--rollout", "--nodes", "cp-0", "--wait", "--kubeconfig", d.Kubeconfig))
	// The record does not exist until the patch starts the rollout.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cm, err := d.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), rollout.DefaultConfigMap, metav1.GetOptions{})
		if err == nil {
			if r, err := rollout.FromConfigMap(cm); err == nil && r.Status != nil && r.Status.Phase.Active() &&
				len(r.Status.Nodes) == 1 && r.Status.Nodes[0].Phase == rollout.NodeInProgress {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("cp-0 is not in progress 2 minutes after the patch:\n%s", d.agents["cp-0"].stderrString())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Neither manifest can start any more: the serving certificate is gone.
	pki := filepath.Join(d.etc(t, "cp-0"), "pki")
	if err := os.Rename(filepath.Join(pki, "apiserver.crt"), filepath.Join(pki, "apiserver.crt.gone")); err != nil {
		t.Fatal(err)
	}
	broken := time.Now()
	r := patch.wait(t, docAgentWait+time.Minute)
	t.Logf("--wait ended %s after cp-0 was broken", time.Since(broken).Round(time.Second))
	wantEnded(t, r, 9)
	wantStderr(t, r, "failed: node cp-0 failed and so did its rollback, a component of it may be down")
	r = d.plugin(t, time.Minute, "rollout", "status")
	wantExit(t, r, 0)
	found := false
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "cp-0" && f[1] == string(rollout.NodeRollbackFailed) {
			found = true
		}
	}
	if !found {
		t.Errorf("rollout status does not show cp-0 RollbackFailed:\n%s", r.stdout)
	}
}

// unitStart runs unit u's ExecStartPre lines, as systemd runs them before
// its ExecStart, and returns ExecStart's command line; subst maps the
// node's paths in each to the test's.
func unitStart(t *testing.T, u *unitfile.Unit, subst func([]string) []string) []string {
	t.Helper()
	for _, pre := range u.Values("Service", "ExecStartPre") {
		_, argv := unitfile.Command(pre)
		argv = subst(argv)
		wantExit(t, run(t, argv[0], argv[1:]...), 0)
	}
	start, _ := u.Value("Service", "ExecStart")
	_, argv := unitfile.Command(start)
	return subst(argv)
}
