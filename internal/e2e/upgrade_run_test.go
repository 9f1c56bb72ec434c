package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// pluginEnv runs the plugin with extra environment variables.
func (e *env) pluginEnv(environ []string, args ...string) result {
	e.t.Helper()
	p := e.startPlugin(environ, args...)
	return p.wait()
}

// running is a plugin process started in the background.
type running struct {
	t      *testing.T
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
	lines  chan string // stdout, line by line
	done   chan struct{}
	res    result
}

// startPlugin starts `kubectl kubeadmcfg ARGS` as the admin, with extra
// environment variables, and returns at once.
func (e *env) startPlugin(environ []string, args ...string) *running {
	e.t.Helper()
	cmd := exec.Command("kubectl", e.withConnection(testcluster.AdminContext, append([]string{"kubeadmcfg"}, args...))...)
	cmd.Env = append(os.Environ(), environ...)
	p := &running{t: e.t, cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.stdout.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		err := cmd.Wait()
		var exitErr *exec.ExitError
		code := 0
		if errors.As(err, &exitErr) {
			code = exitErr.ExitCode()
			if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		}
		p.mu.Lock()
		p.res = result{stdout: p.stdout.String(), stderr: p.stderr.String(), code: code}
		p.mu.Unlock()
	}()
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// waitFor waits until the process prints a line containing text.
func (p *running) waitFor(text string) {
	p.t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l := <-p.lines:
			if strings.Contains(l, text) {
				return
			}
		case <-p.done:
			p.t.Fatalf("the process ended before printing %q: %s", text, p.res)
		case <-timeout:
			p.t.Fatalf("no line with %q within a minute", text)
		}
	}
}

func (p *running) wait() result {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		p.t.Fatal("the process did not end within 2 minutes")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.res
}

// killFromPidFile kills the process whose pid a command wrote (a command
// left running when its runner was killed), now and at the end of the test.
func killFromPidFile(t *testing.T, file string) {
	t.Helper()
	kill := func() {
		if data, err := os.ReadFile(file); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	kill()
	t.Cleanup(kill)
}

// auditAtOnce runs n upgrade-audit processes at once and returns how many
// reported a transition of the state and how many times the state
// ConfigMap was modified meanwhile, seen by a watch.
func (e *env) auditAtOnce(n int, args ...string) (reported, modified int, results []result) {
	e.t.Helper()
	cm := e.stateConfigMap()
	w, err := s.admin.CoreV1().ConfigMaps(e.ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=kubeadmcfg-upgrade", ResourceVersion: cm.ResourceVersion})
	if err != nil {
		e.t.Fatal(err)
	}
	defer w.Stop()
	results = make([]result, n)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.plugin(append([]string{"upgrade-audit", "--identity", fmt.Sprintf("node-%d", i)}, args...)...)
		}()
	}
	wg.Wait()
	for _, r := range results {
		wantExit(e.t, r, 0)
		switch {
		case strings.HasPrefix(r.stdout, "upgrade state: ") && strings.Contains(r.stdout, " -> "):
			reported++
		case !strings.HasPrefix(r.stdout, "upgrade state unchanged: "):
			e.t.Fatalf("an audit said neither a transition nor unchanged: %s", r)
		}
	}
	// Every write has been answered; give the watch a moment to deliver.
	timeout := time.After(2 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Modified {
				modified++
			}
		case <-timeout:
			return reported, modified, results
		}
	}
}

// TestUpgradeRunKilledRunnerIsFailedAndRetried is the stuck
// upgrading-second-master, end to end with the plugin alone: the runner of
// `kubeadm upgrade node` is killed with SIGKILL; eight auditors at once fail
// the step within seconds of --stale-after, exactly once; the retry is
// accepted; a healthy runner that outlives --stuck-after is never failed.
func TestUpgradeRunKilledRunnerIsFailedAndRetried(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	e.walk("downloading-images", "downloaded-images", "upgrading-networking", "upgraded-networking", "upgrading-storage",
		"upgraded-storage", "upgrading-first-master", "upgraded-first-master")
	wantExit(t, e.plugin("upgrade-host", "controller-1", "upgrading-control-plane"), 0)

	pidFile := filepath.Join(t.TempDir(), "pid")
	runner := e.startPlugin(nil, "upgrade-run", "upgrading-second-master", "--heartbeat-interval", "1s", "--",
		"sh", "-c", "echo $$ > "+pidFile+"; echo upgrading controller-1; exec sleep 300")
	runner.waitFor("upgrading controller-1")
	r := e.plugin("upgrade-run", "upgrading-second-master", "--", "true")
	wantExit(t, r, 4)
	if !strings.Contains(r.stderr, "already being run by ") {
		t.Fatalf("a second runner of the held step: %s", r)
	}
	if err := runner.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	runner.wait()
	killFromPidFile(t, pidFile)
	if st := e.planStatus(); st.State != "upgrading-second-master" || len(st.Runners) != 1 {
		t.Fatalf("after the kill, before the audit: %+v", st)
	}

	began := time.Now()
	reported, modified, _ := e.auditAtOnce(8, "--stale-after", "5s")
	took := time.Since(began)
	if reported != 1 || modified != 1 {
		t.Fatalf("8 audits at once: %d reported a transition and the ConfigMap was modified %d times, want 1 and 1", reported, modified)
	}
	st := e.planStatus()
	if st.State != "upgrading-second-master-failed" || st.Hosts["controller-1"].Status != "upgrading-control-plane-failed" ||
		!strings.HasPrefix(st.Reason, "the runner of upgrading-second-master stopped: no heartbeat from ") || len(st.Runners) != 0 {
		t.Fatalf("after the audit: %+v", st)
	}
	if took > time.Minute {
		t.Fatalf("the audits took %s to fail a step whose runner stopped, with --stale-after 5s", took)
	}
	t.Logf("8 concurrent audits (--stale-after 5s) failed the dead runner's step in %s", took.Round(100*time.Millisecond))

	// The retry is accepted. Its runner outlives --stuck-after, and audits
	// that see its heartbeat leave it alone.
	retry := e.startPlugin(nil, "upgrade-run", "upgrading-second-master", "--expect", "upgrading-second-master-failed",
		"--heartbeat-interval", "1s", "--", "sh", "-c", "echo retrying; sleep 8; echo upgraded")
	retry.waitFor("retrying")
	time.Sleep(1500 * time.Millisecond)
	for range 2 {
		r := e.plugin("upgrade-audit", "--stale-after", "3s", "--stuck-after", "1s")
		wantExit(t, r, 0)
		if r.stdout != "upgrade state unchanged: upgrading-second-master\n" {
			t.Fatalf("an audit touched a live runner's step: %s", r)
		}
	}
	r = retry.wait()
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "upgraded\n") || !strings.Contains(r.stderr, "upgrade state: upgrading-second-master -> upgraded-second-master (sh succeeded in ") {
		t.Fatalf("the retry: %s", r)
	}
	e.walk("upgrading-kubelets", "upgrade-complete")
	e.wantNoHeartbeatLeases()
}

// wantNoHeartbeatLeases: runners that ended left no Lease behind.
func (e *env) wantNoHeartbeatLeases() {
	e.t.Helper()
	list, err := s.admin.CoordinationV1().Leases(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kubeadmcfg.io/heartbeat"})
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, l := range list.Items {
		names = append(names, l.Name)
	}
	if len(names) > 0 {
		e.t.Fatalf("heartbeat Leases left behind: %v", names)
	}
}

// lastLineMatches reports whether the last line of text matches pattern.
func lastLineMatches(text, pattern string) bool {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	return regexp.MustCompile(pattern).MatchString(lines[len(lines)-1])
}

// TestUpgradeRunOutcomes: each way a command can end is recorded in the
// right state, with the right reason and exit code.
func TestUpgradeRunOutcomes(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	wantExit(t, e.plugin("upgrade-run", "upgrading-networking", "--", "true"), 4) // not from upgrade-started

	// Success: the output passes through, the step reaches its end.
	r := e.plugin("upgrade-run", "downloading-images", "--", "sh", "-c", "echo pulled 12 images")
	wantExit(t, r, 0)
	if r.stdout != "pulled 12 images\n" || !strings.Contains(r.stderr, "upgrade state: downloading-images -> downloaded-images (sh succeeded in ") {
		t.Fatalf("success: %s", r)
	}

	// A late failure, after printing: the exit code is the command's, and
	// the reason has the last lines of its output.
	wantExit(t, e.plugin("upgrade-host", "controller-0", "upgrading-etcd"), 0)
	r = e.plugin("upgrade-run", "pre-updating-apps", "--", "sh", "-c",
		"echo app 1 updated; echo app 2 updated; sleep 1; echo 'app 3: timed out' >&2; exit 3")
	if r.code != 3 || !strings.Contains(r.stdout, "app 2 updated") || !lastLineMatches(r.stderr,
		`^error: pre-updating-apps failed: sh exited 3 after \ds; recorded pre-updating-apps-failed$`) {
		t.Fatalf("late failure: %s", r)
	}
	st := e.planStatus()
	if st.State != "pre-updating-apps-failed" || st.Hosts["controller-0"].Status != "upgrading-etcd-failed" ||
		!regexp.MustCompile(`^upgrade-run: sh exited 3 after \ds; last output: app 1 updated \| app 2 updated \| app 3: timed out$`).MatchString(st.Reason) {
		t.Fatalf("after the late failure: %+v", st)
	}
	wantExit(t, e.plugin("upgrade-run", "pre-updating-apps", "--", "true"), 0)

	// A command that does not exist, and one that cannot run.
	r = e.plugin("upgrade-run", "upgrading-networking", "--", "no-such-command-kubeadmcfg")
	if r.code != 127 || e.planStatus().State != "upgrading-networking-failed" ||
		!strings.Contains(e.planStatus().Reason, `upgrade-run: no-such-command-kubeadmcfg could not start: exec: "no-such-command-kubeadmcfg": executable file not found in $PATH`) {
		t.Fatalf("not found: %s\n%+v", r, e.planStatus())
	}
	notExecutable := filepath.Join(t.TempDir(), "upgrade.sh")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = e.plugin("upgrade-run", "upgrading-networking", "--", notExecutable)
	if r.code != 126 || e.planStatus().State != "upgrading-networking-failed" {
		t.Fatalf("not executable: %s", r)
	}

	// SIGTERM to the plugin is passed on to the command, and the failure
	// recorded before the plugin exits.
	bg := e.startPlugin(nil, "upgrade-run", "upgrading-networking", "--", "sh", "-c", "echo ready; sleep 60; echo not reached")
	bg.waitFor("ready")
	began := time.Now()
	if err := bg.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r = bg.wait()
	if r.code != 143 || time.Since(began) > 30*time.Second || strings.Contains(r.stdout, "not reached") || !lastLineMatches(r.stderr,
		`^error: upgrading-networking failed: sh was killed by signal terminated \(terminated passed on from the runner\) after \ds; recorded upgrading-networking-failed$`) {
		t.Fatalf("SIGTERM: %s", r)
	}
	if st := e.planStatus(); st.State != "upgrading-networking-failed" || !strings.HasPrefix(st.Reason, "upgrade-run: sh was killed by signal terminated") {
		t.Fatalf("after SIGTERM: %+v", st)
	}

	// --run-timeout stops the command.
	r = e.plugin("upgrade-run", "upgrading-networking", "--run-timeout", "1s", "--", "sleep", "30")
	if r.code != 124 || !strings.Contains(e.planStatus().Reason, "did not finish within --run-timeout") {
		t.Fatalf("--run-timeout: %s", r)
	}

	// A host step, with -o json: standard output holds the result alone.
	r = e.plugin("upgrade-run", "upgrading-kubelet", "--host", "worker-1", "-o", "json", "--", "sh", "-c", "echo kubelet restarted")
	wantExit(t, r, 0)
	var res struct {
		Recorded string `json:"recorded"`
		ExitCode int    `json:"exitCode"`
		Started  bool   `json:"started"`
		Upgrade  struct {
			State string `json:"state"`
		} `json:"upgrade"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Recorded != "upgraded-kubelet" || !res.Started ||
		res.Upgrade.State != "upgrading-networking-failed" || !strings.Contains(r.stderr, "kubelet restarted") {
		t.Fatalf("-o json: %v %+v %s", err, res, r)
	}

	// A late success cannot overwrite a state an operator forced meanwhile.
	bg = e.startPlugin(nil, "upgrade-run", "upgrading-networking", "--", "sh", "-c", "echo go; sleep 3")
	bg.waitFor("go")
	wantExit(t, e.plugin("upgrade-fail", "--reason", "the operator gave up"), 0)
	r = bg.wait()
	if r.code != 4 || !strings.Contains(r.stderr, "but its outcome could not be recorded: the step is no longer held by this run") {
		t.Fatalf("late success: %s", r)
	}
	if st := e.planStatus(); st.State != "upgrading-networking-failed" || st.Reason != "the operator gave up" {
		t.Fatalf("the late success was written: %+v", st)
	}
	e.wantNoHeartbeatLeases()
}

// TestUpgradeAuditClockSkew: writers and auditors whose clocks are an hour
// off neither fail a fresh step nor a live runner's: stamps and ages use
// the API server's clock, heartbeats are judged by locally observed time.
func TestUpgradeAuditClockSkew(t *testing.T) {
	e := newEnv(t)
	ahead, behind := []string{"KUBEADMCFG_TEST_CLOCK_SKEW=1h"}, []string{"KUBEADMCFG_TEST_CLOCK_SKEW=-1h"}
	wantExit(t, e.pluginEnv(behind, "upgrade-start", "--to", "v1.37.3"), 0)
	wantExit(t, e.pluginEnv(behind, "upgrade-set", "downloading-images"), 0)
	stamped, err := time.Parse(time.RFC3339, e.stateConfigMap().Annotations["kubeadmcfg.io/updated-at"])
	if err != nil || time.Since(stamped).Abs() > time.Minute {
		t.Fatalf("a writer an hour behind stamped %v (%v)", stamped, err)
	}
	r := e.pluginEnv(ahead, "upgrade-audit", "--stuck-after", "30m")
	wantExit(t, r, 0)
	if r.stdout != "upgrade state unchanged: downloading-images\n" {
		t.Fatalf("an auditor an hour ahead failed a fresh step: %s", r)
	}

	// A runner an hour behind (its Lease says so), judged by an auditor an
	// hour ahead, is alive.
	wantExit(t, e.plugin("upgrade-set", "downloaded-images"), 0)
	bg := e.startPlugin(behind, "upgrade-run", "upgrading-networking", "--heartbeat-interval", "1s", "--", "sh", "-c", "echo up; sleep 6")
	bg.waitFor("up")
	lease, err := s.admin.CoordinationV1().Leases(e.ns).Get(context.Background(), "kubeadmcfg-run-kubeadmcfg-upgrade-00", metav1.GetOptions{})
	if err != nil || lease.Spec.RenewTime == nil || time.Since(lease.Spec.RenewTime.Time) < 59*time.Minute {
		t.Fatalf("the clock of the runner is not an hour behind: %v %+v", err, lease)
	}
	r = e.pluginEnv(ahead, "upgrade-audit", "--stale-after", "3s", "--stuck-after", "1s")
	wantExit(t, r, 0)
	if r.stdout != "upgrade state unchanged: upgrading-networking\n" {
		t.Fatalf("an auditor an hour ahead failed a live runner's step: %s", r)
	}
	wantExit(t, bg.wait(), 0)

	// And a step really stuck is still failed.
	wantExit(t, e.plugin("upgrade-set", "upgrading-storage"), 0)
	time.Sleep(2500 * time.Millisecond)
	r = e.pluginEnv(behind, "upgrade-audit", "--stuck-after", "1s")
	wantExit(t, r, 0)
	if r.stdout != "upgrade state: upgrading-storage -> upgrading-storage-failed\n" {
		t.Fatalf("a stuck step was not failed: %s", r)
	}
}

// TestUpgradeAuditCronJobRole: the Role of deploy/upgrade-audit-cronjob.yaml
// is enough to fail a dead runner's step, and grants nothing on Leases but
// reading the heartbeats.
func TestUpgradeAuditCronJobRole(t *testing.T) {
	e := newEnv(t)
	data, err := os.ReadFile("../../deploy/upgrade-audit-cronjob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.Contains(doc, "\nkind: Role\n") {
			role = strings.ReplaceAll(doc, "namespace: kube-system", "namespace: "+e.ns)
		}
	}
	file := filepath.Join(t.TempDir(), "role.yaml")
	if err := os.WriteFile(file, []byte(role), 0o600); err != nil || role == "" {
		t.Fatalf("no Role in the CronJob manifest: %v", err)
	}
	wantExit(t, e.kubectl("apply", "-f", file), 0)
	if _, err := s.admin.RbacV1().RoleBindings(e.ns).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "audit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "kubeadmcfg-upgrade-audit"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: testcluster.UnprivilegedUser}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	pidFile := filepath.Join(t.TempDir(), "pid")
	runner := e.startPlugin(nil, "upgrade-run", "downloading-images", "--heartbeat-interval", "1s", "--",
		"sh", "-c", "echo $$ > "+pidFile+"; echo pulling; exec sleep 300")
	runner.waitFor("pulling")
	_ = runner.cmd.Process.Kill()
	runner.wait()
	killFromPidFile(t, pidFile)

	r := e.kubectlAs(testcluster.UnprivilegedContext, "kubeadmcfg", "upgrade-audit", "--stale-after", "3s")
	wantExit(t, r, 0)
	if r.stdout != "upgrade state: downloading-images -> downloading-images-failed\n" || r.stderr != "" {
		t.Fatalf("the CronJob's Role: %s", r)
	}
	r = e.kubectlAs(testcluster.UnprivilegedContext, "delete", "lease", "kubeadmcfg-run-kubeadmcfg-upgrade-00")
	if r.code == 0 || !strings.Contains(r.stderr, "forbidden") {
		t.Fatalf("the CronJob's Role may delete a heartbeat: %s", r)
	}
}

// TestUpgradeStatusTimeout: upgrade-status gives up within --timeout.
func TestUpgradeStatusTimeout(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	wantExit(t, e.plugin("upgrade-status", "--timeout", "10s"), 0)
	// A server that accepts connections and never answers.
	blackhole := blackholeServer(t)
	began := time.Now()
	r := run(t, "kubectl", "kubeadmcfg", "upgrade-status", "--server", blackhole, "--insecure-skip-tls-verify", "--token", "x", "--timeout", "2s")
	if r.code == 0 || time.Since(began) > 20*time.Second || !lastLineMatches(r.stderr, "^error: .*2s") {
		t.Fatalf("upgrade-status against a silent server: %s (after %s)", r, time.Since(began))
	}
}

// blackholeServer accepts connections on loopback and never answers.
func blackholeServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "https://" + l.Addr().String()
}

// TestUpgradeRunWithoutLeaseRights: a runner that may not take a Lease
// still runs and records, with a warning; its step has no heartbeat, so the
// audit judges it by --stuck-after instead of failing it as silent.
func TestUpgradeRunWithoutLeaseRights(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := s.admin.RbacV1().Roles(e.ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "state-only"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{"kubeadmcfg-upgrade"}, Verbs: []string{"get", "update"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.admin.RbacV1().RoleBindings(e.ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "state-only"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "state-only"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: testcluster.UnprivilegedUser}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	bg := make(chan result, 1)
	go func() {
		bg <- e.kubectlAs(testcluster.UnprivilegedContext, "kubeadmcfg", "upgrade-run", "downloading-images", "--", "sh", "-c", "sleep 4; echo pulled")
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		st := e.planStatus()
		if len(st.Runners) == 1 && st.Runners[0].Lease == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runner without a heartbeat was not recorded as such: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := e.plugin("upgrade-audit", "--stale-after", "1s")
	if r.code != 0 || r.stdout != "upgrade state unchanged: downloading-images\n" {
		t.Fatalf("the audit failed a step without a heartbeat as silent: %s", r)
	}
	r = <-bg
	wantExit(t, r, 0)
	if !strings.Contains(r.stderr, "warning: no heartbeat (") || !strings.Contains(r.stderr, "audited by upgrade-audit --stuck-after instead") ||
		e.planStatus().State != "downloaded-images" {
		t.Fatalf("without Lease rights: %s", r)
	}
}

// TestUpgradeAuditCountsHostProgress: a long step whose hosts keep
// reporting is progressing; once they stop, it is stuck.
func TestUpgradeAuditCountsHostProgress(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	e.walk("downloading-images", "downloaded-images", "upgrading-networking", "upgraded-networking", "upgrading-storage",
		"upgraded-storage", "upgrading-first-master", "upgraded-first-master", "upgrading-kubelets")
	for _, node := range []string{"worker-1", "worker-2"} {
		time.Sleep(2500 * time.Millisecond)
		wantExit(t, e.plugin("upgrade-host", node, "upgrading-kubelet"), 0)
		r := e.plugin("upgrade-audit", "--stuck-after", "2s")
		if r.stdout != "upgrade state unchanged: upgrading-kubelets\n" {
			t.Fatalf("a step whose hosts report was failed: %s", r)
		}
	}
	time.Sleep(3500 * time.Millisecond)
	r := e.plugin("upgrade-audit", "--stuck-after", "2s")
	st := e.planStatus()
	if r.stdout != "upgrade state: upgrading-kubelets -> upgrading-kubelets-failed\n" || st.Hosts["worker-2"].Status != "upgrading-kubelet-failed" {
		t.Fatalf("a step whose hosts stopped reporting: %s\n%+v", r, st)
	}
}
