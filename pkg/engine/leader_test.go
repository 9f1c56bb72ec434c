package engine

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// TestLeaderRecheckedBeforeEachWrite (L1): leadership moves while a write
// retries. The Lease is read again before every write, so the old holder
// stops: it reports the write skipped and sends nothing more, or, when a
// write of its own was lost and may still land, says the outcome is
// unknown.
func TestLeaderRecheckedBeforeEachWrite(t *testing.T) {
	leaseGVR := coordinationv1.SchemeGroupVersion.WithResource("leases")
	for _, tc := range []struct {
		name     string
		answer   error // the answer to the first write, sent while still the holder
		wantCode exitcode.Code
	}{
		{"conflict", apierrors.NewConflict(cmGVR.GroupResource(), "kubeadm-config", errors.New("rv")), exitcode.OK},
		{"answer lost", io.ErrUnexpectedEOF, exitcode.OutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			me := "controller-0_1234"
			cs := fake.NewClientset(configMap("1", "0", ""), &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager", Namespace: "kube-system", ResourceVersion: "1"},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &me},
			})
			sent := 0
			cs.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				if sent++; sent > 1 {
					return false, nil, nil
				}
				other := "controller-1_5678"
				if err := cs.Tracker().Update(leaseGVR, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager", Namespace: "kube-system", ResourceVersion: "2"},
					Spec:       coordinationv1.LeaseSpec{HolderIdentity: &other},
				}, "kube-system"); err != nil {
					return true, nil, err
				}
				return true, nil, tc.answer
			})
			runs := 0
			e := New(cs, testTarget(), Options{Timeout: 5 * time.Second,
				Leader: &Leader{Namespace: "kube-system", Name: "kube-controller-manager", Identity: "controller-0"}})
			res, err := e.Update(context.Background(), increment(&runs))
			if got := exitcode.FromError(err); got != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d", got, err, tc.wantCode)
			}
			if sent != 1 || liveData(t, cs) != "0" {
				t.Fatalf("%d writes sent by a process that no longer holds the Lease; document %q", sent, liveData(t, cs))
			}
			if tc.wantCode == exitcode.OK && (!res.Skipped || res.Changed) {
				t.Fatalf("skipped %v (%q), changed %v: want the write reported skipped", res.Skipped, res.SkipReason, res.Changed)
			}
		})
	}
}

// TestLeaderExpiryIsObserved (L1): the Lease names this process, and its
// renewTime looks fresh because it was stamped an hour ahead of this host's
// clock (this host's clock is behind its holder's, or stepped back since).
// Nobody renews it: it has expired, and the write is skipped. Renewed while
// watched, the same Lease is alive and the write goes ahead. A Lease that
// names another holder is skipped without watching it.
func TestLeaderExpiryIsObserved(t *testing.T) {
	leaseGVR := coordinationv1.SchemeGroupVersion.WithResource("leases")
	for _, tc := range []struct {
		name, holder string
		renewed      bool
		wantSkip     string
		wantWatches  int
	}{
		{"expired, stamped ahead", "controller-0_1234", false, "lease kube-system/kube-controller-manager has expired: no one holds it", 1},
		{"renewed, stamped ahead", "controller-0_1234", true, "", 1},
		{"another holder", "controller-1_5678", false, "not the holder of lease kube-system/kube-controller-manager (holder: controller-1_5678)", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ahead, seconds := metav1.NewMicroTime(time.Now().Add(time.Hour)), int32(1)
			lease := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager", Namespace: "kube-system", ResourceVersion: "1"},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &tc.holder, RenewTime: &ahead, LeaseDurationSeconds: &seconds},
			}
			cs := fake.NewClientset(configMap("1", "0", ""), lease)
			watches := 0
			cs.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
				watches++
				w := watch.NewFakeWithChanSize(1, false)
				if tc.renewed {
					renewed := lease.DeepCopy()
					renewed.ResourceVersion = "2"
					if err := cs.Tracker().Update(leaseGVR, renewed, "kube-system"); err != nil {
						return true, nil, err
					}
					w.Modify(renewed)
				}
				return true, w, nil
			})
			runs := 0
			e := New(cs, testTarget(), Options{Timeout: 5 * time.Second,
				Leader: &Leader{Namespace: "kube-system", Name: "kube-controller-manager", Identity: "controller-0"}})
			res, err := e.Update(context.Background(), increment(&runs))
			if err != nil {
				t.Fatal(err)
			}
			if res.SkipReason != tc.wantSkip || res.Changed == (tc.wantSkip != "") {
				t.Fatalf("skipped %q, changed %v; want skipped %q", res.SkipReason, res.Changed, tc.wantSkip)
			}
			if watches != tc.wantWatches {
				t.Fatalf("%d watches of the Lease, want %d", watches, tc.wantWatches)
			}
		})
	}
}
