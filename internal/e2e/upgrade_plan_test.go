package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// planStatus is upgrade-status -o json with where in the plan it is.
type planStatus struct {
	upgradeStatus
	Plan  string   `json:"plan"`
	Step  int      `json:"step"`
	Steps int      `json:"steps"`
	Next  []string `json:"next"`
	// Runners are the steps being run by upgrade-run.
	Runners []runnerStatus `json:"runners"`
	// LostRunners are runners whose step was taken from them.
	LostRunners []runnerStatus `json:"lostRunners"`
}

// runnerStatus is a runner as upgrade-status -o json prints it.
type runnerStatus struct {
	ID, State, Host, Lease string
	PID                    int    `json:"pid"`
	BootID                 string `json:"bootID"`
}

func (e *env) planStatus() planStatus {
	e.t.Helper()
	r := e.plugin("upgrade-status", "-o", "json")
	wantExit(e.t, r, 0)
	var st planStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		e.t.Fatalf("upgrade-status -o json: %v\n%s", err, r.stdout)
	}
	return st
}

// walk sets each state in turn; every transition must be accepted.
func (e *env) walk(states ...string) {
	e.t.Helper()
	for _, s := range states {
		wantExit(e.t, e.plugin("upgrade-set", s), 0)
	}
}

// stateConfigMap reads the upgrade state's ConfigMap, nil when absent.
func (e *env) stateConfigMap() *corev1.ConfigMap {
	e.t.Helper()
	cm, err := s.admin.CoreV1().ConfigMaps(e.ns).Get(context.Background(), "kubeadmcfg-upgrade", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return cm
}

// TestUpgradePlanStarlingxWalkedEndToEnd: the seed system's whole flow on a
// single-node system, every optional step taken, then an upgrade that skips
// them all; status says where in the plan it is.
func TestUpgradePlanStarlingxWalkedEndToEnd(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	st := e.planStatus()
	if st.Plan != "starlingx" || st.Step != 0 || st.Steps != 9 || strings.Join(st.Next, ",") != "downloading-images,upgrade-aborting" {
		t.Fatalf("at the start: %+v", st)
	}
	e.walk("downloading-images", "downloaded-images", "pre-updating-apps", "pre-updated-apps", "upgrading-networking",
		"upgraded-networking", "upgrading-storage", "upgraded-storage", "cordon-started", "cordon-failed", "cordon-started",
		"cordon-complete", "upgrading-first-master", "upgraded-first-master")
	// One controller: no second master.
	r := e.plugin("upgrade-status")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "starlingx  6/9   upgrading-second-master, upgrading-kubelets, upgrade-aborting") {
		t.Fatalf("status does not say where in the plan the upgrade is:\n%s", r.stdout)
	}
	e.walk("upgrading-kubelets")
	wantExit(t, e.plugin("upgrade-host", "controller-0", "upgrading-kubelet"), 0)
	wantExit(t, e.plugin("upgrade-host", "controller-0", "upgraded-kubelet"), 0)
	e.walk("uncordon-started", "uncordon-complete", "upgrade-complete", "post-updating-apps", "post-updating-apps-failed",
		"post-updating-apps", "post-updated-apps")
	if st := e.planStatus(); st.State != "post-updated-apps" || st.Step != 10 {
		t.Fatalf("at the end: %+v", st)
	}
	// Over: a new upgrade may start, and it may skip every optional step.
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.4"), 0)
	e.walk("downloading-images", "downloaded-images", "upgrading-networking", "upgraded-networking", "upgrading-storage",
		"upgraded-storage", "upgrading-first-master", "upgraded-first-master", "upgrading-second-master",
		"upgraded-second-master", "upgrading-kubelets", "upgrade-complete")
	wantExit(t, e.plugin("upgrade-delete"), 0)
}

// TestUpgradePlanKubeadmThreeControlPlaneNodes: the kubeadm plan expanded
// for the cluster's three control-plane nodes, walked to the end, with
// nothing skipped.
func TestUpgradePlanKubeadmThreeControlPlaneNodes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := []string{"kubeadm-plan-cp-2", "kubeadm-plan-cp-0", "kubeadm-plan-cp-1"}
	for _, n := range append(nodes, "kubeadm-plan-worker") {
		labels := map[string]string{"node-role.kubernetes.io/control-plane": ""}
		if strings.HasSuffix(n, "worker") {
			labels = nil
		}
		if _, err := s.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: labels}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.admin.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
	}
	r := e.plugin("upgrade-start", "--to", "v1.37.3", "--plan", "kubeadm")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "plan kubeadm") {
		t.Fatalf("%s", r)
	}
	r = e.plugin("upgrade-plan", "show", "--current")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "control-plane nodes: kubeadm-plan-cp-0, kubeadm-plan-cp-1, kubeadm-plan-cp-2\n") {
		t.Fatalf("the plan is not expanded for the cluster's control-plane nodes, in order:\n%s", r.stdout)
	}
	cp := func(n int, s string) string {
		return strings.Replace(s, "N", "kubeadm-plan-cp-"+string(rune('0'+n)), 1)
	}
	// The second node cannot go first, and the kubelets wait for the last.
	wantExit(t, e.plugin("upgrade-set", cp(1, "upgrading-control-plane-N")), 4)
	e.walk(cp(0, "upgrading-control-plane-N"), cp(0, "upgraded-control-plane-N"),
		cp(1, "upgrading-control-plane-N"), cp(1, "upgraded-control-plane-N"), cp(2, "upgrading-control-plane-N"))
	st := e.planStatus()
	if st.Step != 3 || st.Steps != 4 || strings.Join(st.Next, ",") != cp(2, "upgrading-control-plane-N-failed")+","+cp(2, "upgraded-control-plane-N")+",upgrade-aborting" {
		t.Fatalf("third node: %+v", st)
	}
	wantExit(t, e.plugin("upgrade-set", "upgrading-kubelets"), 4)
	e.walk(cp(2, "upgraded-control-plane-N"), "upgrading-kubelets")
	for _, n := range []string{"kubeadm-plan-worker", "kubeadm-plan-cp-0"} {
		wantExit(t, e.plugin("upgrade-host", n, "upgrading-kubelet"), 0)
		wantExit(t, e.plugin("upgrade-host", n, "upgraded-kubelet"), 0)
	}
	// The starlingx host statuses are not this plan's.
	wantExit(t, e.plugin("upgrade-host", "kubeadm-plan-cp-1", "upgrading-etcd"), 2)
	e.walk("upgrade-complete")

	// Given nodes win over the cluster's, in the order given; and one node
	// makes a plan without steps it never takes.
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.4", "--plan", "kubeadm", "--control-plane-nodes", "solo"), 0)
	e.walk("upgrading-control-plane-solo", "upgraded-control-plane-solo", "upgrading-kubelets", "upgrade-complete")
}

// TestUpgradePlanCustomFromFile: a plan of one's own, started from a file,
// stored with the state and obeyed by every command; a plan printed with
// -o yaml is a plan file.
func TestUpgradePlanCustomFromFile(t *testing.T) {
	e := newEnv(t)
	plan, err := os.ReadFile("../../testdata/plans/blue-green.yaml") // the unit tests' plan too
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(file, plan, 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.plugin("upgrade-plan", "show", file, "--control-plane-nodes", "m1,m2")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "-> upgrading-cp-m2") {
		t.Fatalf("%s", r)
	}
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3", "--plan", file, "--control-plane-nodes", "m1,m2"), 0)
	// The file may change or go: the stored plan decides.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	wantExit(t, e.plugin("upgrade-set", "downloading-images"), 2)
	e.walk("draining", "drained", "upgrading-cp-m1", "upgraded-cp-m1", "upgrading-cp-m2", "upgraded-cp-m2", "checking")
	wantExit(t, e.plugin("upgrade-fail", "--reason", "checks failed"), 0)
	e.walk("rolling-back", "rolled-back")
	wantExit(t, e.plugin("upgrade-host", "n1", "rebooting"), 0)
	r = e.plugin("upgrade-set", "abandoning")
	wantExit(t, r, 0)
	e.walk("abandoned")
	if st := e.planStatus(); st.Plan != "blue-green" || st.State != "abandoned" {
		t.Fatalf("%+v", st)
	}
	// What upgrade-plan show prints with -o yaml starts an upgrade as is.
	r = e.plugin("upgrade-plan", "show", "--current", "-o", "yaml")
	wantExit(t, r, 0)
	var back map[string]any
	if err := yaml.Unmarshal([]byte(r.stdout), &back); err != nil || back["name"] != "blue-green" {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if err := os.WriteFile(file, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.4", "--plan", file), 0)
	r = e.plugin("upgrade-plan", "show", "kubeadm", "-o", "yaml")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "forEach: control-plane-node") || !strings.Contains(r.stdout, "name: upgrading-control-plane-{node}") {
		t.Fatalf("a template is shown as written:\n%s", r.stdout)
	}
}

// TestUpgradePlanBadPlansAreRefused: a bad plan exits 3 with one line
// naming the problem, and nothing is written.
func TestUpgradePlanBadPlansAreRefused(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	for _, tc := range []struct{ name, plan, want string }{
		{"unreachable", "name: loop\nsteps:\n- {name: a, reaches: a-done}\n- {name: b, reaches: b-done, after: [c-done]}\n- {name: c, reaches: c-done, after: [b-done]}\n",
			"plan loop is invalid: unreachable from upgrade-started: b, b-failed, b-done, c, c-failed, c-done, upgrade-complete"},
		{"duplicate", "name: dup\nsteps:\n- {name: a, reaches: x-done}\n- {name: b, reaches: x-done}\n",
			"plan dup is invalid: state x-done is named twice"},
		{"failed for a state not in progress", "name: fails\nsteps:\n- {name: a, reaches: a-really-failed}\n",
			"plan fails is invalid: a-really-failed ends in -failed but is the state a step reaches; -failed states are only for steps in progress"},
		{"not a plan", "name: x\nsteps: 3\n", "not a plan: error unmarshaling JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name+".yaml")
			if err := os.WriteFile(file, []byte(tc.plan), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"upgrade-start", "--to", "v1.37.3", "--plan", file}, {"upgrade-plan", "show", file}} {
				r := e.plugin(args...)
				wantExit(t, r, 3)
				if !strings.Contains(r.stderr, tc.want) {
					t.Fatalf("%v: the error does not say %q: %s", args, tc.want, r)
				}
			}
			if e.stateConfigMap() != nil {
				t.Fatal("a bad plan was written")
			}
		})
	}
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3", "--plan", filepath.Join(dir, "missing.yaml")), 2)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3", "--plan", "kubeadm", "--control-plane-nodes", "a,a"), 3)
	if e.stateConfigMap() != nil {
		t.Fatal("a bad plan was written")
	}
}

// TestUpgradeRecordedBeforePlansIsStarlingx: a state written before plans
// existed is read with the starlingx plan, which its next change stores.
func TestUpgradeRecordedBeforePlansIsStarlingx(t *testing.T) {
	e := newEnv(t)
	_, err := s.admin.CoreV1().ConfigMaps(e.ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "kubeadmcfg-upgrade",
		Annotations: map[string]string{"kubeadmcfg.io/state": "upgraded-first-master", "kubeadmcfg.io/from-version": "v1.37.2",
			"kubeadmcfg.io/to-version": "v1.37.3", "kubeadmcfg.io/updated-at": "2026-11-29T12:00:00Z", "kubeadmcfg.io/reason": "",
			"kubeadmcfg.io/hosts":   `{"controller-1":{"status":"upgraded-control-plane","updatedAt":"2026-11-29T12:00:00Z"}}`,
			"kubeadmcfg.io/history": "[]"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := e.planStatus(); st.Plan != "starlingx" || st.State != "upgraded-first-master" {
		t.Fatalf("%+v", st)
	}
	wantExit(t, e.plugin("upgrade-set", "upgrading-second-master"), 0)
	if plan := e.stateConfigMap().Annotations["kubeadmcfg.io/plan"]; !strings.Contains(plan, `"name":"starlingx"`) {
		t.Fatalf("the plan was not stored with the change: %q", plan)
	}
}

// TestUpgradeStateSizeIsBounded: a long --reason is cut to 1 KiB, and a
// change that would pass the API server's 256 KiB limit on annotations is
// refused before the write (exit 3, saying what to remove), not sent to get
// a 422.
func TestUpgradeStateSizeIsBounded(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	wantExit(t, e.plugin("upgrade-set", "downloading-images", "--reason", strings.Repeat("a very long reason ", 1000)), 0)
	if reason := e.stateConfigMap().Annotations["kubeadmcfg.io/reason"]; len(reason) > 1024 || !strings.HasSuffix(reason, "...") {
		t.Fatalf("a reason of %d bytes was stored", len(reason))
	}
	// Fill the hosts map to within one entry of the limit (about 3,000
	// nodes), with no history left to give way.
	cm := e.stateConfigMap()
	cm.Annotations["kubeadmcfg.io/history"] = "[]"
	entry := func(i int) string {
		return fmt.Sprintf(`"w-%05d":{"status":"upgraded-kubelet","updatedAt":"2026-11-29T12:00:00Z"}`, i)
	}
	size := 0
	for k, v := range cm.Annotations {
		if k != "kubeadmcfg.io/hosts" {
			size += len(k) + len(v)
		}
	}
	room := 256<<10 - size - len("kubeadmcfg.io/hosts") - len("{}")
	var entries []string
	for i := 0; room-len(entry(i))-1 >= 0; i++ {
		entries = append(entries, entry(i))
		room -= len(entry(i)) + 1
	}
	cm.Annotations["kubeadmcfg.io/hosts"] = "{" + strings.Join(entries, ",") + "}"
	if _, err := s.admin.CoreV1().ConfigMaps(e.ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d hosts, %d bytes left", len(entries), room)
	rv := e.stateConfigMap().ResourceVersion
	r := e.plugin("upgrade-host", "one-more-node-with-a-rather-long-name.example.com", "upgrading-kubelet")
	wantExit(t, r, 3)
	if !strings.Contains(r.stderr, "over the API server's limit of 262144") || !strings.Contains(r.stderr, "remove the entries of hosts that are done with 'upgrade-host NODE none'") {
		t.Fatalf("%s", r)
	}
	if e.stateConfigMap().ResourceVersion != rv {
		t.Fatal("the refused change was written")
	}
	// Following the advice makes room.
	wantExit(t, e.plugin("upgrade-host", "w-00000", "none"), 0)
	wantExit(t, e.plugin("upgrade-host", "w-00001", "none"), 0)
	wantExit(t, e.plugin("upgrade-host", "one-more-node-with-a-rather-long-name.example.com", "upgrading-kubelet"), 0)
}
