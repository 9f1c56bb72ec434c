package nodestate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

func TestNodeStateRoundTrip(t *testing.T) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName("cp-1"), Labels: map[string]string{Label: "cp-1"}}}
	want := State{AgentVersion: "v0.3.0", Differs: []string{"kube-apiserver"}, LiveHash: "sha256:" + strings.Repeat("d", 64), CheckedAt: "2026-12-01T12:00:00Z"}
	if err := SetState(l, want); err != nil {
		t.Fatal(err)
	}
	node, got, ok, err := FromLease(l)
	if err != nil || !ok || node != "cp-1" {
		t.Fatalf("FromLease: %q %v %v", node, ok, err)
	}
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestAgentOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lease coordinationv1.Lease
		ok    bool
		code  exitcode.Code
	}{
		{"not an agent's", coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler"}}, false, 0},
		{"label and name disagree", coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName("cp-0"), Labels: map[string]string{Label: "cp-1"}}}, false, 0},
		{"no state yet", coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName("cp-0"), Labels: map[string]string{Label: "cp-0"}}}, true, 0},
		{"damaged state", coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName("cp-0"), Labels: map[string]string{Label: "cp-0"},
			Annotations: map[string]string{Annotation: `{"inSync": "yes"}`}}}, true, exitcode.Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, state, ok, err := FromLease(&tc.lease)
			if ok != tc.ok || state != nil {
				t.Errorf("got ok %v, state %v; want ok %v and no state", ok, state, tc.ok)
			}
			switch {
			case tc.code == 0 && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.code != 0 && (exitcode.FromError(err) != tc.code || !strings.Contains(fmt.Sprint(err), "is not a node state")):
				t.Errorf("got %v (exit %d), want a damaged-state error (exit %d)", err, exitcode.FromError(err), tc.code)
			}
		})
	}
}

func TestAlive(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *coordinationv1.Lease {
		rt := metav1.NewMicroTime(now.Add(-d))
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &rt}}
	}
	if !Alive(at(DefaultStaleAfter), now, DefaultStaleAfter) {
		t.Error("renewed exactly stale-after ago: want alive")
	}
	if Alive(at(DefaultStaleAfter+time.Second), now, DefaultStaleAfter) {
		t.Error("renewed longer ago than stale-after: want lost")
	}
	if Alive(&coordinationv1.Lease{}, now, DefaultStaleAfter) {
		t.Error("never renewed: want lost")
	}
}
