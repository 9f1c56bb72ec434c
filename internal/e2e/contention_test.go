package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/queue"
)

// TestThirtyTwoWritersLoseNothing: 32 plugin processes x 5 patches, every
// one present, none failed.
func TestThirtyTwoWritersLoseNothing(t *testing.T) {
	e := newEnv(t)
	e.storm("c", 32, 5, func(arg string) result {
		return e.plugin("patch", "--no-backup", "--set", appendSAN(arg))
	})
	e.wantKubeadmAccepts()
	e.wantNoLeases(10 * time.Second)
}

// wantNoLeases waits up to d for the write queue to be empty.
func (e *env) wantNoLeases(d time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for {
		list, err := s.admin.CoordinationV1().Leases(e.ns).List(context.Background(), metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/managed-by=kubectl-kubeadmcfg"})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(list.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d queue Leases left behind, first %s", len(list.Items), list.Items[0].Name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestKilledWritersDoNotStallTheQueue kills writers with SIGKILL while they
// are queued or hold the turn; the others go on within the Lease TTL, every
// surviving patch is present, and no Lease outlives the TTL.
func TestKilledWritersDoNotStallTheQueue(t *testing.T) {
	e := newEnv(t)
	const ttl = 2 * time.Second
	const writers, patches = 16, 6
	plugin := filepath.Join(s.binDir, "kubectl-kubeadmcfg")

	type run struct {
		name    string
		code    int
		killed  bool
		elapsed time.Duration
	}
	var mu sync.Mutex
	procs := map[int]*exec.Cmd{} // pid -> running writer
	var runs []run
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range patches {
				name := fmt.Sprintf("k-w%d-p%d", w, p)
				cmd := exec.Command(plugin, "patch", "--no-backup", "--queue-ttl", ttl.String(),
					"--kubeconfig", s.cluster.Kubeconfig, "-n", e.ns, "--set", appendSAN(name))
				start := time.Now()
				if err := cmd.Start(); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				procs[cmd.Process.Pid] = cmd
				mu.Unlock()
				err := cmd.Wait()
				r := run{name: name, elapsed: time.Since(start)}
				if status, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && status.Signaled() {
					r.killed = true
				} else if err != nil {
					r.code = cmd.ProcessState.ExitCode()
				}
				mu.Lock()
				delete(procs, cmd.Process.Pid)
				runs = append(runs, r)
				mu.Unlock()
			}
		}()
	}

	// Kill the writers that hold a Lease: they are queued or have the turn.
	killed := 0
	deadline := time.Now().Add(20 * time.Second)
	for killed < 4 && time.Now().Before(deadline) {
		list, err := s.admin.CoordinationV1().Leases(e.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range list.Items {
			if l.Spec.HolderIdentity == nil || killed >= 4 {
				continue
			}
			_, pidText, _ := strings.Cut(*l.Spec.HolderIdentity, "/")
			pid, _ := strconv.Atoi(pidText)
			mu.Lock()
			cmd, ok := procs[pid]
			mu.Unlock()
			if ok && cmd.Process.Signal(syscall.SIGKILL) == nil {
				killed++
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	if killed == 0 {
		t.Fatal("no writer was ever seen queued: the storm did not contend")
	}

	doc := e.document()
	slowest := time.Duration(0)
	for _, r := range runs {
		n := countSAN(doc, r.name)
		present := n == 1
		switch {
		case n > 1:
			t.Errorf("%s is in the document %d times", r.name, n)
		case r.killed:
			// Killed before or after its write: either way, never half-written.
		case r.code != 0:
			t.Errorf("%s: exit %d", r.name, r.code)
		case !present:
			t.Errorf("%s exited 0 but is missing", r.name)
		default:
			slowest = max(slowest, r.elapsed)
		}
	}
	t.Logf("killed %d queued writers; the slowest surviving patch took %s (TTL %s)", killed, slowest, ttl)
	// Each dead writer delays the one behind it by at most the TTL; without
	// the TTL the survivors would wait out their 30s timeout.
	if limit := time.Duration(killed)*ttl + 5*time.Second; slowest > limit {
		t.Errorf("survivors stalled: slowest patch took %s, more than %s", slowest, limit)
	}
	e.wantNoLeases(3 * ttl)
}

// TestClockSkewDoesNotDeleteLiveLeases: a writer whose clock is an hour
// behind holds the turn (its Lease's renewTime is an hour old by everyone
// else's clock) while plugin processes queue behind it. They wait for it and
// never delete its live Lease; once it lets go, every patch lands.
func TestClockSkewDoesNotDeleteLiveLeases(t *testing.T) {
	e := newEnv(t)
	held := holdTurnWithSkewedClock(t, e, -time.Hour)
	var wg sync.WaitGroup
	results := make([]result, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A first attempt that conflicts joins the queue; every writer
			// gives way to the Lease already there.
			results[i] = e.plugin("patch", "--no-backup", "--queue-ttl", "1s", "--set", appendSAN(fmt.Sprintf("skew-%d", i)))
		}()
	}
	deletedEarly := held.wait()
	wg.Wait()
	if deletedEarly {
		t.Fatal("a writer deleted the live Lease of the writer whose clock is behind")
	}
	doc := e.document()
	for i, r := range results {
		wantExit(t, r, 0)
		if n := countSAN(doc, fmt.Sprintf("skew-%d", i)); n != 1 {
			t.Errorf("skew-%d present %d times", i, n)
		}
	}
}

// heldTurn is a turn in the write queue held by the test itself.
type heldTurn struct {
	wait func() (deletedEarly bool)
}

// holdTurnWithSkewedClock takes a turn in the queue of the env's
// kubeadm-config with a clock off by skew, holds it for 4 s (four TTLs of the
// writers above), and reports whether its Lease was deleted by someone else
// meanwhile.
func holdTurnWithSkewedClock(t *testing.T, e *env, skew time.Duration) heldTurn {
	t.Helper()
	q := newSkewedQueue(t, e.ns, skew)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	release, err := q.Acquire(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	list, err := s.admin.CoordinationV1().Leases(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		cancel()
		t.Fatalf("want our one Lease, got %v (%v)", list, err)
	}
	mine := list.Items[0]
	return heldTurn{wait: func() bool {
		defer cancel()
		time.Sleep(4 * time.Second)
		l, err := s.admin.CoordinationV1().Leases(e.ns).Get(ctx, mine.Name, metav1.GetOptions{})
		release()
		return err != nil || l.UID != mine.UID
	}}
}

// skewedClock is the real clock, off by skew.
type skewedClock struct{ skew time.Duration }

func (c skewedClock) Now() time.Time                  { return time.Now().Add(c.skew) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func newSkewedQueue(t *testing.T, ns string, skew time.Duration) *queue.Queue {
	t.Helper()
	return &queue.Queue{Client: s.admin.CoordinationV1(), Namespace: ns, Name: "kubeadm-config",
		Identity: "skewed-clock/1", TTL: time.Second, Clock: skewedClock{skew}}
}
