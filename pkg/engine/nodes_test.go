package engine

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The agent's condition is written beside the kubelet's, and reading it
// back finds it and the Node's UID.
func TestSetNodeConditionKeepsTheOthers(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: at}
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-0", UID: "n0"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}})
	e := New(cs, Target{Namespace: "kube-system", Name: "kubeadmcfg-rollout"}, Options{Timeout: 5 * time.Second})
	ctx := context.Background()
	if c, uid, err := e.NodeCondition(ctx, "cp-0", "KubeadmConfigOutOfDate"); err != nil || c != nil || uid != "n0" {
		t.Fatalf("before: %v %q %v; want no condition, uid n0", c, uid, err)
	}
	mine := corev1.NodeCondition{Type: "KubeadmConfigOutOfDate", Status: corev1.ConditionTrue, Reason: "ComponentsDiffer",
		Message: "kube-apiserver differs", LastTransitionTime: at, LastHeartbeatTime: at}
	for range 2 { // written again, it stays one condition
		if uid, err := e.SetNodeCondition(ctx, "cp-0", mine); err != nil || uid != "n0" {
			t.Fatalf("set: %q %v", uid, err)
		}
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "cp-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byType := cmpopts.SortSlices(func(a, b corev1.NodeCondition) bool { return a.Type < b.Type })
	if diff := cmp.Diff([]corev1.NodeCondition{ready, mine}, n.Status.Conditions, byType); diff != "" {
		t.Errorf("conditions (-want +got)\n%s", diff)
	}
	got, _, err := e.NodeCondition(ctx, "cp-0", "KubeadmConfigOutOfDate")
	if err != nil || got == nil || got.Reason != "ComponentsDiffer" {
		t.Errorf("read back: %v %v", got, err)
	}
	if _, _, err := e.NodeCondition(ctx, "cp-9", "KubeadmConfigOutOfDate"); exitcode.FromError(err) != exitcode.NotFound {
		t.Errorf("a node that does not exist: got %v (exit %d), want exit 5", err, exitcode.FromError(err))
	}
}

// An API server shutting down behind the load balancer refuses the read
// and the write of the condition once each (503): both go through.
func TestNodeConditionOutlivesAnAPIServerShuttingDown(t *testing.T) {
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-0", UID: "n0"}})
	refused := map[string]bool{}
	cs.PrependReactor("*", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if !refused[action.GetVerb()] {
			refused[action.GetVerb()] = true
			return true, nil, apierrors.NewServiceUnavailable("apiserver is shutting down")
		}
		return false, nil, nil
	})
	e := New(cs, Target{Namespace: "kube-system", Name: "kubeadmcfg-rollout"}, Options{Timeout: 5 * time.Second})
	ctx := context.Background()
	if _, uid, err := e.NodeCondition(ctx, "cp-0", "KubeadmConfigOutOfDate"); err != nil || uid != "n0" {
		t.Fatalf("read: %q %v", uid, err)
	}
	c := corev1.NodeCondition{Type: "KubeadmConfigOutOfDate", Status: corev1.ConditionFalse, Reason: "InSync"}
	if _, err := e.SetNodeCondition(ctx, "cp-0", c); err != nil {
		t.Fatalf("write: %v", err)
	}
	if !refused["list"] || !refused["patch"] {
		t.Fatalf("the fake refused %v; want the list and the patch refused once", refused)
	}
}

// An Event on a Node names it by UID, as kubectl describe node searches,
// and carries what the API server requires of an Event on a cluster-wide
// object outside default: its time and who reports it.
func TestNodeEvent(t *testing.T) {
	cs := fake.NewClientset()
	e := New(cs, Target{Namespace: "kube-system", Name: "kubeadmcfg-rollout"}, Options{})
	if err := e.NodeEvent(context.Background(), "cp-0", "n0", "agent/cp-0/1-abc", corev1.EventTypeWarning,
		"KubeadmConfigOutOfDate", "Check", "kube-apiserver differs"); err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("events: %v, %v", list, err)
	}
	ev := list.Items[0]
	if diff := cmp.Diff(corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "cp-0", UID: "n0"}, ev.InvolvedObject); diff != "" {
		t.Errorf("involved object (-want +got)\n%s", diff)
	}
	if ev.EventTime.IsZero() || ev.ReportingController != NodeReportingController || ev.ReportingInstance != "agent/cp-0/1-abc" ||
		ev.Action != "Check" || ev.Reason != "KubeadmConfigOutOfDate" || ev.Type != corev1.EventTypeWarning {
		t.Errorf("got %+v", ev)
	}
}
