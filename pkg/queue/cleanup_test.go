package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// strictLeases refuses every request made under a context that has ended,
// as client-go's request path does before sending anything (the fake
// clientset ignores contexts).
type strictLeases struct {
	coordinationv1client.LeasesGetter
}

func (g strictLeases) Leases(namespace string) coordinationv1client.LeaseInterface {
	return strictLease{g.LeasesGetter.Leases(namespace)}
}

type strictLease struct {
	coordinationv1client.LeaseInterface
}

func (l strictLease) Create(ctx context.Context, o *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return l.LeaseInterface.Create(ctx, o, opts)
}

func (l strictLease) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return l.LeaseInterface.List(ctx, opts)
}

func (l strictLease) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return l.LeaseInterface.Watch(ctx, opts)
}

func (l strictLease) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*coordinationv1.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return l.LeaseInterface.Patch(ctx, name, pt, data, opts, sub...)
}

func (l strictLease) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.LeaseInterface.Delete(ctx, name, opts)
}

func strictQueue(cs *fake.Clientset, identity string) *Queue {
	q := newQueue(cs, identity)
	q.Client = strictLeases{cs.CoordinationV1()}
	return q
}

// leasesOf returns the names of the queue Leases held by identity.
func leasesOf(t *testing.T, cs *fake.Clientset, identity string) []string {
	t.Helper()
	list, err := cs.CoordinationV1().Leases("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == identity {
			out = append(out, l.Name)
		}
	}
	return out
}

// TestWritersOutOfTimeDeleteTheirLeases (review Q1): writers whose deadline
// passes, while queued behind a live holder or while holding the turn,
// still delete their own Lease, though every request under their expired
// context is refused. With a deadline shorter than the TTL, a Lease left
// behind would make every later writer queue and time out in its turn.
func TestWritersOutOfTimeDeleteTheirLeases(t *testing.T) {
	t.Run("timed out while queued", func(t *testing.T) {
		cs := newFake()
		long, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		releaseHolder, err := strictQueue(cs, "holder").Acquire(long)
		if err != nil {
			t.Fatal(err)
		}
		defer releaseHolder()
		for _, id := range []string{"w1", "w2", "w3"} {
			ctx, cancel := context.WithTimeout(context.Background(), ttl/2)
			_, err := strictQueue(cs, id).Acquire(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: want the deadline to pass in the queue, got %v", id, err)
			}
			if left := leasesOf(t, cs, id); len(left) != 0 {
				t.Fatalf("%s timed out and left its Lease %v", id, left)
			}
		}
		if len(leasesOf(t, cs, "holder")) != 1 {
			t.Fatal("the live holder's Lease was removed")
		}
	})
	t.Run("deadline passed while holding the turn", func(t *testing.T) {
		cs := newFake()
		ctx, cancel := context.WithTimeout(context.Background(), ttl/2)
		defer cancel()
		release, err := strictQueue(cs, "me").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		<-ctx.Done() // the write kept conflicting until the deadline
		release()
		if left := leasesOf(t, cs, "me"); len(left) != 0 {
			t.Fatalf("release after the deadline left %v", left)
		}
	})
}
