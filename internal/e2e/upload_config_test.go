package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/uploadconfig"
)

// TestLocalClusterUploadConfig: on the run of three nodes at the previous
// release (as TestLocalClusterUpgradeByHand starts it), cp-0's `kubeadm
// upgrade apply` runs phase by phase, as the agent runs it, with
// uploadconfig.UpgradeDocument at the point of upload-config kubeadm:
//
//	(a) with nobody else writing, the engine writes byte for byte what
//	    kubeadm's own phase writes;
//	(b) with a writer appending to apiServer.certSANs every 200ms, every
//	    append that exited 0 is in kubeadm-config, which says the new
//	    version;
//	(c) for contrast, kubeadm's own upload-config loses appends: the phase
//	    run alone reads kubeadm-config when it starts, and writes back what
//	    it read tens of milliseconds later (the window is logged); a whole
//	    `kubeadm upgrade apply` reads it before its preflight and writes it
//	    back after its control-plane phase, and the appends made in between
//	    are gone.
func TestLocalClusterUploadConfig(t *testing.T) {
	if testcluster.InTestNetns() {
		uploadConfigInside(t)
		return
	}
	runInPreviousRelease(t, 10*time.Minute)
}

// uploadCluster is the run's cluster with what the steps share.
type uploadCluster struct {
	*upgradeCluster
	eng        *engine.Engine
	before     string // kubeadm-config's document after cp-0's control-plane phase
	phaseWrote string // what kubeadm's own upload-config kubeadm phase wrote over it
}

func uploadConfigInside(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Wrap(engine.WrapNoWriteRetries)
	client := kubernetes.NewForConfigOrDie(cfg)
	c := &uploadCluster{upgradeCluster: newUpgradeCluster(t),
		eng: engine.New(client, uploadconfig.Target, engine.Options{FieldManager: "kubeadmcfg-e2e", Timeout: time.Minute})}
	cp0 := c.nodes[0]
	runSteps(t, c, []step[*uploadCluster]{
		{"cp-0: kubeadm upgrade apply's phases preflight and control-plane", func(t *testing.T, c *uploadCluster) {
			for _, phase := range []string{"preflight", "control-plane"} {
				c.kubeadm(t, cp0, c.phaseArgs(t, cp0, "apply", phase)...)
			}
			c.wantKubeadmConfig(t, c.from.Version)
			c.before = c.document(t)
		}},
		{"kubeadm's own upload-config kubeadm phase reads kubeadm-config when it starts, and writes it back", func(t *testing.T, c *uploadCluster) {
			rbac := c.nodesKubeadmConfigRBAC(t)
			out := c.kubeadm(t, cp0, append(c.phaseArgs(t, cp0, "apply", "upload-config kubeadm"), "-v=6")...)
			read, write := kubeadmConfigWindow(t, out)
			t.Logf("the phase alone: kubeadm read kubeadm-config, then wrote it back %s later", write.Sub(read))
			c.phaseWrote = c.document(t)
			c.wantKubeadmConfig(t, c.to.Version)
			// The phase also writes the Role and RoleBinding that let nodes
			// read kubeadm-config, as kubeadm init made them: unchanged (an
			// update that changes nothing keeps the resourceVersion), so the
			// agent, which skips the phase, has nothing to write there.
			if after := c.nodesKubeadmConfigRBAC(t); after != rbac {
				t.Errorf("kubeadm's phase changed the Role or RoleBinding kubeadm:nodes-kubeadm-config: resourceVersions %s, then %s", rbac, after)
			}
		}},
		{"(a) with nobody else writing, the engine writes byte for byte what kubeadm's phase wrote", func(t *testing.T, c *uploadCluster) {
			c.restore(t, c.before)
			start := time.Now()
			res, err := uploadconfig.UpgradeDocument(context.Background(), c.eng, c.kubeadmOf(t, cp0, ""))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("UpgradeDocument took %s (kubeadm runs %d, conflicts %d)", time.Since(start).Round(time.Millisecond), res.KubeadmRuns, res.Conflicts)
			for what, got := range map[string]string{"kubeadm's dry run says it would write": string(res.Upload.Written),
				"the engine wrote": string(res.After), "kubeadm-config holds": c.document(t)} {
				if got != c.phaseWrote {
					t.Errorf("%s:\n%s\nkubeadm's phase wrote:\n%s", what, got, c.phaseWrote)
				}
			}
			if string(res.Upload.Read) != c.before || !res.Changed || res.KubeadmRuns != 1 {
				t.Errorf("kubeadm read:\n%s\nwant what kubeadm-config held:\n%s\n(changed %v, kubeadm runs %d)", res.Upload.Read, c.before, res.Changed, res.KubeadmRuns)
			}
			// kubeadm's dry run left nothing in /etc/kubernetes/tmp.
			for _, pattern := range []string{"kubeadm-upgrade-apply-dryrun*", "kubeadmcfg-upload-config-*"} {
				if left, _ := filepath.Glob(filepath.Join(cp0.dir, "etc", "kubernetes", "tmp", pattern)); len(left) > 0 {
					t.Errorf("left in cp-0's /etc/kubernetes/tmp: %v", left)
				}
			}
		}},
		{"(b) a writer appends to apiServer.certSANs every 200ms throughout: every append that exited 0 is kept", func(t *testing.T, c *uploadCluster) {
			c.restore(t, c.before)
			w := startAppender(t, "b")
			w.waitFor(t, 3)
			// kubeadm answers a second after it read kubeadm-config, so that
			// appends land between its read and the engine's write.
			slow := filepath.Join(t.TempDir(), "kubeadm")
			if err := os.WriteFile(slow, []byte("#!/bin/sh\n\""+c.kubeadmPath(cp0)+"\" \"$@\"\nrc=$?\nsleep 1\nexit $rc\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := uploadconfig.UpgradeDocument(context.Background(), c.eng, c.kubeadmOf(t, cp0, slow))
			if err != nil {
				t.Fatal(err)
			}
			wrote := time.Now()
			t.Logf("UpgradeDocument took %s (kubeadm runs %d, conflicts %d)", wrote.Sub(start).Round(time.Millisecond), res.KubeadmRuns, res.Conflicts)
			for _, phase := range []string{"upload-config kubelet", "kubelet-config", "bootstrap-token", "addon all", "post-upgrade"} {
				c.kubeadm(t, cp0, c.phaseArgs(t, cp0, "apply", phase)...)
			}
			appends := w.stop(t)
			doc := c.document(t)
			between := 0
			for _, a := range appends {
				if a.r.code != 0 {
					t.Errorf("append %s: %s", a.san, a.r)
					continue
				}
				if n := countSAN(doc, a.san); n != 1 {
					t.Errorf("append %s is in kubeadm-config %d times, want once", a.san, n)
				}
				if countSAN(string(res.Upload.Read), a.san) == 0 && a.end.Before(wrote) {
					between++ // landed after kubeadm read, before the engine wrote
				}
			}
			t.Logf("%d appends exited 0, %d of them after kubeadm read kubeadm-config and before the engine wrote", len(appends), between)
			if between == 0 {
				t.Errorf("no append landed between kubeadm's read and the engine's write: the test shows nothing")
			}
			c.wantKubeadmConfig(t, c.to.Version)
		}},
		{"(c) for contrast, a whole kubeadm upgrade apply writes back what it read before its preflight, and loses the appends made meanwhile", func(t *testing.T, c *uploadCluster) {
			w := startAppender(t, "c")
			w.waitFor(t, 2)
			start := time.Now()
			out := c.kubeadm(t, cp0, "upgrade", "apply", "--config", c.writeUpgradeConfig(t, cp0), "--yes", "-v=6")
			end := time.Now()
			w.waitFor(t, len(w.done())+2)
			appends := w.stop(t)
			read, write := kubeadmConfigWindow(t, out)
			doc := c.document(t)
			var lost []string
			for _, a := range appends {
				if a.r.code != 0 {
					t.Errorf("append %s: %s", a.san, a.r)
					continue
				}
				if countSAN(doc, a.san) == 0 {
					lost = append(lost, a.san)
					if a.end.Before(start) || a.start.After(end) {
						t.Errorf("append %s was lost, yet made outside kubeadm's run", a.san)
					}
				}
			}
			shown := lost[:min(len(lost), 3)]
			t.Logf("a whole kubeadm upgrade apply: it read kubeadm-config, then wrote it back %s later; %d of %d appends that exited 0 are lost (%s ...)",
				write.Sub(read).Round(time.Millisecond), len(lost), len(appends), strings.Join(shown, ", "))
			if len(lost) == 0 {
				t.Errorf("kubeadm lost no append: the contrast shows nothing")
			}
		}},
	})
}

// kubeadmPath is the node's kubeadm of the target release.
func (c *uploadCluster) kubeadmPath(n upgradeNode) string {
	return strings.ReplaceAll(n.template, "{version}", c.to.Version)
}

// kubeadmOf is how the agent asks node n's kubeadm (or bin, when given):
// with the UpgradeConfiguration its phases run with.
func (c *uploadCluster) kubeadmOf(t *testing.T, n upgradeNode, bin string) uploadconfig.Kubeadm {
	t.Helper()
	if bin == "" {
		bin = c.kubeadmPath(n)
	}
	return uploadconfig.Kubeadm{Path: bin, Config: c.writeUpgradeConfig(t, n)}
}

// nodesKubeadmConfigRBAC is the resourceVersions of the Role and the
// RoleBinding kubeadm:nodes-kubeadm-config.
func (c *uploadCluster) nodesKubeadmConfigRBAC(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	role, err := c.client.RbacV1().Roles("kube-system").Get(ctx, "kubeadm:nodes-kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	binding, err := c.client.RbacV1().RoleBindings("kube-system").Get(ctx, "kubeadm:nodes-kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return role.ResourceVersion + "/" + binding.ResourceVersion
}

// document is kubeadm-config's ClusterConfiguration.
func (c *uploadCluster) document(t *testing.T) string {
	t.Helper()
	cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data["ClusterConfiguration"]
}

// restore puts doc back into kubeadm-config, as it was before the upload.
func (c *uploadCluster) restore(t *testing.T, doc string) {
	t.Helper()
	ctx := context.Background()
	cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["ClusterConfiguration"] = doc
	if _, err := c.client.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kubeadmConfigLine is client-go's line, at -v=6, for a request that
// kubeadm made of kubeadm-config.
var kubeadmConfigLine = regexp.MustCompile(`^I\d{4} (\d\d:\d\d:\d\d\.\d{6}) .*"Response" verb="(GET|PUT)" url="[^"]*/namespaces/kube-system/configmaps/kubeadm-config[?"]`)

// kubeadmConfigWindow returns when kubeadm, by its -v=6 output, first read
// kubeadm-config and when it last wrote it.
func kubeadmConfigWindow(t *testing.T, out string) (read, write time.Time) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		m := kubeadmConfigLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.Parse("15:04:05.000000", m[1])
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case m[2] == "GET" && read.IsZero():
			read = at
		case m[2] == "PUT":
			write = at
		}
	}
	if read.IsZero() || write.IsZero() || write.Before(read) {
		t.Fatalf("kubeadm's output shows no read of kubeadm-config followed by a write:\n%s", out)
	}
	return read, write
}

// appender appends to apiServer.certSANs with the plugin, every 200ms (a
// patch starts on each tick while none is in flight).
type appender struct {
	halt     chan struct{}
	finished chan struct{}
	mu       sync.Mutex
	appends  []appended
}

// appended is one append: the name it added, how the plugin exited, when.
type appended struct {
	san        string
	r          result
	start, end time.Time
}

func startAppender(t *testing.T, prefix string) *appender {
	t.Helper()
	w := &appender{halt: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(w.finished)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-w.halt:
				return
			case <-tick.C:
			}
			a := appended{san: fmt.Sprintf("%s-%d.example.com", prefix, i), start: time.Now()}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			a.r = runCmdNoFail(exec.CommandContext(ctx, "kubectl", "kubeadmcfg", "patch", "--no-backup",
				"--set", appendSAN(a.san), "--kubeconfig", os.Getenv("KUBECONFIG")))
			cancel()
			a.end = time.Now()
			w.mu.Lock()
			w.appends = append(w.appends, a)
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.stopNow() })
	return w
}

// runCmdNoFail is runCmd for a goroutine: a command that cannot run is a
// result with exit -1 and the error on stderr.
func runCmdNoFail(cmd *exec.Cmd) result {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	case err != nil:
		r.code, r.stderr = -1, r.stderr+err.Error()
	}
	return r
}

// done returns the appends made so far.
func (w *appender) done() []appended {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]appended(nil), w.appends...)
}

// waitFor waits until n appends are made.
func (w *appender) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(w.done()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the appender made %d appends in a minute, want %d", len(w.done()), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (w *appender) stopNow() {
	select {
	case <-w.halt:
	default:
		close(w.halt)
	}
	<-w.finished
}

// stop stops the appender and returns every append it made.
func (w *appender) stop(t *testing.T) []appended {
	t.Helper()
	w.stopNow()
	return w.done()
}
