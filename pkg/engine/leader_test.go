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
