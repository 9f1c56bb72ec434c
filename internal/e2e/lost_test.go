package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// The tests in this file put a fault-injecting proxy between the plugin and
// the API server: it forwards a write, lets it commit, and drops the
// connection instead of relaying the answer (or drops the write before it
// reaches the server). Every edit is an append, which a second application
// would reveal.

func startProxy(t *testing.T) *testcluster.FaultProxy {
	t.Helper()
	p, err := s.cluster.StartFaultProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// pluginVia runs `kubectl kubeadmcfg ARGS` as the admin through kubeconfig.
func (e *env) pluginVia(kubeconfig string, args ...string) result {
	e.t.Helper()
	full := append(append([]string{"kubeadmcfg"}, args...), "--kubeconfig", kubeconfig, "--context", testcluster.AdminContext, "-n", e.ns)
	return run(e.t, "kubectl", full...)
}

var writeIDPattern = regexp.MustCompile(`\(write id ([0-9a-f]+)\)`)

// lostIDs returns the write ids of the writes whose answer the proxy lost,
// and of those the server had committed.
func lostIDs(p *testcluster.FaultProxy) (lost, landed map[string]bool) {
	lost, landed = map[string]bool{}, map[string]bool{}
	for _, l := range p.Lost() {
		lost[l.WriteID] = true
		if l.Landed {
			landed[l.WriteID] = true
		}
	}
	return lost, landed
}

// TestLostAnswersAreNeverAppliedTwice: writers append concurrently through
// a proxy that loses the answer to 30% of writes after the commit and 10%
// before it. Every append that exited 0 is present exactly once, none twice,
// every absent one exited non-zero, and exit 7 comes only from a command
// whose write the proxy really lost.
func TestLostAnswersAreNeverAppliedTwice(t *testing.T) {
	e := newEnv(t)
	p := startProxy(t)
	p.SetFaults(testcluster.Faults{LoseAnswer: 0.3, LoseRequest: 0.1})
	const writers, patches = 6, 6
	outcomes := e.concurrently("lost", writers, patches, func(san string, i int) result {
		args := []string{"patch", "--no-backup", "--timeout", "60s", "--set", appendSAN(san)}
		if i%2 == 1 { // the same append as a JSON patch
			args = []string{"patch", "--no-backup", "--timeout", "60s", "--type", "json",
				"-p", fmt.Sprintf(`[{"op":"add","path":"/apiServer/certSANs/-","value":%q}]`, san)}
		}
		return e.pluginVia(p.Kubeconfig, args...)
	})
	p.SetFaults(testcluster.Faults{})

	lost, landed := lostIDs(p)
	if len(landed) == 0 {
		t.Fatal("no committed write lost its answer: nothing was tested")
	}
	doc := e.document()
	codes := map[int]int{}
	for _, o := range outcomes {
		n := countSAN(doc, o.arg)
		codes[o.r.code]++
		switch {
		case n > 1:
			t.Errorf("%s is present %d times: applied more than once (%s)", o.arg, n, o.r)
		case o.r.code == 0 && n != 1:
			t.Errorf("%s exited 0 but is missing", o.arg)
		case o.r.code == 7:
			m := writeIDPattern.FindStringSubmatch(o.r.stderr)
			if m == nil || !lost[m[1]] {
				t.Errorf("%s exited 7 but no write of it was lost: %s", o.arg, o.r)
			}
		case o.r.code != 0 && n > 0:
			t.Errorf("%s exited %d, saying it failed, but is present: %s", o.arg, o.r.code, o.r)
		case o.r.code != 0:
			t.Errorf("%s failed: %s", o.arg, o.r)
		}
	}
	t.Logf("%d writes lost their answer, %d of them after the commit; exit codes %v", len(lost), len(landed), codes)
	e.wantKubeadmAccepts()
}

// TestUnknownOutcomeExits7: the answer to a write is lost and the server is
// gone afterwards until --timeout: the plugin cannot know whether the write
// landed, and says so with exit 7, naming the write id, instead of "nothing
// was written" (exit 4), which would make a script apply the edit twice.
func TestUnknownOutcomeExits7(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults testcluster.Faults
	}{
		{"committed", testcluster.Faults{LoseAnswer: 1}},
		{"never arrived", testcluster.Faults{LoseRequest: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			p := startProxy(t)
			p.SetFaults(tc.faults)
			go func() {
				for len(p.Lost()) == 0 {
					time.Sleep(time.Millisecond)
				}
				p.SetFaults(testcluster.Faults{Blackout: true})
			}()
			san := "unknown-" + strings.ReplaceAll(tc.name, " ", "-")
			r := e.pluginVia(p.Kubeconfig, "patch", "--no-backup", "--timeout", "3s", "--set", appendSAN(san))
			wantExit(t, r, 7)
			if !strings.Contains(r.stderr, "the outcome of the last write is unknown") || !strings.Contains(r.stderr, "kubectl kubeadmcfg get") {
				t.Fatalf("stderr does not say the outcome is unknown and what to do: %s", r)
			}
			m := writeIDPattern.FindStringSubmatch(r.stderr)
			lost, landed := lostIDs(p)
			if m == nil || !lost[m[1]] {
				t.Fatalf("exit 7 names no write the proxy lost: %s", r)
			}
			if n, want := countSAN(e.document(), san), landed[m[1]]; (n == 1) != want || n > 1 {
				t.Fatalf("%s is present %d times; the proxy says the write landed: %v", san, n, want)
			}
		})
	}
}

// TestLostDeleteAnswer: upgrade-delete whose DELETE committed but whose
// answer was lost recognises the deletion (the first change after the copy
// it checked) and exits 0, not 5.
func TestLostDeleteAnswer(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	p := startProxy(t)
	p.SetFaults(testcluster.Faults{LoseAnswer: 1})
	r := e.pluginVia(p.Kubeconfig, "upgrade-delete", "--force")
	wantExit(t, r, 0)
	if len(p.Lost()) == 0 {
		t.Fatal("the proxy lost no answer: nothing was tested")
	}
	_, err := s.admin.CoreV1().ConfigMaps(e.ns).Get(context.Background(), "kubeadmcfg-upgrade", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the state is still there: %v", err)
	}
}

// TestErrorPagesWithoutStatusMapToExitCodes: a proxy in front of the API
// server answers with HTML pages, not Kubernetes Status objects. The exit
// code follows the HTTP status (401/403 -> 6, 404 -> 5) at once, instead of
// retrying until --timeout and ending in 4; a 503 page is retried.
func TestErrorPagesWithoutStatusMapToExitCodes(t *testing.T) {
	e := newEnv(t)
	p := startProxy(t)
	for _, tc := range []struct{ status, want int }{{401, 6}, {403, 6}, {404, 5}, {503, 4}} {
		p.SetFaults(testcluster.Faults{HTMLStatus: tc.status})
		for _, args := range [][]string{
			{"get", "--timeout", "3s"},
			{"patch", "--no-backup", "--timeout", "3s", "--set", appendSAN("html")},
		} {
			r := e.pluginVia(p.Kubeconfig, args...)
			if r.code != tc.want {
				t.Errorf("HTML %d, %s: want exit %d, got %s", tc.status, args[0], tc.want, r)
			}
		}
	}
	p.SetFaults(testcluster.Faults{})
	if n := countSAN(e.document(), "html"); n != 0 {
		t.Fatalf("a refused patch wrote %d times", n)
	}
}

// TestUnreachableServerExits1: a server that accepts connections but never
// completes the TLS handshake, and a closed port: the API server cannot be
// reached, exit 1 as the README says, not 4.
func TestUnreachableServerExits1(t *testing.T) {
	e := newEnv(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	for _, addr := range []string{silent.Addr().String(), closedAddr} {
		kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
		data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: admin, context: {cluster: c, user: u}}]
current-context: admin
`, addr)
		if err := os.WriteFile(kubeconfig, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"get", "--timeout", "2s"}, {"patch", "--timeout", "2s", "--no-backup", "--set", appendSAN("x")}} {
			r := e.pluginVia(kubeconfig, args...)
			wantExit(t, r, 1)
			if !strings.Contains(r.stderr, "cannot reach the API server") {
				t.Errorf("%s via %s: %s", args[0], addr, r)
			}
		}
	}
}
