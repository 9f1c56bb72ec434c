package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// pluginWithEnv runs `kubectl kubeadmcfg ARGS` as the admin with extra
// environment variables, and without GOTRACEBACK unless they set it.
func (e *env) pluginWithEnv(environ []string, args ...string) result {
	e.t.Helper()
	cmd := exec.Command("kubectl", e.withConnection(testcluster.AdminContext, append([]string{"kubeadmcfg"}, args...))...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOTRACEBACK=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, environ...)
	return runCmd(e.t, cmd)
}

// TestPanicIsAnInternalError: a panic, in the main goroutine, in a
// goroutine the plugin started (the queue's look at waiting writers) or in
// the watcher's (upgrade-status --watch), ends the process with exit 10 and
// one line on stderr, never with Go's exit 2, which is the usage code. The
// goroutine's stack is printed only when GOTRACEBACK asks for it, and shows
// where the goroutine was started. The panics come from the test hook
// KUBEADMCFG_TEST_PANIC_ON, in the request of the goroutine named.
func TestPanicIsAnInternalError(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	rv := e.configMapRV()
	panicOn := func(request string) string { return "KUBEADMCFG_TEST_PANIC_ON=" + request }
	configMap := "/api/v1/namespaces/" + e.ns + "/configmaps"
	leases := "/apis/coordination.k8s.io/v1/namespaces/" + e.ns + "/leases"
	for _, tc := range []struct {
		name    string
		request string
		args    []string
	}{
		{"main goroutine", "GET " + configMap + "/kubeadm-config", []string{"get"}},
		{"queue goroutine", "GET " + leases, []string{"patch", "--no-backup", "--set", "clusterName=panicked"}},
		{"watcher goroutine", "GET " + configMap, []string{"upgrade-status", "--watch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.pluginWithEnv([]string{panicOn(tc.request)}, tc.args...)
			want := "error: internal error: KUBEADMCFG_TEST_PANIC_ON asked to panic on " + tc.request
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			if r.code != 10 || len(lines) != 1 || !strings.HasPrefix(lines[0], want) || !strings.HasSuffix(lines[0], "; please report it") {
				t.Fatalf("want exit 10 and the one line %q...; please report it, got %s", want, r)
			}
		})
	}
	if e.configMapRV() != rv {
		t.Fatal("a command that panicked wrote")
	}

	r := e.pluginWithEnv([]string{panicOn("GET " + leases), "GOTRACEBACK=all"}, "patch", "--no-backup", "--set", "clusterName=panicked")
	if r.code != 10 || !strings.HasPrefix(r.stderr, "error: internal error: ") ||
		!strings.Contains(r.stderr, "\ngoroutine ") || !strings.Contains(r.stderr, "internal/crash.Go") {
		t.Fatalf("want exit 10, the line, then the stack of a goroutine started by crash.Go, got %s", r)
	}
	// A malformed value does nothing.
	wantExit(t, e.pluginWithEnv([]string{panicOn("get " + configMap + "/kubeadm-config")}, "get"), 0)
}
