package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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

// TestEventOutlivesAnAPIServerShuttingDown: behind a load balancer, an
// Event's create may reach an API server that is shutting down, which
// refuses it without creating it (503, or 429 with Retry-After). The Event
// is created once all the same; a refusal of another kind is not retried.
func TestEventOutlivesAnAPIServerShuttingDown(t *testing.T) {
	shuttingDown := []error{
		apierrors.NewServiceUnavailable("apiserver is shutting down"),
		apierrors.NewTooManyRequests("The apiserver is shutting down, please try again later.", 1),
	}
	for _, refusal := range shuttingDown {
		cs := fake.NewClientset()
		refused := 0
		cs.PrependReactor("create", "events", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if refused < 2 {
				refused++
				return true, nil, refusal
			}
			return false, nil, nil
		})
		e := New(cs, Target{Namespace: "kube-system", Name: "kubeadmcfg-rollout"}, Options{})
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadmcfg-rollout"}}
		if err := e.Event(context.Background(), cm, corev1.EventTypeNormal, "NodeStarted", "cp-0 started"); err != nil {
			t.Fatalf("%v: %v", refusal, err)
		}
		if err := e.NodeEvent(context.Background(), "cp-0", "u", "agent", corev1.EventTypeNormal, "KubeadmConfigInSync", "Check", "in sync"); err != nil {
			t.Fatalf("%v: %v", refusal, err)
		}
		list, err := cs.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{})
		if err != nil || len(list.Items) != 2 {
			t.Fatalf("%v: want the two Events once each, got %d (%v)", refusal, len(list.Items), err)
		}
	}

	// A proxy answers 503 after the API server created the Event: the
	// next attempt finds it, and it is recorded once.
	cs := fake.NewClientset()
	landed := false
	cs.PrependReactor("create", "events", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if landed {
			return false, nil, nil
		}
		landed = true
		ev := action.(k8stesting.CreateAction).GetObject().(*corev1.Event)
		if err := cs.Tracker().Create(corev1.SchemeGroupVersion.WithResource("events"), ev, ev.Namespace); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewServiceUnavailable("no answer from the upstream")
	})
	e := New(cs, Target{Namespace: "kube-system", Name: "kubeadmcfg-rollout"}, Options{})
	if err := e.NodeEvent(context.Background(), "cp-0", "u", "agent", corev1.EventTypeNormal, "KubeadmConfigInSync", "Check", "in sync"); err != nil {
		t.Fatalf("an Event created under a 503: %v", err)
	}
	if list, err := cs.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{}); err != nil || len(list.Items) != 1 {
		t.Fatalf("an Event created under a 503: want it once, got %d (%v)", len(list.Items), err)
	}

	cs = fake.NewClientset()
	creates := 0
	cs.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates++
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New("no"))
	})
	e = New(cs, Target{Namespace: "kube-system", Name: "kubeadmcfg-rollout"}, Options{})
	if err := e.NodeEvent(context.Background(), "cp-0", "u", "agent", corev1.EventTypeNormal, "KubeadmConfigInSync", "Check", "in sync"); err == nil || creates != 1 {
		t.Errorf("a forbidden create: %v after %d creates, want an error after one", err, creates)
	}
}
