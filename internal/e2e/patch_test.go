package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// document reads the test's ClusterConfiguration with the admin client.
func (e *env) document() string {
	e.t.Helper()
	cm, err := s.admin.CoreV1().ConfigMaps(e.ns).Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return cm.Data["ClusterConfiguration"]
}

// kubeadmValidate runs the real `kubeadm config validate` on doc, with no
// network (kubeadm would look a version label up online otherwise): kubeadm
// 1.36 for a file with v1beta3 documents, which kubeadm 1.37 no longer reads,
// and kubeadm 1.37 for the others.
func kubeadmValidate(t *testing.T, doc []byte) (bool, string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(f, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := s.cluster.Bins.Kubeadm
	if strings.Contains(string(doc), "kubeadm.k8s.io/v1beta3\n") {
		bin = s.cluster.Bins.KubeadmV1beta3
	}
	args := []string{"-n", bin, "config", "validate", "--config", f}
	if strings.Contains(string(doc), "kubeadm.k8s.io/v1\n") {
		args = append(args, "--allow-experimental-api")
	}
	out, err := exec.Command("unshare", args...).CombinedOutput()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run kubeadm: %v: %s", err, out)
	}
	return err == nil, string(out)
}

// wantKubeadmAccepts fails unless the real kubeadm accepts the test's document.
func (e *env) wantKubeadmAccepts() {
	e.t.Helper()
	if ok, out := kubeadmValidate(e.t, []byte(e.document())); !ok {
		e.t.Fatalf("kubeadm config validate refuses what the plugin wrote:\n%s\n%s", out, e.document())
	}
}

func TestPatchConcurrentWritersLoseNothing(t *testing.T) {
	e := newEnv(t)
	e.storm("e2e", 8, 10, func(arg string) result {
		return e.plugin("patch", "--set", appendSAN(arg))
	})
	e.wantKubeadmAccepts()
}

func TestPatchRefusesInvalidResults(t *testing.T) {
	e := newEnv(t)
	rv := e.configMapRV()
	for _, args := range [][]string{
		{"--set", "networking.podSubnet=10.0.0.0/33"},
		{"--set", "unknownField=1"},
		{"-p", `{"networking":{"serviceSubnet":"10.0.0.0/8"}}`},
		{"--set", "apiServer.extraArgs=[1]"},
	} {
		r := e.plugin(append([]string{"patch"}, args...)...)
		wantExit(t, r, 3)
		if !strings.Contains(r.stderr, "nothing was written") {
			t.Errorf("%v: %s", args, r)
		}
	}
	if got := e.configMapRV(); got != rv {
		t.Fatalf("resourceVersion %s -> %s: an invalid patch was written", rv, got)
	}
}

func TestPatchUnchangedAndDryRunsWriteNothing(t *testing.T) {
	e := newEnv(t)
	rv := e.configMapRV()
	r := e.plugin("patch", "--set", "clusterName=kubernetes")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "kubeadm-config unchanged") {
		t.Fatalf("want unchanged: %s", r)
	}
	for _, dry := range []string{"client", "server"} {
		r := e.plugin("patch", "--set", "clusterName=other", "--dry-run="+dry, "-o", "json")
		wantExit(t, r, 0)
		var out map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("-o json: %v: %s", err, r)
		}
		if out["changed"] != true || out["dryRun"] != dry {
			t.Errorf("dry-run=%s result: %s", dry, r.stdout)
		}
	}
	if got := e.configMapRV(); got != rv {
		t.Fatalf("resourceVersion %s -> %s: unchanged or dry-run patch wrote", rv, got)
	}
}

func TestPatchUnprivilegedUserIsForbidden(t *testing.T) {
	e := newEnv(t)
	rv := e.configMapRV()
	r := e.kubectlAs(testcluster.UnprivilegedContext, "kubeadmcfg", "patch", "--set", "clusterName=x")
	wantExit(t, r, 6)
	if got := e.configMapRV(); got != rv {
		t.Fatal("the unprivileged user's patch was written")
	}
}

func TestPatchKeepsV1beta3Shape(t *testing.T) {
	data, err := os.ReadFile("../../testdata/documents/v1beta3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, map[string]string{"ClusterConfiguration": string(data)})
	r := e.plugin("patch", "--set", "apiServer.extraArgs.profiling=false", "--unset", "apiServer.extraArgs.audit-log-maxage")
	wantExit(t, r, 0)
	doc := e.document()
	for _, want := range []string{"apiVersion: kubeadm.k8s.io/v1beta3\n", "  extraArgs:\n    profiling: \"false\"\n", "timeoutForControlPlane: 4m0s"} {
		if !strings.Contains(doc, want) {
			t.Errorf("want %q in:\n%s", want, doc)
		}
	}
}

func TestPatchV1AndEveryFormPassKubeadm(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("patch", "--set", "apiServer.extraArgs.profiling=false", "--set", "apiServer.certSANs[+]=lb.example.com",
		"--set-string", "controllerManager.extraArgs.v=2", "--unset", "apiServer.extraArgs.audit-log-maxage",
		"-p", "etcd: {local: {serverCertSANs: [etcd.example.com]}}"), 0)
	wantExit(t, e.plugin("patch", "--type", "json", "-p", `[{"op":"test","path":"/clusterName","value":"kubernetes"},{"op":"replace","path":"/clusterName","value":"prod"}]`), 0)
	e.wantKubeadmAccepts()

	v1, err := os.ReadFile("../../testdata/documents/v1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e1 := newEnvWith(t, map[string]string{"ClusterConfiguration": string(v1)})
	wantExit(t, e1.plugin("patch", "--set", "scheduler.extraArgs.v=4"), 0)
	if !strings.Contains(e1.document(), "apiVersion: kubeadm.k8s.io/v1\n") {
		t.Fatal("v1 apiVersion not kept")
	}
	e1.wantKubeadmAccepts()
}

func TestPatchIfLeader(t *testing.T) {
	e := newEnv(t)
	holder := "controller-0_8d4e1f2a-1111-2222-3333-444455556666"
	_, err := s.admin.CoordinationV1().Leases(e.ns).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease := e.ns + "/kube-controller-manager"
	rv := e.configMapRV()
	r := e.plugin("patch", "--if-leader", lease, "--identity", "controller-1", "--set", "clusterName=standby")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "skipped: not the holder of lease "+lease+" (holder: "+holder+")") {
		t.Fatalf("want skipped: %s", r)
	}
	if e.configMapRV() != rv {
		t.Fatal("a standby wrote")
	}
	wantExit(t, e.plugin("patch", "--if-leader", lease, "--identity", "controller-0", "--set", "clusterName=active"), 0)
	if !strings.Contains(e.document(), "clusterName: active\n") {
		t.Fatal("the holder did not write")
	}
	wantExit(t, e.plugin("patch", "--if-leader", e.ns+"/missing", "--set", "clusterName=x"), 5)
}

// TestPatchIfLeaderExpiry: a Lease that has expired has no holder, whoever
// it names, also when its renewTime looks fresh because it was stamped an
// hour ahead of this host's clock (this host's clock is behind its
// holder's); one whose renewTime looks an hour old (its holder's clock is
// behind) but which is being renewed still has one. Expiry is decided by
// watching the Lease here for up to one lease duration, never by a clock.
func TestPatchIfLeaderExpiry(t *testing.T) {
	e := newEnv(t)
	holder, seconds := "controller-0_1234", int32(2)
	hourAgo, hourAhead := metav1.NewMicroTime(time.Now().Add(-time.Hour)), metav1.NewMicroTime(time.Now().Add(time.Hour))
	leases := s.admin.CoordinationV1().Leases(e.ns)
	for name, renewed := range map[string]*metav1.MicroTime{"dead": &hourAgo, "dead-stamped-ahead": &hourAhead, "alive": &hourAgo} {
		if _, err := leases.Create(context.Background(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: renewed},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rv := e.configMapRV()
	for _, name := range []string{"dead", "dead-stamped-ahead"} {
		r := e.plugin("patch", "--if-leader", e.ns+"/"+name, "--identity", "controller-0", "--set", "clusterName=from-"+name)
		wantExit(t, r, 0)
		if !strings.Contains(r.stdout, "skipped: lease "+e.ns+"/"+name+" has expired") || e.configMapRV() != rv {
			t.Fatalf("the named holder of an expired Lease wrote: %s", r)
		}
	}
	// The "alive" Lease is renewed every 500ms, always stamped an hour ago.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			l, err := leases.Get(context.Background(), "alive", metav1.GetOptions{})
			if err != nil {
				return
			}
			l.Annotations = map[string]string{"renewal": fmt.Sprint(i)}
			_, _ = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		}
	}()
	wantExit(t, e.plugin("patch", "--if-leader", e.ns+"/alive", "--identity", "controller-0", "--set", "clusterName=from-alive"), 0)
	if !strings.Contains(e.document(), "clusterName: from-alive\n") {
		t.Fatal("the holder of a live Lease whose clock is behind did not write")
	}
}

func TestPatchBadInput(t *testing.T) {
	e := newEnv(t)
	rv := e.configMapRV()
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"patch"}, 2},
		{[]string{"patch", "--set", "novalue"}, 2},
		{[]string{"patch", "--set", "a..b=1"}, 2},
		{[]string{"patch", "--type", "strategic", "-p", "{}"}, 2},
		{[]string{"patch", "-p", "{a: [}"}, 2},
		{[]string{"patch", "--patch-file", "/does/not/exist"}, 2},
		{[]string{"patch", "--set", "apiVersion=kubeadm.k8s.io/v1"}, 2},
		{[]string{"patch", "--type", "json", "-p", `[{"op":"test","path":"/clusterName","value":"nope"}]`}, 4},
		{[]string{"patch", "--type", "json", "-p", `[{"op":"remove","path":"/nothing"}]`}, 2},
		{[]string{"patch", "--set", "x=1", "--dry-run=maybe"}, 2},
		{[]string{"patch", "--set", "x=1", "--validate=sometimes"}, 2},
		{[]string{"patch", "--set", "x=1", "-o", "table"}, 2},
		{[]string{"patch", "--set", "x=1", "--configmap", "missing"}, 5},
	} {
		r := e.plugin(tc.args...)
		wantExit(t, r, tc.code)
	}
	if e.configMapRV() != rv {
		t.Fatal("bad input was written")
	}
}

// TestCorpusAgreesWithKubeadm runs the real kubeadm on every corpus file,
// whole (every document, empty ones included) — kubeadm 1.37 for v1beta4 and
// v1, kubeadm 1.36 for v1beta3 — and checks that the plugin's validate -f
// gives the same verdict.
func TestCorpusAgreesWithKubeadm(t *testing.T) {
	files, err := filepath.Glob("../../testdata/corpus/*.yaml")
	if err != nil || len(files) < 100 {
		t.Fatalf("corpus: %d files, %v", len(files), err)
	}
	// One file's two runs, kubeadm's and the plugin's, are independent of
	// every other's: the files run side by side (go test -parallel), in a
	// group that ends when they all have.
	perRelease := map[string]int{}
	t.Run("files", func(t *testing.T) {
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			release := "1.37"
			if strings.Contains(string(data), "kubeadm.k8s.io/v1beta3\n") {
				release = "1.36"
			}
			perRelease[release]++
			t.Run(filepath.Base(f), func(t *testing.T) {
				t.Parallel()
				kubeadmOK, out := kubeadmValidate(t, data)
				r := run(t, "kubectl", "kubeadmcfg", "validate", "-f", f)
				if (r.code == 0) != kubeadmOK || (r.code != 0 && r.code != 3) {
					t.Errorf("kubeadm %s valid=%v (%s), plugin %s", release, kubeadmOK, strings.TrimSpace(out), r)
				}
				if wantValid := strings.HasPrefix(filepath.Base(f), "valid-"); wantValid != kubeadmOK {
					t.Errorf("named for the wrong verdict, kubeadm %s says valid=%v", release, kubeadmOK)
				}
			})
		}
	})
	if perRelease["1.36"] < 10 {
		t.Errorf("only %d v1beta3 files checked against kubeadm 1.36", perRelease["1.36"])
	}
	t.Logf("kubeadm and the plugin agree on %d files with kubeadm 1.37 and %d with kubeadm 1.36", perRelease["1.37"], perRelease["1.36"])
}

// TestRestoreToFileRefusesWhatKubeadmWould writes a kubeadm config file from
// a backup with node values kubeadm refuses: exit 3 and no file.
func TestRestoreToFileRefusesWhatKubeadmWould(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	wantExit(t, e.plugin("backup", "--backup-dir", dir), 0)
	out := filepath.Join(t.TempDir(), "kubeadm.yaml")
	r := e.plugin("restore", "--latest", "--backup-dir", dir, "--to-file", out, "--node-name", "controller-0", "--advertise-address", "127.0.0.1")
	wantExit(t, r, 3)
	if !strings.Contains(r.stderr, "kubeadm would refuse the file") || !strings.Contains(r.stderr, "localAPIEndpoint.advertiseAddress") {
		t.Fatalf("want the refusal named: %s", r)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file kubeadm refuses was written: %v", err)
	}
	wantExit(t, e.plugin("restore", "--latest", "--backup-dir", dir, "--to-file", out, "--bind-port", "+6443"), 2)
}
