package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// A control plane as the rollout's operator side sees it, without the nodes
// themselves: Node objects labelled as kubeadm's control plane, the mirror
// Pods of their components, and their agents' Leases. The tests of the
// operator's verbs (preflight, concurrent starts, waits, undo, nodes) need
// nothing more; a stand-in agent moves the record where a test needs it.

// fakeNodes is the fake control plane of one test.
type fakeNodes struct {
	e     *env
	nodes []string
	// leases is the namespace of the agents' Leases: the record's.
	leases string
}

// fakeControlPlane registers n control-plane nodes named after the test's
// namespace, each with Ready mirror Pods and an agent renewed now, and
// removes them when the test ends. Nodes and mirror Pods are cluster-wide
// and in kube-system: tests that use them do not run in parallel.
func (e *env) fakeControlPlane(n int) *fakeNodes {
	e.t.Helper()
	cp := &fakeNodes{e: e, leases: e.ns}
	// Short names (the mirror Pods' carry a component's too), unique by
	// the namespace's number.
	prefix := "e2e" + e.ns[strings.LastIndex(e.ns, "-"):]
	for i := range n {
		name := prefix + "-cp-" + strconv.Itoa(i)
		cp.addNode(name)
		cp.setPodsReady(name, true)
		cp.renew(name, time.Now())
	}
	return cp
}

func (cp *fakeNodes) addNode(name string) {
	t := cp.e.t
	ctx := context.Background()
	_, err := s.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	cp.adopt(name)
}

// adopt makes an existing Node one of the fake control plane's: its mirror
// Pods and agent Lease are removed when the test ends.
func (cp *fakeNodes) adopt(name string) {
	if !slices.Contains(cp.nodes, name) {
		cp.nodes = append(cp.nodes, name)
	}
	cp.e.t.Cleanup(func() {
		for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			_ = s.admin.CoreV1().Pods("kube-system").Delete(context.Background(), c+"-"+name, metav1.DeleteOptions{})
		}
		_ = s.admin.CoordinationV1().Leases(cp.leases).Delete(context.Background(), nodestate.LeaseName(name), metav1.DeleteOptions{})
	})
}

// setPodsReady creates or updates node's mirror Pods with Ready status.
func (cp *fakeNodes) setPodsReady(node string, ready bool) {
	t := cp.e.t
	ctx := context.Background()
	pods := s.admin.CoreV1().Pods("kube-system")
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		name := c + "-" + node
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// A mirror Pod, as the kubelet publishes it for a static Pod.
			pod, err = pods.Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kubernetes.io/config.mirror": "test"}},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: c, Image: "registry.k8s.io/" + c}},
					AutomountServiceAccountToken: new(bool)},
			}, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// renew creates or renews node's agent Lease at renewed.
func (cp *fakeNodes) renew(node string, renewed time.Time) {
	cp.setAgent(node, func(l *coordinationv1.Lease) { l.Spec.RenewTime = &metav1.MicroTime{Time: renewed} })
}

// publish sets the node state node's agent publishes.
func (cp *fakeNodes) publish(node string, state nodestate.State) {
	cp.setAgent(node, func(l *coordinationv1.Lease) {
		if err := nodestate.SetState(l, state); err != nil {
			cp.e.t.Fatal(err)
		}
	})
}

func (cp *fakeNodes) setAgent(node string, change func(l *coordinationv1.Lease)) {
	t := cp.e.t
	ctx := context.Background()
	leases := s.admin.CoordinationV1().Leases(cp.leases)
	l, err := leases.Get(ctx, nodestate.LeaseName(node), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: nodestate.LeaseName(node), Labels: map[string]string{nodestate.Label: node}}}
		change(l)
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
	} else if err == nil {
		change(l)
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// removeAgent deletes node's agent Lease.
func (cp *fakeNodes) removeAgent(node string) {
	err := s.admin.CoordinationV1().Leases(cp.leases).Delete(context.Background(), nodestate.LeaseName(node), metav1.DeleteOptions{})
	if err != nil {
		cp.e.t.Fatal(err)
	}
}

// record reads the rollout record; nil when there is none.
func (e *env) record() (*rollout.Record, *corev1.ConfigMap) {
	e.t.Helper()
	cm, err := s.admin.CoreV1().ConfigMaps(e.ns).Get(context.Background(), rollout.DefaultConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := rollout.FromConfigMap(cm)
	if err != nil {
		e.t.Fatal(err)
	}
	return r, cm
}

// wantNoRecord fails the test when a rollout record exists.
func (e *env) wantNoRecord() {
	e.t.Helper()
	if r, _ := e.record(); r != nil {
		e.t.Fatalf("a rollout record was written: %+v", r.Status)
	}
}

// standIn moves the record as node's agent would at its turn: begin, then
// finish with outcome, each a compare-and-swap write of the record.
func (e *env) standIn(node string, outcome rollout.NodePhase, message string) {
	e.t.Helper()
	clock := func() rollout.Clock { return rollout.Clock{Now: time.Now(), By: "stand-in-" + node} }
	var id int64
	e.changeRecord(func(r *rollout.Record) (bool, error) {
		id = r.Status.ID
		return true, r.BeginNode(clock(), id, node, []string{"kube-apiserver"}, "backup-"+node)
	})
	e.changeRecord(func(r *rollout.Record) (bool, error) {
		return true, r.FinishNode(clock(), id, node, rollout.Outcome{Phase: outcome, Components: []string{"kube-apiserver"}, Message: message})
	})
}

// changeRecord applies change to the record with compare-and-swap.
func (e *env) changeRecord(change func(r *rollout.Record) (bool, error)) {
	e.t.Helper()
	cms := s.admin.CoreV1().ConfigMaps(e.ns)
	for {
		cm, err := cms.Get(context.Background(), rollout.DefaultConfigMap, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		if _, changed, err := rollout.Apply(cm, change); err != nil || !changed {
			e.t.Fatalf("change the record: %v (changed %v)", err, changed)
		}
		_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		return
	}
}

// rolloutStatus is `rollout status -o json`.
type rolloutStatus struct {
	Record   string          `json:"record"`
	Rollout  *rollout.Status `json:"rollout"`
	LiveHash string          `json:"liveHash"`
	Nodes    []struct {
		Name   string          `json:"name"`
		Agent  nodestate.Agent `json:"agent"`
		InSync string          `json:"inSync"`
	} `json:"nodes"`
}

func (e *env) rolloutStatus() rolloutStatus {
	e.t.Helper()
	r := e.plugin("rollout", "status", "-o", "json")
	wantExit(e.t, r, 0)
	var st rolloutStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		e.t.Fatalf("rollout status -o json: %v\n%s", err, r.stdout)
	}
	return st
}

// rolloutEvents lists the reasons of the Events on the rollout record,
// sorted: Events made within the same second have no order.
func (e *env) rolloutEvents() []string {
	e.t.Helper()
	list, err := s.admin.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + rollout.DefaultConfigMap})
	if err != nil {
		e.t.Fatal(err)
	}
	var reasons []string
	for _, ev := range list.Items {
		reasons = append(reasons, ev.Reason)
	}
	slices.Sort(reasons)
	return reasons
}

// wantStderr fails the test unless r's stderr holds every one of subs.
func wantStderr(t *testing.T, r result, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(r.stderr, sub) {
			t.Fatalf("stderr does not say %q: %s", sub, r)
		}
	}
}

// wantEnded is wantExit for a command that follows a rollout: its progress
// goes to stderr line by line, and a failure ends it with one error line.
func wantEnded(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %s", code, r)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	errorLines := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "error: ") {
			errorLines++
		}
	}
	if code != 0 && (errorLines != 1 || !strings.HasPrefix(lines[len(lines)-1], "error: ")) {
		t.Fatalf("want the progress, then one error line on stderr, got %s", r)
	}
	if code == 0 && errorLines != 0 {
		t.Fatalf("exit 0 with an error line: %s", r)
	}
}
