package engine

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEventNamesTheConfigMap(t *testing.T) {
	cs := fake.NewClientset()
	e := New(cs, Target{Namespace: "kube-system", Name: "kubeadmcfg-rollout"}, Options{})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadmcfg-rollout", UID: "u1", ResourceVersion: "7"}}
	if err := e.Event(context.Background(), cm, corev1.EventTypeNormal, "NodeStarted", "cp-0 started"); err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("events: %v, %v", list, err)
	}
	ev := list.Items[0]
	want := corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "kube-system", Name: "kubeadmcfg-rollout", UID: "u1", ResourceVersion: "7"}
	if diff := cmp.Diff(want, ev.InvolvedObject); diff != "" {
		t.Errorf("involved object (-want +got)\n%s", diff)
	}
	if ev.Reason != "NodeStarted" || ev.Message != "cp-0 started" || ev.Type != corev1.EventTypeNormal {
		t.Errorf("got %s %s %q", ev.Type, ev.Reason, ev.Message)
	}
}

func TestLeasesBySelector(t *testing.T) {
	lease := func(name string, labels map[string]string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: labels}}
	}
	cs := fake.NewClientset(lease("a", map[string]string{"kubeadmcfg.io/agent": "cp-0"}), lease("b", nil))
	e := New(cs, Target{Namespace: "kube-system", Name: "kubeadmcfg-rollout"}, Options{})
	got, err := e.Leases(context.Background(), "kubeadmcfg.io/agent")
	if err != nil || len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("got %v, %v; want lease a alone", got, err)
	}
}
