package queue

import (
	"context"
	"testing"
	"time"
)

// TestWaiterJudgesTheHolderByItsOwnDuration (review Q2): a holder with a
// 3 s TTL renews every second; a waiter whose own TTL is half a second must
// not take it for dead between two renewals, but wait for it to let go.
func TestWaiterJudgesTheHolderByItsOwnDuration(t *testing.T) {
	cs := newFake()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	holder := newQueue(cs, "holder")
	holder.TTL = 3 * time.Second
	releaseHolder, err := holder.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := leasesOf(t, cs, "holder")
	waiter := newQueue(cs, "impatient")
	waiter.TTL = ttl / 2
	got := make(chan error, 1)
	go func() {
		release, err := waiter.Acquire(ctx)
		if err == nil {
			release()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the waiter got the turn (%v) while the holder, renewing every %s, still held it; holder's Leases now %v",
			err, holder.TTL/3, leasesOf(t, cs, "holder"))
	case <-time.After(3 * time.Second):
	}
	if now := leasesOf(t, cs, "holder"); len(now) != 1 || now[0] != held[0] {
		t.Fatalf("the live holder's Lease %v was removed (now %v)", held, now)
	}
	releaseHolder()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
