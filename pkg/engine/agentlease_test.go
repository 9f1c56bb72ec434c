package engine

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/casfake"
)

// A held Lease carries its annotations, is created again when deleted,
// and gives up, saying so, when another holder takes it.
func TestHeldLease(t *testing.T) {
	ctx := context.Background()
	client := casfake.Leases(fake.NewClientset())
	e := New(client, Target{Namespace: "kube-system", Name: "kubeadmcfg-rollout"}, Options{})
	leases := client.CoordinationV1().Leases("kube-system")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h, err := e.HoldLease(ctx, HeldLeaseSpec{Name: "agent-cp-0", Holder: "me", Labels: map[string]string{"kubeadmcfg.io/agent": "cp-0"},
		Interval: time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	get := func() *coordinationv1.Lease {
		t.Helper()
		l, err := leases.Get(ctx, "agent-cp-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	waitFor := func(what string, ok func(l *coordinationv1.Lease) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			if l, err := leases.Get(ctx, "agent-cp-0", metav1.GetOptions{}); err == nil && ok(l) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the lease never %s: %+v", what, get())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	l := get()
	if *l.Spec.HolderIdentity != "me" || !l.Spec.RenewTime.Time.Equal(now) || *l.Spec.LeaseDurationSeconds != 3*3600 ||
		l.Labels["kubeadmcfg.io/agent"] != "cp-0" || l.Labels["app.kubernetes.io/managed-by"] != "kubectl-kubeadmcfg" {
		t.Fatalf("lease: %+v", l)
	}
	// Annotate publishes at once, without waiting for the interval.
	now = now.Add(time.Second)
	h.Annotate("kubeadmcfg.io/node-state", `{"inSync":true}`)
	waitFor("carried the annotation", func(l *coordinationv1.Lease) bool {
		return l.Annotations["kubeadmcfg.io/node-state"] == `{"inSync":true}` && l.Spec.RenewTime.Time.Equal(now)
	})
	// Deleted by someone: created again at the next renewal.
	if err := leases.Delete(ctx, "agent-cp-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.Annotate("kubeadmcfg.io/node-state", `{"inSync":false}`)
	waitFor("came back", func(l *coordinationv1.Lease) bool {
		return l.Annotations["kubeadmcfg.io/node-state"] == `{"inSync":false}`
	})
	// Taken over by another holder: the next renewal finds out and stops.
	other := get()
	holder := "another"
	other.Spec.HolderIdentity = &holder
	if _, err := leases.Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.Annotate("x", "y")
	select {
	case <-h.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the renewal did not notice the takeover")
	}
	if err := h.Err(); err == nil || !strings.Contains(err.Error(), `the lease agent-cp-0 was taken over by "another"`) {
		t.Fatalf("Err: %v", err)
	}
	if *get().Spec.HolderIdentity != "another" {
		t.Error("the lease was written over after the takeover")
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(ctx, "agent-cp-0", metav1.GetOptions{}); err != nil {
		t.Errorf("Stop deleted a lease that was no longer its own: %v", err)
	}
}

// A holder whose renewals fail cannot tell whether another process has
// taken its Lease over: past half the Lease's duration Held says so, and
// Confirm, the proof asked for right before an act that must not happen
// twice at once, fails until a renewal is written again. Err, which only a
// renewal that reached the API sets, stays nil all along: what a holder
// checked before, and why a taken-over holder could still act.
func TestHeldLeaseFencesAHolderWhoseRenewalsFail(t *testing.T) {
	ctx := context.Background()
	client := casfake.Leases(fake.NewClientset())
	var failing atomic.Bool // the API refuses every renewal while set
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, apierrors.NewServiceUnavailable("etcd is restarting")
		}
		return false, nil, nil
	})
	e := New(client, Target{Namespace: "kube-system", Name: "kubeadm-config"}, Options{})
	h, err := e.HoldLease(ctx, HeldLeaseSpec{Name: "lock", Holder: "me", Interval: 50 * time.Millisecond, Duration: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Stop() }()
	if err := h.Held(); err != nil {
		t.Fatalf("a lease just taken: %v", err)
	}
	if err := h.Confirm(ctx); err != nil {
		t.Fatalf("confirm of a lease renewed fine: %v", err)
	}
	failing.Store(true)
	time.Sleep(400 * time.Millisecond) // past half the duration
	if err := h.Err(); err != nil {
		t.Fatalf("Err: %v", err)
	}
	if err := h.Held(); err == nil || !strings.Contains(err.Error(), "the lease lock was last renewed") {
		t.Errorf("Held while renewals fail: %v", err)
	}
	if err := h.Confirm(ctx); err == nil || !strings.Contains(err.Error(), "could not be renewed just now") {
		t.Errorf("Confirm while renewals fail: %v", err)
	}
	failing.Store(false)
	if err := h.Confirm(ctx); err != nil {
		t.Errorf("Confirm once renewals work again: %v", err)
	}
	if err := h.Held(); err != nil {
		t.Errorf("Held once renewed: %v", err)
	}
}
