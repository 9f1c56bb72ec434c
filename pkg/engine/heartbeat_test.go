package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// TestHeartbeatObserverUsesLocalTime: a Lease is judged by when this
// process sees it change, never by the renewTime another host's clock
// wrote: a renewTime an hour ahead does not keep a silent Lease alive, and
// one a year behind does not make a renewed Lease stale.
func TestHeartbeatObserverUsesLocalTime(t *testing.T) {
	ctx := context.Background()
	holder := "controller-1/42/ab"
	future := metav1.NewMicroTime(time.Now().Add(time.Hour))
	client := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "run-00", Namespace: "kube-system", ResourceVersion: "1"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &future},
	})
	e := New(client, Target{Namespace: "kube-system", Name: "kubeadmcfg-upgrade"}, Options{})
	clock := time.Unix(1000, 0)
	o := e.NewHeartbeatObserver()
	o.now = func() time.Time { return clock }
	observe := func() {
		t.Helper()
		if err := o.Observe(ctx, []string{"run-00", "run-01"}); err != nil {
			t.Fatal(err)
		}
	}
	observe()
	clock = clock.Add(10 * time.Second)
	observe()
	if quiet, renewed := o.Silence("run-00", holder); quiet != 10*time.Second || renewed {
		t.Fatalf("unchanged for 10s with a renewTime an hour ahead: quiet %s, renewed %v", quiet, renewed)
	}
	// Renewed, with a renewTime a year behind.
	past := metav1.NewMicroTime(time.Now().AddDate(-1, 0, 0))
	leases := client.CoordinationV1().Leases("kube-system")
	l, _ := leases.Get(ctx, "run-00", metav1.GetOptions{})
	l.ResourceVersion, l.Spec.RenewTime = "2", &past
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Second)
	observe()
	if quiet, renewed := o.Silence("run-00", holder); quiet != 0 || !renewed {
		t.Fatalf("just renewed: quiet %s, renewed %v", quiet, renewed)
	}
	// Taken over by another runner: silent for the first since its last renewal.
	other := "controller-2/7/cd"
	l.ResourceVersion, l.Spec.HolderIdentity = "3", &other
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(4 * time.Second)
	observe()
	if quiet, _ := o.Silence("run-00", holder); quiet != 4*time.Second {
		t.Fatalf("taken over: quiet %s", quiet)
	}
	// A Lease that never appeared is silent since it was first looked for.
	if quiet, renewed := o.Silence("run-01", holder); quiet != 15*time.Second || renewed {
		t.Fatalf("missing Lease: quiet %s, renewed %v", quiet, renewed)
	}
}

func TestStartHeartbeatTakesOverALeftLease(t *testing.T) {
	ctx := context.Background()
	old := "dead-runner"
	client := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: HeartbeatName("kubeadmcfg-upgrade", 0), Namespace: "kube-system"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &old},
	})
	e := New(client, Target{Namespace: "kube-system", Name: "kubeadmcfg-upgrade"}, Options{})
	hb, err := e.StartHeartbeat(ctx, e.HeartbeatNames()[0], "new-runner", time.Second, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "kubeadmcfg-run-kubeadmcfg-upgrade-00", metav1.GetOptions{})
	if err != nil || *l.Spec.HolderIdentity != "new-runner" || *l.Spec.LeaseDurationSeconds != 3 || l.Labels[HeartbeatLabel] != "kubeadmcfg-upgrade" {
		t.Fatalf("%v %+v", err, l)
	}
	hb.Stop()
	if _, err := client.CoordinationV1().Leases("kube-system").Get(ctx, l.Name, metav1.GetOptions{}); err == nil {
		t.Fatal("Stop left the Lease")
	}
}

// TestServerClock: stamps come from the server's Date header, whatever
// the local clock says.
func TestServerClock(t *testing.T) {
	local := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &ServerClock{Local: func() time.Time { return local }}
	if !c.Now().Equal(local) || c.FromServer() {
		t.Fatal("before any response the local clock must be used")
	}
	server := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Date", server.Format(http.TimeFormat))
	}))
	defer srv.Close()
	client := &http.Client{Transport: c.WrapTransport(http.DefaultTransport)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if d := c.Now().Sub(server); !c.FromServer() || d < 500*time.Millisecond || d > 2*time.Second {
		t.Fatalf("server time %s, clock says %s", server, c.Now())
	}
}

// TestHeartbeatRenewalPanic: the renewal runs in a goroutine of its own; a
// panic there (here, in the clock that stamps renewTime) stops the
// heartbeat and is reported by Err after Stop as an internal error, instead
// of ending the process.
func TestHeartbeatRenewalPanic(t *testing.T) {
	e := New(fake.NewClientset(), Target{Namespace: "kube-system", Name: "kubeadmcfg-upgrade"}, Options{})
	var calls atomic.Int32
	now := func() time.Time {
		if calls.Add(1) > 2 { // the two stamps of the taking, then renewals
			panic("clock broke")
		}
		return time.Now()
	}
	h, err := e.StartHeartbeat(context.Background(), "run-00", "runner-1", 10*time.Millisecond, now)
	if err != nil {
		t.Fatal(err)
	}
	for calls.Load() <= 2 {
		time.Sleep(5 * time.Millisecond)
	}
	h.Stop()
	if err := h.Err(); exitcode.FromError(err) != exitcode.Internal || !strings.Contains(err.Error(), "internal error: clock broke") {
		t.Fatalf("Err() = %v, want the panic as an internal error", err)
	}
}
