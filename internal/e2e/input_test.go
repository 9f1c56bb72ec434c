package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// aliasBomb is YAML that expands through aliases, as the review built it:
// one anchored scalar of size bytes, aliased 100 times in a list, that list
// aliased 100 times. With 10000 bytes it is 11 KB of text and 100 MB of
// JSON. It is a ClusterConfiguration with one unknown field, which is
// where the expansion is.
func aliasBomb(size int) string {
	return "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\nbomb:\n" +
		"  a: &a \"" + strings.Repeat("x", size) + "\"\n" +
		"  b: &b [" + strings.TrimSuffix(strings.Repeat("*a, ", 100), ", ") + "]\n" +
		"  c: [" + strings.TrimSuffix(strings.Repeat("*b, ", 100), ", ") + "]\n"
}

// expansionRefused is how aliasBomb(size) is refused: by its alias *b,
// where the expansion passes 4 times the 87+size bytes of values the text
// holds, plus 1 MiB.
func expansionRefused(size int) string {
	own := 87 + size
	return fmt.Sprintf("YAML alias *b on line 7 expands the document to more than %d bytes of values, the limit for one that holds %d (4 times as many, plus 1 MiB); use fewer aliases, or write the values out in full", 4*own+1<<20, own)
}

// runBinary runs the built plugin itself, not through kubectl (whose own
// memory would count too), and returns its result and its peak resident
// set size in bytes.
func runBinary(t *testing.T, timeout time.Duration, stdin io.Reader, args ...string) (result, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.binDir, "kubectl-kubeadmcfg"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run the plugin: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%v did not end within %s", args, timeout)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024 // KiB on Linux
	return result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}, rss
}

// TestAliasBombIsRefused: 11 KB that expand to 100 MB are refused, by every
// verb that reads a file, with exit 3, the alias that passes the bound and
// its line, and no expansion: the process stays under 100 MiB (before the
// bound, validate -f took 967 MiB and 7 s).
func TestAliasBombIsRefused(t *testing.T) {
	e := newEnv(t)
	bomb := filepath.Join(t.TempDir(), "bomb.yaml")
	text := aliasBomb(10000)
	if err := os.WriteFile(bomb, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := len(text); n < 10<<10 || n > 12<<10 {
		t.Fatalf("the bomb is %d bytes, want about 11 KB", n)
	}
	connection := []string{"--kubeconfig", s.cluster.Kubeconfig, "--context", testcluster.AdminContext, "-n", e.ns}
	for _, tc := range []struct {
		name  string
		args  []string
		stdin bool
		want  string
	}{
		{"validate -f FILE", []string{"validate", "-f", bomb}, false, "document 1 (line 1): " + expansionRefused(10000)},
		{"validate -f - (stdin)", []string{"validate", "-f", "-"}, true, "document 1 (line 1): " + expansionRefused(10000)},
		{"patch --patch-file FILE", append([]string{"patch", "--patch-file", bomb}, connection...), false, "error: the patch cannot be used: " + expansionRefused(10000)},
		{"upgrade-plan show FILE", []string{"upgrade-plan", "show", bomb}, false, "error: " + bomb + ": the plan cannot be used: " + expansionRefused(10000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv := e.configMapRV()
			var stdin io.Reader
			if tc.stdin {
				stdin = strings.NewReader(text)
			}
			r, rss := runBinary(t, 2*time.Minute, stdin, tc.args...)
			wantExit(t, r, 3)
			wantIn(t, "the output", r.stdout+r.stderr, tc.want)
			t.Logf("max RSS %.1f MiB", float64(rss)/(1<<20))
			if rss >= 100<<20 {
				t.Errorf("max RSS %.1f MiB, want under 100 MiB: the aliases were expanded", float64(rss)/(1<<20))
			}
			if got := e.configMapRV(); got != rv {
				t.Errorf("resourceVersion %s -> %s: a refused input was written", rv, got)
			}
		})
	}
}

// TestOversizedInputIsRefused: files and stdin are read up to 2 MiB; past
// it the command ends at once with exit 3, /dev/zero included.
func TestOversizedInputIsRefused(t *testing.T) {
	dir := t.TempDir()
	// A valid ClusterConfiguration padded with a comment line to n bytes.
	padded := func(n int) string {
		doc := s.seedDoc + "#"
		return doc + strings.Repeat("x", n-len(doc)-1) + "\n"
	}
	exact := filepath.Join(dir, "2mib.yaml")
	if err := os.WriteFile(exact, []byte(padded(2<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	const tooLarge = " is larger than 2 MiB, the limit for any input (twice what a ConfigMap holds)\n"
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string
	}{
		{"/dev/zero", []string{"validate", "-f", "/dev/zero"}, "", 3, "error: the config file /dev/zero" + tooLarge},
		{"stdin of 2 MiB and 1 byte", []string{"validate", "-f", "-"}, padded(2<<20 + 1), 3, "error: the config file on stdin" + tooLarge},
		{"a plan from /dev/zero", []string{"upgrade-plan", "show", "/dev/zero"}, "", 3, "error: the plan file /dev/zero" + strings.TrimSuffix(tooLarge, "\n") + "; built-in plans: kubeadm, starlingx\n"},
		{"stdin of 2 MiB", []string{"validate", "-f", "-"}, padded(2 << 20), 0, "-: the file (ClusterConfiguration) is valid"},
		{"a file of 2 MiB", []string{"validate", "-f", exact}, "", 0, exact + ": the file (ClusterConfiguration) is valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := runBinary(t, time.Minute, strings.NewReader(tc.stdin), tc.args...)
			wantExit(t, r, tc.code)
			wantIn(t, "the output", r.stdout+r.stderr, tc.want)
		})
	}
}

// TestStoredAliases: a ClusterConfiguration stored with anchors and aliases
// (kubeadm never writes one; a hand edit of the ConfigMap can) is read as
// kubeadm reads it, and a patch writes it back with every value in full,
// which kubeadm accepts; one whose aliases expand past the bound is refused
// unexpanded by every verb that reads it.
func TestStoredAliases(t *testing.T) {
	t.Run("read, and written in full", func(t *testing.T) {
		e := newEnvWith(t, map[string]string{"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n" +
			"apiServer:\n  certSANs: &sans [cp.example.com, 192.0.2.10]\n  extraArgs: &args [{name: profiling, value: \"false\"}]\n" +
			"controllerManager: &component {extraArgs: *args}\nscheduler: *component\netcd:\n  local:\n    serverCertSANs: *sans\n"})
		wantExit(t, e.plugin("validate"), 0)
		wantExit(t, e.plugin("patch", "--set", "clusterName=anchors"), 0)
		doc := e.document()
		if strings.ContainsAny(doc, "&*") {
			t.Errorf("written with anchors or aliases:\n%s", doc)
		}
		wantIn(t, "the document written", doc, "clusterName: anchors\n", "scheduler:\n  extraArgs:\n  - name: profiling\n", "    serverCertSANs:\n    - cp.example.com\n    - 192.0.2.10\n")
		e.wantKubeadmAccepts()
	})
	e := newEnvWith(t, map[string]string{"ClusterConfiguration": aliasBomb(1000)})
	for _, args := range [][]string{
		{"get", "-o", "json"},
		{"validate"},
		{"patch", "--set", "clusterName=x"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			rv := e.configMapRV()
			r := e.plugin(args...)
			wantExit(t, r, 3)
			wantIn(t, "the output", r.stdout+r.stderr, expansionRefused(1000))
			if got := e.configMapRV(); got != rv {
				t.Errorf("resourceVersion %s -> %s", rv, got)
			}
		})
	}
}
