package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

type upgradeStatus struct {
	State   string                                    `json:"state"`
	Hosts   map[string]struct{ Status string }        `json:"hosts"`
	History []struct{ From, To, Host, Reason string } `json:"history"`
	Reason  string                                    `json:"reason"`
}

func (e *env) upgradeStatus() upgradeStatus {
	e.t.Helper()
	r := e.plugin("upgrade-status", "-o", "json")
	wantExit(e.t, r, 0)
	var st upgradeStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		e.t.Fatalf("upgrade-status -o json: %v\n%s", err, r.stdout)
	}
	return st
}

// TestUpgradeSeedScenario replays the stuck upgrade: a late failure on the
// second master, forced to failed, retried, audited, and audited by eight
// nodes at once.
func TestUpgradeSeedScenario(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-status"), 5)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 4) // one at a time
	for _, s := range []string{"downloading-images", "downloaded-images", "upgrading-networking", "upgraded-networking",
		"upgrading-storage", "upgraded-storage", "upgrading-first-master", "upgraded-first-master", "upgrading-second-master"} {
		wantExit(t, e.plugin("upgrade-set", s), 0)
	}
	wantExit(t, e.plugin("upgrade-host", "controller-0", "upgrading-control-plane"), 0)
	wantExit(t, e.plugin("upgrade-host", "controller-0", "upgraded-control-plane"), 0)
	wantExit(t, e.plugin("upgrade-host", "controller-1", "upgrading-control-plane"), 0)
	cm, err := s.admin.CoreV1().ConfigMaps(e.ns).Get(context.Background(), "kubeadmcfg-upgrade", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels["app.kubernetes.io/managed-by"] != "kubectl-kubeadmcfg" {
		t.Fatalf("labels %v", cm.Labels)
	}

	// upgrade-fail: state and host in one write.
	w, err := s.admin.CoreV1().ConfigMaps(e.ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=kubeadmcfg-upgrade", ResourceVersion: cm.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wantExit(t, e.plugin("upgrade-fail", "--reason", "kubeadm upgrade node failed"), 0)
	var writes []*corev1.ConfigMap
	timeout := time.After(2 * time.Second)
collect:
	for {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Modified {
				writes = append(writes, ev.Object.(*corev1.ConfigMap))
			}
		case <-timeout:
			break collect
		}
	}
	if len(writes) != 1 {
		t.Fatalf("upgrade-fail made %d writes, want 1", len(writes))
	}
	st := e.upgradeStatus()
	if st.State != "upgrading-second-master-failed" || st.Hosts["controller-1"].Status != "upgrading-control-plane-failed" ||
		st.Hosts["controller-0"].Status != "upgraded-control-plane" {
		t.Fatalf("after upgrade-fail: %+v", st)
	}
	if !strings.Contains(writes[0].Annotations["kubeadmcfg.io/hosts"], "upgrading-control-plane-failed") ||
		writes[0].Annotations["kubeadmcfg.io/state"] != "upgrading-second-master-failed" {
		t.Fatalf("the one write does not hold both changes: %v", writes[0].Annotations)
	}
	wantExit(t, e.plugin("upgrade-fail"), 0) // already failed

	// A late success report cannot overwrite the forced failure.
	r := e.plugin("upgrade-set", "upgraded-second-master", "--expect", "upgrading-second-master")
	wantExit(t, r, 4)
	if e.upgradeStatus().State != "upgrading-second-master-failed" {
		t.Fatal("the late report was written")
	}
	// A refused transition lists what is allowed.
	r = e.plugin("upgrade-set", "upgrade-complete")
	wantExit(t, r, 4)
	if !strings.Contains(r.stderr, "may go to: upgrading-second-master, upgrade-aborting") {
		t.Fatalf("refusal does not list the allowed states: %s", r)
	}
	wantExit(t, e.plugin("upgrade-set", "no-such-state"), 2)

	// The retry is accepted.
	wantExit(t, e.plugin("upgrade-set", "upgrading-second-master"), 0)
	wantExit(t, e.plugin("upgrade-host", "controller-1", "upgrading-control-plane"), 0)

	// The audit fails a stuck step.
	time.Sleep(2100 * time.Millisecond)
	wantExit(t, e.plugin("upgrade-audit", "--stuck-after", "1h"), 0)
	if e.upgradeStatus().State != "upgrading-second-master" {
		t.Fatal("the audit failed a step that is not stuck")
	}
	wantExit(t, e.plugin("upgrade-audit", "--stuck-after", "1s"), 0)
	st = e.upgradeStatus()
	if st.State != "upgrading-second-master-failed" || !strings.HasPrefix(st.Reason, "stuck in upgrading-second-master for ") ||
		st.Hosts["controller-1"].Status != "upgrading-control-plane-failed" {
		t.Fatalf("after the audit: %+v", st)
	}

	// Eight audits at once record exactly one transition: exactly one
	// command reports it and the ConfigMap changes once (a history would
	// hold one entry under last-writer-wins too, so it proves nothing).
	wantExit(t, e.plugin("upgrade-set", "upgrading-second-master"), 0)
	time.Sleep(2100 * time.Millisecond)
	reported, modified, _ := e.auditAtOnce(8, "--stuck-after", "1s")
	if reported != 1 || modified != 1 {
		t.Fatalf("8 concurrent audits: %d reported a transition and the ConfigMap was modified %d times, want 1 and 1", reported, modified)
	}
	if st := e.upgradeStatus(); st.State != "upgrading-second-master-failed" {
		t.Fatalf("after 8 audits: %+v", st)
	}

	// Finish; nothing to fail from upgrade-complete.
	wantExit(t, e.plugin("upgrade-set", "upgrading-second-master"), 0)
	wantExit(t, e.plugin("upgrade-set", "upgraded-second-master", "--expect", "upgrading-second-master"), 0)
	wantExit(t, e.plugin("upgrade-set", "upgrading-kubelets"), 0)
	wantExit(t, e.plugin("upgrade-set", "upgrade-complete"), 0)
	r = e.plugin("upgrade-fail")
	wantExit(t, r, 4)
	if !strings.Contains(r.stderr, "upgrade-complete") {
		t.Fatalf("the refusal does not name the state: %s", r)
	}
	wantExit(t, e.plugin("upgrade-delete"), 0)
	wantExit(t, e.plugin("upgrade-status"), 5)
	// The audit CronJob keeps running after the state is gone.
	r = e.plugin("upgrade-audit")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "nothing to audit") {
		t.Fatalf("%s", r)
	}
}

func TestUpgradeAuditReportsBadTimestamps(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	wantExit(t, e.plugin("upgrade-set", "downloading-images"), 0)
	wantExit(t, e.kubectl("annotate", "--overwrite", "cm", "kubeadmcfg-upgrade", "kubeadmcfg.io/updated-at=last tuesday"), 0)
	r := e.plugin("upgrade-audit", "--stuck-after", "1s")
	wantExit(t, r, 3)
	if !strings.Contains(r.stderr, "not an RFC 3339 time") {
		t.Fatalf("%s", r)
	}
	wantExit(t, e.plugin("upgrade-delete"), 4)
	wantExit(t, e.plugin("upgrade-delete", "--force"), 0)
}

func TestUpgradeStatusWatch(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "kubeadmcfg", "upgrade-status", "--watch", "-o", "json",
		"--kubeconfig", s.cluster.Kubeconfig, "-n", e.ns)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(out)
	var first upgradeStatus
	if err := dec.Decode(&first); err != nil || first.State != "upgrade-started" {
		t.Fatalf("first status: %+v %v", first, err)
	}
	wantExit(t, e.plugin("upgrade-set", "downloading-images"), 0)
	var next upgradeStatus
	if err := dec.Decode(&next); err != nil || next.State != "downloading-images" {
		t.Fatalf("watched status: %+v %v", next, err)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
}
