// Package e2e drives the built plugin through the real kubectl against a real
// etcd and kube-apiserver started on loopback. One control plane serves the
// whole package; each test gets its own namespace and kubeadm-config.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// suite is the state TestMain sets up for every test in the package.
type suite struct {
	cluster   *testcluster.Cluster
	admin     kubernetes.Interface
	binDir    string
	seedDoc   string // the ClusterConfiguration kubeadm uploaded
	namespace atomic.Int64
}

var s suite // set once by TestMain, read-only afterwards

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if testcluster.InTestNetns() {
		// Re-executed by a test inside its own network namespace: that test
		// starts what it needs; PATH, HOME and the backup directory are the
		// parent's.
		return m.Run()
	}
	required := os.Getenv("KUBEADMCFG_E2E") == "required"
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	if !required && testing.Short() {
		fmt.Println("e2e: skipped with -short (make test runs it)")
		return 0
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		return fail(errors.New("kubectl must be on PATH for the e2e suite"))
	}
	root, err := testcluster.RepoRoot()
	if err != nil {
		return fail(err)
	}
	tmp, err := os.MkdirTemp("", "kubeadmcfg-e2e-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	s.binDir = filepath.Join(tmp, "bin")
	// The plugin, and hack/localcluster for the tests that start a control
	// plane of several nodes with it (built, as `go run` would report
	// every exit code as 1). Built here, before HOME changes and with it
	// the build cache.
	for name, pkg := range map[string]string{"kubectl-kubeadmcfg": "./cmd/kubectl-kubeadmcfg", "localcluster": "./hack/localcluster"} {
		build := exec.Command("go", "build", "-o", filepath.Join(s.binDir, name), pkg)
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fail(fmt.Errorf("build %s: %w", pkg, err))
		}
	}
	// The completion helper is installed beside the binary, as make install does.
	helper, err := os.ReadFile(filepath.Join(root, "kubectl_complete-kubeadmcfg"))
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(s.binDir, "kubectl_complete-kubeadmcfg"), helper, 0o755); err != nil {
		return fail(err)
	}
	os.Setenv("PATH", s.binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	// The plugin must never pick up the developer's own cluster or backups.
	os.Setenv("KUBECONFIG", filepath.Join(tmp, "no-kubeconfig"))
	os.Setenv("HOME", tmp)
	os.Setenv("KUBEADMCFG_BACKUP_DIR", filepath.Join(tmp, "backups"))

	bins, err := testcluster.FindBinaries()
	if err != nil {
		return fail(err)
	}
	// The tests with clusters of their own need nothing of the shared
	// one, but what FindBinaries leaves: hack/testbin.sh, run again in
	// each of their namespaces, which no network reaches, reads the
	// versions from the module cache that this first run filled in HOME.
	startOwnNetns()
	defer stopOwnNetns()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := testcluster.Start(ctx, bins, testcluster.Options{Dir: filepath.Join(tmp, "cluster")})
	if err != nil {
		return fail(err)
	}
	defer c.Stop()
	s.cluster = c
	if s.admin, err = c.Clientset(); err != nil {
		return fail(err)
	}
	if s.seedDoc, err = c.SeedKubeadm(ctx, ""); err != nil {
		return fail(err)
	}
	return m.Run()
}

// env is one test's view of the cluster: its own namespace holding its own
// kubeadm-config seeded from the document kubeadm uploaded.
type env struct {
	t  *testing.T
	ns string
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, map[string]string{"ClusterConfiguration": s.seedDoc})
}

func newEnvWith(t *testing.T, data map[string]string) *env {
	t.Helper()
	name := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	ns := fmt.Sprintf("%s-%d", name, s.namespace.Add(1))
	if _, err := s.cluster.PutConfigMap(context.Background(), ns, "kubeadm-config", data); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	return &env{t: t, ns: ns}
}

// result is what one process run produced.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// kubectl runs the real kubectl with the admin context and the test's namespace.
func (e *env) kubectl(args ...string) result {
	e.t.Helper()
	return e.kubectlAs(testcluster.AdminContext, args...)
}

func (e *env) kubectlAs(contextName string, args ...string) result {
	e.t.Helper()
	return run(e.t, "kubectl", e.withConnection(contextName, args)...)
}

// withConnection adds the connection flags to kubectl's arguments. kubectl
// refuses flags before a plugin's name, so they go last, or before a "--"
// that ends the plugin's own flags (upgrade-run's command follows it).
func (e *env) withConnection(contextName string, args []string) []string {
	return beforeDash(args, "--kubeconfig", s.cluster.Kubeconfig, "--context", contextName, "-n", e.ns)
}

// beforeDash adds flags to args, at the end or before a "--".
func beforeDash(args []string, flags ...string) []string {
	dash := slices.Index(args, "--")
	if dash < 0 {
		dash = len(args)
	}
	return slices.Concat(args[:dash], flags, args[dash:])
}

// plugin runs `kubectl kubeadmcfg ARGS` as the admin in the test's namespace.
func (e *env) plugin(args ...string) result {
	e.t.Helper()
	return e.kubectl(append([]string{"kubeadmcfg"}, args...)...)
}

func run(t *testing.T, name string, args ...string) result {
	t.Helper()
	return runLong(t, 2*time.Minute, name, args...)
}

// runLong is run with another time budget (a reconfiguration waits for
// components to restart).
func runLong(t *testing.T, timeout time.Duration, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return runCmd(t, exec.CommandContext(ctx, name, args...))
}

// runCmd runs a prepared command and collects what it printed and its exit
// code; a command that cannot run fails the test.
func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s: %v", cmd.Path, err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// configMap reads the test's kubeadm-config with the admin client.
func (e *env) configMapRV() string {
	e.t.Helper()
	cm, err := s.admin.CoreV1().ConfigMaps(e.ns).Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return cm.ResourceVersion
}

// wantExit fails the test unless r exited with code and, when failing, wrote
// exactly one line to stderr.
func wantExit(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %s", code, r)
	}
	if code != 0 {
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if len(lines) > 2 || !strings.HasPrefix(lines[len(lines)-1], "error: ") {
			t.Fatalf("want one error line on stderr, got %s", r)
		}
	}
}

// storm runs writers at once, each applying patches one after another with
// patch(arg), where arg is <prefix>-w<W>-p<P> and each patch must append arg
// to a list (apiServer.certSANs[+], see appendSAN). Every patch must exit 0
// and leave arg in the document exactly once: an append applied twice shows
// as two, a lost one as none. It returns the results.
func (e *env) storm(prefix string, writers, patches int, patch func(arg string) result) []result {
	e.t.Helper()
	var all []result
	doc := ""
	for _, o := range e.concurrently(prefix, writers, patches, func(arg string, _ int) result { return patch(arg) }) {
		if o.r.code != 0 {
			e.t.Errorf("%s: %s", o.arg, o.r)
		}
		if doc == "" {
			doc = e.document()
		}
		if n := countSAN(doc, o.arg); n != 1 {
			e.t.Errorf("%s is in the document %d times, want once (a lost update)", o.arg, n)
		}
		all = append(all, o.r)
	}
	return all
}

// written is one patch of a concurrent run: its argument, its result, and
// when it ran.
type written struct {
	arg        string
	r          result
	start, end time.Time
}

// concurrently runs writers at once, each making patches one after another
// with patch(arg, p), where arg is <prefix>-w<W>-p<P>, and returns every
// outcome once all are done.
func (e *env) concurrently(prefix string, writers, patches int, patch func(arg string, p int) result) []written {
	e.t.Helper()
	var mu sync.Mutex
	var all []written
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range patches {
				arg := fmt.Sprintf("%s-w%d-p%d", prefix, w, p)
				start := time.Now()
				r := patch(arg, p)
				mu.Lock()
				all = append(all, written{arg, r, start, time.Now()})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return all
}

// appendSAN is the --set that appends san to apiServer.certSANs: not
// idempotent, so applying it twice leaves two copies.
func appendSAN(san string) string { return "apiServer.certSANs[+]=" + san }

// countSAN counts san in the document's lists.
func countSAN(doc, san string) int { return strings.Count(doc, "- "+san+"\n") }
