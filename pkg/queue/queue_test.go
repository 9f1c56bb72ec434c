package queue

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// Unit tests of one code path each against a fake clientset (it keeps
// resourceVersions and delivers watch events). The proof that writers keep
// every update under contention runs against the real apiserver in
// internal/e2e.

const ttl = time.Second

// newFake returns a fake clientset that stamps increasing resourceVersions
// on Leases, as the API server does (the fake's store keeps them to itself).
func newFake() *fake.Clientset {
	cs := fake.NewClientset()
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	var mu sync.Mutex
	rv := 100
	next := func() string { mu.Lock(); defer mu.Unlock(); rv++; return strconv.Itoa(rv) }
	cs.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).ResourceVersion = next()
		return false, nil, nil
	})
	cs.PrependReactor("patch", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		obj, err := cs.Tracker().Get(gvr, p.GetNamespace(), p.GetName())
		if err != nil {
			return true, nil, err
		}
		old, _ := json.Marshal(obj)
		patched, err := jsonpatch.MergePatch(old, p.GetPatch())
		if err != nil {
			return true, nil, err
		}
		var l coordinationv1.Lease
		if err := json.Unmarshal(patched, &l); err != nil {
			return true, nil, err
		}
		l.ResourceVersion = next()
		return true, &l, cs.Tracker().Update(gvr, &l, p.GetNamespace())
	})
	return cs
}

func newQueue(cs *fake.Clientset, identity string) *Queue {
	return &Queue{Client: cs.CoordinationV1(), Namespace: "kube-system", Name: "kubeadm-config", Identity: identity, TTL: ttl}
}

// lease puts a queue Lease straight into the store, as another writer would.
func lease(t *testing.T, cs *fake.Clientset, slot int, renewed time.Time, annotations map[string]string) *coordinationv1.Lease {
	t.Helper()
	seconds := int32(1)
	at := metav1.NewMicroTime(renewed)
	holder := "other/1"
	l, err := cs.CoordinationV1().Leases("kube-system").Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: SlotName("kubeadm-config", slot), Labels: map[string]string{QueueLabel: "kubeadm-config"},
			Annotations: annotations},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &at},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func exists(cs *fake.Clientset, name string) bool {
	_, err := cs.CoordinationV1().Leases("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	return err == nil
}

// TestWritersTakeTurnsInJoinOrder: three writers join one after another;
// each gets the turn only after the one before it released.
func TestWritersTakeTurnsInJoinOrder(t *testing.T) {
	cs := newFake()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var order []string
	first, err := newQueue(cs, "w0").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, id := range []string{"w1", "w2"} {
		joined := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := newQueue(cs, id)
			close(joined)
			release, err := q.Acquire(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, id)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			release()
		}()
		<-joined
		time.Sleep(100 * time.Millisecond) // w1 has created its Lease before w2
	}
	mu.Lock()
	if len(order) != 0 {
		t.Fatalf("%v got the turn while w0 held it", order)
	}
	mu.Unlock()
	first()
	wg.Wait()
	if strings.Join(order, ",") != "w1,w2" {
		t.Fatalf("turns taken in order %v, want w1,w2", order)
	}
}

// TestStalenessIsJudgedByLocalTime: a dead writer's Lease whose renewTime
// is an hour in the future (its host's clock was ahead) is still removed
// after it stays unchanged for a TTL here; a live writer's Lease whose
// renewTime is an hour in the past (its clock is behind) but which is
// renewed is never removed, however long it holds the turn.
func TestStalenessIsJudgedByLocalTime(t *testing.T) {
	t.Run("dead lease stamped in the future", func(t *testing.T) {
		cs := newFake()
		dead := lease(t, cs, 0, time.Now().Add(time.Hour), nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		release, err := newQueue(cs, "me").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if exists(cs, dead.Name) {
			t.Fatal("the dead Lease is still there")
		}
		if took := time.Since(start); took < ttl {
			t.Fatalf("the dead Lease was removed after %s, before a TTL of local observation", took)
		}
	})
	t.Run("live lease stamped in the past", func(t *testing.T) {
		cs := newFake()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The holder's clock is an hour behind: every renewTime it writes is
		// an hour old by ours.
		holder := newQueue(cs, "behind")
		holder.Clock = clocktesting.NewFakePassiveClock(time.Now().Add(-time.Hour))
		releaseHolder, err := holder.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			release, err := newQueue(cs, "me").Acquire(ctx)
			if err == nil {
				release()
			}
			got <- err
		}()
		select {
		case err := <-got:
			t.Fatalf("got the turn while a live writer held it (%v)", err)
		case <-time.After(4 * ttl):
		}
		releaseHolder()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	})
}

// TestUnparsablePositionTurnsTheQueueOff: a position that is not a
// resourceVersion cannot be ordered; Acquire fails (the engine then falls
// back to backoff) instead of treating it as position 0.
func TestUnparsablePositionTurnsTheQueueOff(t *testing.T) {
	cs := newFake()
	lease(t, cs, 0, time.Now(), map[string]string{PositionAnnotation: "not-a-version"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := newQueue(cs, "me").Acquire(ctx)
	if err == nil || !strings.Contains(err.Error(), "cannot order the write queue") {
		t.Fatalf("want the queue refused, got %v", err)
	}
	list, _ := cs.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{})
	if len(list.Items) != 1 {
		t.Fatalf("%d Leases left, want only the other writer's", len(list.Items))
	}
}

// TestRenewalStopsWithTheContext: when the command's context ends, the
// Lease is no longer renewed.
func TestRenewalStopsWithTheContext(t *testing.T) {
	cs := newFake()
	ctx, cancel := context.WithCancel(context.Background())
	release, err := newQueue(cs, "me").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(ttl) // three renewal periods
	list, _ := cs.CoordinationV1().Leases("kube-system").List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 1 {
		t.Fatalf("%d Leases", len(list.Items))
	}
	rv := list.Items[0].ResourceVersion
	time.Sleep(ttl)
	again, _ := cs.CoordinationV1().Leases("kube-system").Get(context.Background(), list.Items[0].Name, metav1.GetOptions{})
	if again.ResourceVersion != rv {
		t.Fatal("the Lease was renewed after the context ended")
	}
	release() // no deadline: cleanup within a TTL
	if exists(cs, list.Items[0].Name) {
		t.Fatal("release left the Lease")
	}
}
