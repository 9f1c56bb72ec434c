package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testNode is a node whose root is a temporary directory, with the
// harness's directories, for the scripts noderoot.go writes.
func testNode(t *testing.T) *Node {
	t.Helper()
	root := t.TempDir()
	n := &Node{NodeSpec: NodeSpec{Name: "cp-1"}, Root: root, FaultsDir: filepath.Join(root, harnessDir, "faults")}
	for _, d := range []string{n.FaultsDir, filepath.Join(root, harnessDir, "kubelet"), filepath.Join(root, "var", "lib", "kubelet")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// fakeKubeadm is a kubeadm that writes its arguments, one a line, and PATH
// to file, and exits with code.
func fakeKubeadm(t *testing.T, file string, code int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeadm")
	script := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' \"$@\" >%q\necho \"PATH=$PATH\" >>%q\nexit %d\n", file, file, code)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func runScript(t *testing.T, path string, env []string, args ...string) (stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	var buf bytes.Buffer
	cmd.Stderr = &buf
	err := cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return buf.String(), exitErr.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.String(), 0
}

// The node's kubeadm runs the release's kubeadm in the node's root, and
// passes a path under the root, alone or as a flag's value, as the path
// inside it; nothing else changes.
func TestKubeadmWrapperMapsPathsIntoTheRoot(t *testing.T) {
	n := testNode(t)
	got := filepath.Join(t.TempDir(), "args")
	wrapper := filepath.Join(t.TempDir(), "kubeadm")
	if err := os.WriteFile(wrapper, []byte(kubeadmWrapper(n, Release{Version: "v1.37.2", Kubeadm: fakeKubeadm(t, got, 0)})), 0o755); err != nil {
		t.Fatal(err)
	}
	stderr, code := runScript(t, wrapper, nil, "upgrade", "node", "phase", "control-plane",
		"--config", n.Root+"/etc/kubernetes/tmp/upgrade.yaml", "--patches="+n.Root+"/etc/kubernetes/patches",
		"--kubeconfig", "/etc/kubernetes/admin.conf", n.Root+"x/not-under-the-root", "it's")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := []string{"--rootfs", n.Root, "upgrade", "node", "phase", "control-plane",
		"--config", "/etc/kubernetes/tmp/upgrade.yaml", "--patches=/etc/kubernetes/patches",
		"--kubeconfig", "/etc/kubernetes/admin.conf", n.Root + "x/not-under-the-root", "it's",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(readFile(t, got), "\n"), "\n")); diff != "" {
		t.Errorf("kubeadm's arguments (-want +got):\n%s", diff)
	}
}

// The kubelet-config fault fails that phase after kubeadm ran (and wrote
// config.yaml), leaves the other phases alone, refuses a whole upgrade,
// and is gone with its file; kubeadm's own failure is passed on.
func TestKubeadmWrapperKubeletConfigFault(t *testing.T) {
	const phase = "upgrade node phase kubelet-config"
	for _, tc := range []struct {
		name       string
		fault      *string // the fault file's content; nil for no file
		kubeadmErr int
		args       string
		code       int
		ran        bool
		stderr     string
	}{
		{"no fault", nil, 0, phase, 0, true, ""},
		{"the phase fails after kubeadm ran", ptr("disk full\n"), 0, phase, 1, true, "error: disk full"},
		{"an empty file", ptr(""), 0, "upgrade apply phase kubelet-config", 1, true,
			"kubelet-config failed after it wrote /var/lib/kubelet/config.yaml (the harness's fault"},
		{"another phase runs", ptr("disk full\n"), 0, "upgrade apply phase control-plane", 0, true, ""},
		{"a whole upgrade is refused", ptr("disk full\n"), 0, "upgrade node", 1, false, "fails only 'kubeadm upgrade apply|node phase kubelet-config'"},
		{"kubeadm's own failure", ptr("disk full\n"), 3, phase, 3, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode(t)
			args := strings.Fields(tc.args)
			if tc.fault != nil {
				if err := os.WriteFile(filepath.Join(n.FaultsDir, FaultKubeletConfig), []byte(*tc.fault), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ran := filepath.Join(t.TempDir(), "args")
			wrapper := filepath.Join(t.TempDir(), "kubeadm")
			if err := os.WriteFile(wrapper, []byte(kubeadmWrapper(n, Release{Version: "v1.37.2", Kubeadm: fakeKubeadm(t, ran, tc.kubeadmErr)})), 0o755); err != nil {
				t.Fatal(err)
			}
			stderr, code := runScript(t, wrapper, nil, args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("want exit %d and %q on stderr, got exit %d: %q", tc.code, tc.stderr, code, stderr)
			}
			if _, err := os.Stat(ran); (err == nil) != tc.ran {
				t.Errorf("kubeadm ran: %v, want %v", err == nil, tc.ran)
			}
		})
	}
}

// The kubelet restart command asks the node's kubelet stand-in to restart
// as the version it installs, and returns once it has: the stand-in then
// reports that version and serves /healthz where config.yaml says. The
// fault file, and a version the harness has no kubelet of, fail it before
// it asks.
func TestKubeletRestart(t *testing.T) {
	n := testNode(t)
	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	writeConfig := func(port int) {
		t.Helper()
		cfg := fmt.Sprintf("kind: KubeletConfiguration\nhealthzBindAddress: 127.0.0.1\nhealthzPort: %d\n", port)
		if err := os.WriteFile(filepath.Join(n.Root, "var", "lib", "kubelet", "config.yaml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig(ports[0])
	r := &Runner{opts: RunnerOptions{Node: n.Name, Root: n.Root, Log: t.Logf}}
	r.startKubelet("v1.36.3")
	defer r.stopKubelet()
	wantHealthz(t, ports[0], true)
	// The runner's status loop, which takes the requests; the test reads
	// the state it owns once it stopped.
	serve := func() (stop func()) {
		quit, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-quit:
					return
				case <-time.After(50 * time.Millisecond):
					r.syncKubelet()
				}
			}
		}()
		return func() { close(quit); <-done }
	}
	stop := serve()

	restart := filepath.Join(t.TempDir(), "kubelet-restart")
	if err := os.WriteFile(restart, []byte(kubeletRestartScript(n, []Release{{Version: "v1.37.2"}, {Version: "v1.36.3"}})), 0o755); err != nil {
		t.Fatal(err)
	}
	version := func(v string) []string { return []string{"KUBEADMCFG_KUBELET_VERSION=" + v} }

	if stderr, code := runScript(t, restart, version("v1.38.0")); code != 1 || !strings.Contains(stderr, "no kubelet package of version 'v1.38.0'") {
		t.Errorf("an unknown version: want exit 1 naming it, got %d: %q", code, stderr)
	}
	fault := filepath.Join(n.FaultsDir, FaultKubeletRestart)
	if err := os.WriteFile(fault, []byte("dpkg lock held\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if stderr, code := runScript(t, restart, version("v1.37.2")); code != 1 || !strings.Contains(stderr, "dpkg lock held") {
		t.Errorf("with the fault: want exit 1 with its content, got %d: %q", code, stderr)
	}
	time.Sleep(200 * time.Millisecond) // the loop would have taken a request by now
	if _, err := os.Stat(filepath.Join(n.Root, harnessDir, "kubelet", "restart")); err == nil {
		t.Errorf("a failed restart command asked for a restart")
	}
	if err := os.Remove(fault); err != nil {
		t.Fatal(err)
	}

	// config.yaml moved the healthz port, as kubeadm's kubelet-config phase
	// may: the restarted kubelet serves there.
	writeConfig(ports[1])
	stderr, code := runScript(t, restart, version("v1.37.2"))
	if code != 0 || !strings.Contains(stderr, "cp-1: restarted as kubelet v1.37.2") {
		t.Fatalf("want exit 0, restarted, got %d: %q", code, stderr)
	}
	stop()
	if r.kubelet.version != "v1.37.2" || r.kubelet.down != "" {
		t.Errorf("the kubelet runs as %q (down: %q), want v1.37.2", r.kubelet.version, r.kubelet.down)
	}
	wantHealthz(t, ports[0], false)
	wantHealthz(t, ports[1], true)

	// A config.yaml it cannot read: the command returns, the kubelet is
	// down (no /healthz), as a kubelet that exits at start.
	if err := os.WriteFile(filepath.Join(n.Root, "var", "lib", "kubelet", "config.yaml"), []byte("healthzPort: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stop = serve()
	stderr, code = runScript(t, restart, version("v1.37.2"))
	if code != 0 || !strings.Contains(stderr, "started kubelet v1.37.2, which exited") {
		t.Errorf("want exit 0 and the kubelet exited, got %d: %q", code, stderr)
	}
	stop()
	if r.kubelet.down == "" {
		t.Errorf("the kubelet runs with a config.yaml it cannot read")
	}
	wantHealthz(t, ports[1], false)
}

func wantHealthz(t *testing.T, port int, up bool) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	if err == nil {
		_ = resp.Body.Close()
	}
	if got := err == nil && resp.StatusCode == http.StatusOK; got != up {
		t.Errorf("/healthz on port %d answers: %v, want %v (%v)", port, got, up, err)
	}
}

func ptr(s string) *string { return &s }

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
