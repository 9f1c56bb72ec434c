package queue

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// panickyClock panics from its second reading on: Acquire stamps with it
// once, and then only the renewal goroutine reads it.
type panickyClock struct{ reads atomic.Int32 }

func (c *panickyClock) Now() time.Time {
	if c.reads.Add(1) > 1 {
		panic("clock broke")
	}
	return time.Now()
}

func (c *panickyClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestRenewalPanicIsReturnedByRelease: the renewal runs in a goroutine of
// its own; a panic there does not end the process but comes back from
// release as an internal error, after the Lease is deleted as usual.
func TestRenewalPanicIsReturnedByRelease(t *testing.T) {
	cs := newFake()
	clock := &panickyClock{}
	q := newQueue(cs, "me")
	q.TTL, q.Clock = 60*time.Millisecond, clock
	release, err := q.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for clock.reads.Load() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	err = release()
	if exitcode.FromError(err) != exitcode.Internal || !strings.Contains(err.Error(), "internal error: clock broke") {
		t.Fatalf("release() = %v, want the panic as an internal error", err)
	}
	if list, _ := cs.CoordinationV1().Leases("kube-system").List(context.Background(), metav1.ListOptions{}); len(list.Items) != 0 {
		t.Fatalf("%d Leases left behind", len(list.Items))
	}
}
