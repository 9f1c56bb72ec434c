package reconfigure

import (
	"context"
	"errors"
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
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The etcd lock is one Lease for the whole cluster: taken when free, refused
// while another holder renews it (exit 4, naming the node whose member it
// changes), taken over once seen unrenewed for its whole duration, and
// deleted when let go. Who renews is judged by watching the Lease change,
// never by its renewTime: the abandoned Lease below says it was renewed an
// hour from now. (That two processes exclude each other through the real
// API server is the e2e suite's to show.)
func TestEtcdLock(t *testing.T) {
	ctx := context.Background()
	newLeases := func() (*engine.Engine, *fake.Clientset) {
		client := casfake.Leases(fake.NewClientset())
		return engine.New(client, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey},
			engine.Options{Timeout: 5 * time.Second}), client
	}
	other := func(client *fake.Clientset, holder string, seconds int32) {
		t.Helper()
		renew := metav1.NewMicroTime(time.Now().Add(time.Hour))
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: EtcdLockLease, Labels: map[string]string{EtcdLockLabel: "cp-2"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &renew},
		}
		if _, err := client.CoordinationV1().Leases("kube-system").Create(ctx, l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	holderOf := func(client *fake.Clientset) string {
		t.Helper()
		l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, EtcdLockLease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *l.Spec.HolderIdentity + " " + l.Labels[EtcdLockLabel]
	}

	t.Run("free: taken, and deleted when let go", func(t *testing.T) {
		e, client := newLeases()
		lock, err := lockEtcd(ctx, e, "cp-1", "reconfigure/cp-1/1", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := holderOf(client); got != "reconfigure/cp-1/1 cp-1" {
			t.Errorf("holder and node %q", got)
		}
		if err := lock.Stop(); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoordinationV1().Leases("kube-system").Get(ctx, EtcdLockLease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the lease is still there: %v", err)
		}
	})

	t.Run("held by a live holder: refused with exit 4, naming it", func(t *testing.T) {
		e, client := newLeases()
		other(client, "agent/cp-2/7", 60)
		stop := make(chan struct{})
		defer close(stop)
		go func() { // the holder renews
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, EtcdLockLease, metav1.GetOptions{})
				if err == nil {
					now := metav1.NowMicro()
					l.Spec.RenewTime = &now
					_, _ = client.CoordinationV1().Leases("kube-system").Update(ctx, l, metav1.UpdateOptions{})
				}
			}
		}()
		_, err := lockEtcd(ctx, e, "cp-1", "reconfigure/cp-1/1", nil, 0)
		var busy *EtcdBusyError
		if exitcode.FromError(err) != exitcode.Conflict || !errors.As(err, &busy) {
			t.Fatalf("want exit 4 and an EtcdBusyError, got %d: %v", exitcode.FromError(err), err)
		}
		want := "another etcd member is being changed (on node cp-2, by agent/cp-2/7, which holds lease kube-system/kubeadmcfg-etcd-member and renews it); one member is changed at a time: try again once it is done"
		if err.Error() != want {
			t.Errorf("message:\n%s\nwant\n%s", err, want)
		}
		if got := holderOf(client); got != "agent/cp-2/7 cp-2" {
			t.Errorf("the live holder's lease was taken: %q", got)
		}
	})

	t.Run("abandoned: taken over once seen unrenewed for its duration", func(t *testing.T) {
		e, client := newLeases()
		other(client, "reconfigure/cp-2/9", 1)
		start := time.Now()
		lock, err := lockEtcd(ctx, e, "cp-1", "reconfigure/cp-1/1", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = lock.Stop() }()
		if took := time.Since(start); took < time.Second {
			t.Errorf("taken over after %s, before its 1s duration was watched", took)
		}
		if got := holderOf(client); got != "reconfigure/cp-1/1 cp-1" {
			t.Errorf("holder and node %q", got)
		}
	})
}

// Right before the member's manifest is replaced, the run must show that
// it still holds the etcd lock by a renewal written just then: a holder
// whose renewals fail (its API server restarting, say) may have been taken
// over by another node's change, so it restarts nothing, and the cluster
// is not even checked. (The review's scenario: renewals answered 503 while
// another holder takes the lock over; lock.Err() stays nil throughout.)
func TestEtcdGuardRestartsNothingWithoutTheLock(t *testing.T) {
	ctx := context.Background()
	client := casfake.Leases(fake.NewClientset())
	var failing atomic.Bool
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, apierrors.NewServiceUnavailable("the API server is restarting")
		}
		return false, nil, nil
	})
	e := engine.New(client, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey}, engine.Options{Timeout: 5 * time.Second})
	lock, err := lockEtcd(ctx, e, "cp-1", "agent/cp-1/1", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Stop() }()
	g := &etcdGuard{node: "cp-1", lock: lock} // no client: a check would panic
	if err := g.before(ctx, controlplane.APIServer); err != nil {
		t.Fatalf("another component needs no lock: %v", err)
	}
	failing.Store(true)
	err = g.before(ctx, controlplane.Etcd)
	if exitcode.FromError(err) != exitcode.Conflict || !strings.Contains(err.Error(),
		"the etcd lock is not surely this run's any more, so the etcd member of node cp-1 was not changed") {
		t.Fatalf("before with failing renewals: %v", err)
	}
	if lock.Err() != nil {
		t.Fatalf("Err: %v", lock.Err())
	}
	if err := g.confirm(ctx, controlplane.Etcd); err == nil {
		t.Fatal("a put-back's confirm with failing renewals passed")
	}
}
