package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// hack/localcluster run, built, as a user or a test of the rollout runs it:
// it starts the local control plane in namespaces of its own (this test
// needs none), runs a command there with the cluster's variables, and
// leaves nothing running once it is done. TestMain builds it: `go run`
// would report every exit code as 1.

func TestLocalClusterRun(t *testing.T) {
	inOwnCluster(t) // its clusters run in namespaces of their own
	tool := filepath.Join(s.binDir, "localcluster")

	t.Run("bad command lines are refused with exit 2, before anything starts", func(t *testing.T) {
		bins, err := testcluster.FindBinaries()
		if err != nil {
			t.Fatal(err)
		}
		foreign := t.TempDir()
		if err := os.WriteFile(filepath.Join(foreign, "precious"), []byte("keep me"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"four nodes", []string{"--nodes", "4"}, "--nodes must be between 1 and 3, not 4"},
			{"no node", []string{"--nodes", "0"}, "--nodes must be between 1 and 3, not 0"},
			{"a directory run did not fill", []string{"--dir", foreign}, "is not empty and holds no earlier run"},
			{"a release the harness has not built", []string{"--kubernetes-version", "v1.35.0"},
				fmt.Sprintf(`--kubernetes-version must be %s or %s, not "v1.35.0"`, bins.Version, bins.Previous.Version)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "cluster")
				args := append([]string{"run", "--dir", dir}, tc.args...)
				r := runLong(t, time.Minute, tool, append(args, "--", "sh", "-c", "echo CMD RAN")...)
				if r.code != 2 {
					t.Fatalf("want exit 2, got %s", r)
				}
				lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
				if len(lines) != 1 || !strings.Contains(lines[0], tc.want) || !strings.Contains(lines[0], "usage: localcluster run") {
					t.Errorf("want one line with %q and the usage, got %s", tc.want, r)
				}
				if strings.Contains(r.stdout, "CMD RAN") {
					t.Errorf("the command ran")
				}
				if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s was created: %v", dir, err)
				}
			})
		}
		if data, err := os.ReadFile(filepath.Join(foreign, "precious")); err != nil || string(data) != "keep me" {
			t.Errorf("the foreign directory was touched: %q, %v", data, err)
		}
	})

	t.Run("three nodes, their variables, and CMD's exit code", func(t *testing.T) {
		dir := keptDir(t)
		out := filepath.Join(dir, "out")
		if err := os.Mkdir(out, 0o700); err != nil {
			t.Fatal(err)
		}
		// The script records what it sees, leaves a process behind, and
		// waits for the test to look at the running cluster from outside.
		script := `set -u
out="$1"
env > "$out/env"
kubectl get nodes -o name > "$out/nodes" 2>&1
for n in $LOCALCLUSTER_NODES; do
	printf '%s %s\n' "$n" "$(kubectl -n kube-system get pod "kube-apiserver-$n" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>&1)"
done > "$out/ready"
sh -c 'while :; do sleep 1; done' "$out/left-behind" &
touch "$out/started"
while [ ! -e "$out/finish" ]; do sleep 0.1; done
exit 3
`
		// External etcd, as testcluster.StartLocal runs it for the other
		// e2e tests; TestLocalClusterStackedEtcd checks a stacked one.
		cmd := exec.Command(tool, "run", "--nodes", "3", "--etcd", "external", "--dir", filepath.Join(dir, "cluster"), "--", "sh", "-c", script, "sh", out)
		// A variable of an enclosing run must not reach CMD.
		cmd.Env = append(os.Environ(), "LOCALCLUSTER_5_DIR=/stale")
		p := startProcess(t, cmd)
		p.waitFor(t, filepath.Join(out, "started"))
		t.Logf("a 3-node local control plane started in %s (run started -> CMD running)", time.Since(p.start).Round(100*time.Millisecond))

		wantLocalEnv(t, readEnv(t, filepath.Join(out, "env")), 3)
		if got, want := readString(t, filepath.Join(out, "nodes")), "node/cp-0\nnode/cp-1\nnode/cp-2\n"; got != want {
			t.Errorf("kubectl get nodes through KUBECONFIG: want %q, got %q", want, got)
		}
		if got, want := readString(t, filepath.Join(out, "ready")), "cp-0 True\ncp-1 True\ncp-2 True\n"; got != want {
			t.Errorf("kube-apiserver mirror Pods Ready: want %q, got %q", want, got)
		}
		// Seen from outside while it runs: every node's components, etcd
		// and the process left behind, all found by the directory they name.
		running := processesNaming(t, dir)
		for i := range 3 {
			for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
				if !anyLine(running, c, fmt.Sprintf("%s/cluster/cp-%d/", dir, i)) {
					t.Errorf("no %s of cp-%d among the running processes:\n%s", c, i, running)
				}
			}
		}
		if !anyLine(running, "etcd", dir+"/cluster/etcd") || !anyLine(running, "left-behind") {
			t.Errorf("etcd or the process left behind is not running:\n%s", running)
		}

		if err := os.WriteFile(filepath.Join(out, "finish"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		r := p.wait(t, 2*time.Minute)
		if r.code != 3 {
			t.Fatalf("want CMD's exit code 3, got %s", r)
		}
		if !strings.Contains(r.stderr, "process(es) the command left behind: sh") {
			t.Errorf("run does not say it stopped the process left behind: %s", r.stderr)
		}
		if left := processesNaming(t, dir); left != "" {
			t.Errorf("processes outlived run:\n%s", left)
		}
	})

	t.Run("SIGTERM while the cluster starts: CMD never runs", func(t *testing.T) {
		dir := keptDir(t)
		cluster := filepath.Join(dir, "cluster")
		p := startProcess(t, exec.Command(tool, "run", "--nodes", "1", "--dir", cluster, "--", "touch", filepath.Join(dir, "ran")))
		// Once the log names a node, etcd runs and kubeadm is at work.
		for !strings.Contains(readIfThere(filepath.Join(cluster, "localcluster.log")), "cp-0:") {
			select {
			case <-p.done:
				t.Fatalf("run ended before it started cp-0:\n%s", &p.stderr)
			case <-time.After(50 * time.Millisecond):
			}
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		r := p.wait(t, 2*time.Minute)
		if r.code != 143 || !strings.Contains(r.stderr, "SIGTERM: stopping the start") {
			t.Errorf("want exit 143, the start stopped, got %s", r)
		}
		if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
			t.Errorf("CMD ran")
		}
		if left := processesNaming(t, dir); left != "" {
			t.Errorf("processes outlived run:\n%s", left)
		}
	})

	t.Run("a CMD that does not exist: exit 127", func(t *testing.T) {
		dir := keptDir(t)
		r := runLong(t, 4*time.Minute, tool, "run", "--nodes", "1", "--dir", filepath.Join(dir, "cluster"), "--", filepath.Join(dir, "no-such-command"))
		if r.code != 127 || !strings.Contains(r.stderr, "cannot run "+filepath.Join(dir, "no-such-command")) {
			t.Errorf("want exit 127 naming the command, got %s", r)
		}
		if left := processesNaming(t, dir); left != "" {
			t.Errorf("processes outlived run:\n%s", left)
		}
	})

	// Each case starts one node: the signal paths are the same for three.
	for _, tc := range []struct {
		name   string
		script string // runs once the cluster is up; touches $1/started
		signal syscall.Signal
		code   int
		stderr string
	}{
		{"SIGINT to run reaches CMD, which dies of it", `touch "$1/started"; sleep 600`, syscall.SIGINT, 130, "SIGINT passed on to sh"},
		{"SIGTERM to run, ignored by CMD: killed after the grace", `trap "" TERM; touch "$1/started"; while :; do sleep 1; done`,
			syscall.SIGTERM, 137, "sh still runs 10s after the signal: killing it"},
		{"CMD killed", `touch "$1/started"; kill -9 $$`, 0, 137, "sh exited with code 137"},
		{"run itself SIGKILLed", `touch "$1/started"; sleep 600`, syscall.SIGKILL, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := keptDir(t)
			// $1 names a path in dir, so processesNaming finds CMD.
			cmd := exec.Command(tool, "run", "--nodes", "1", "--dir", filepath.Join(dir, "cluster"), "--", "sh", "-c", tc.script, "sh", dir+"/")
			p := startProcess(t, cmd)
			p.waitFor(t, filepath.Join(dir, "started"))
			if running := processesNaming(t, dir); !anyLine(running, "kube-apiserver", dir) {
				t.Fatalf("no kube-apiserver runs:\n%s", running)
			}
			if tc.signal != 0 {
				if err := p.cmd.Process.Signal(tc.signal); err != nil {
					t.Fatal(err)
				}
			}
			r := p.wait(t, 2*time.Minute)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("want exit %d and %q on stderr, got %s", tc.code, tc.stderr, r)
			}
			// Killed outright, run cannot wait for its namespace to empty;
			// the kernel empties it right after.
			deadline := time.Now().Add(10 * time.Second)
			left := processesNaming(t, dir)
			for left != "" && tc.signal == syscall.SIGKILL && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
				left = processesNaming(t, dir)
			}
			if left != "" {
				t.Errorf("processes outlived run:\n%s", left)
			}
		})
	}
}

// wantLocalEnv checks the variables run gave CMD for an n-node cluster.
func wantLocalEnv(t *testing.T, env map[string]string, n int) {
	t.Helper()
	bins, err := testcluster.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	if env["KUBEADM"] != bins.Kubeadm {
		t.Errorf("KUBEADM=%q, want %q", env["KUBEADM"], bins.Kubeadm)
	}
	if _, err := os.Stat(env["KUBECONFIG"]); err != nil {
		t.Errorf("KUBECONFIG: %v", err)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = "cp-" + strconv.Itoa(i)
	}
	if got, want := env["LOCALCLUSTER_NODES"], strings.Join(names, " "); got != want {
		t.Errorf("LOCALCLUSTER_NODES=%q, want %q", got, want)
	}
	if got := env["LOCALCLUSTER_KUBERNETES_VERSION"]; got != bins.Version {
		t.Errorf("LOCALCLUSTER_KUBERNETES_VERSION=%q, want %s", got, bins.Version)
	}
	for i := range n {
		v := func(name string) string { return env[fmt.Sprintf("LOCALCLUSTER_%d_%s", i, name)] }
		wantFile(t, filepath.Join(v("DIR"), "etc", "kubernetes", "pki", "ca.crt"))
		wantFile(t, filepath.Join(v("MANIFESTS"), "kube-apiserver.yaml"))
		if got, want := v("ADDRESS"), fmt.Sprintf("192.0.2.%d", 11+i); got != want {
			t.Errorf("node %d: ADDRESS=%q, want %q", i, got, want)
		}
		if got, want := v("BIND_PORT"), strconv.Itoa(6443+i); got != want {
			t.Errorf("node %d: BIND_PORT=%q, want %q", i, got, want)
		}
		// The node's kubeadm of each release, where a package installs it
		// in the node's root; its kubelet's restart, /healthz and faults.
		if want := filepath.Join(v("DIR"), "usr", "local", "kubernetes", "{version}", "bin", "kubeadm"); v("KUBEADM_TEMPLATE") != want {
			t.Errorf("node %d: KUBEADM_TEMPLATE=%q, want %q", i, v("KUBEADM_TEMPLATE"), want)
		}
		for _, r := range bins.Releases() {
			wantFile(t, strings.ReplaceAll(v("KUBEADM_TEMPLATE"), "{version}", r.Version))
		}
		wantFile(t, v("KUBELET_RESTART"))
		if info, err := os.Stat(v("FAULTS")); err != nil || !info.IsDir() {
			t.Errorf("node %d: FAULTS=%q is no directory: %v", i, v("FAULTS"), err)
		}
		if got, want := v("KUBELET_HEALTHZ"), fmt.Sprintf("http://127.0.0.1:%d/healthz", 10248+10*i); got != want {
			t.Errorf("node %d: KUBELET_HEALTHZ=%q, want %q", i, got, want)
		}
		// Only nodes with patches have a PATCHES, and it holds them.
		_, has := env[fmt.Sprintf("LOCALCLUSTER_%d_PATCHES", i)]
		if i == 0 && has {
			t.Errorf("node 0 has no patches, yet LOCALCLUSTER_0_PATCHES=%q", v("PATCHES"))
		}
		if i > 0 {
			wantFile(t, filepath.Join(v("PATCHES"), "kube-controller-manager+json.yaml"))
		}
	}
	for k, v := range env {
		if k == "LOCALCLUSTER_5_DIR" || k == testcluster.NetnsEnv || strings.HasPrefix(k, "LOCALCLUSTER_INTERNAL") {
			t.Errorf("CMD got %s=%s, which is run's own or an enclosing run's", k, v)
		}
	}
}
