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
)

// TestThirtyTwoWritersLoseNothing: 32 plugin processes x 5 patches, every
// one present, none failed.
func TestThirtyTwoWritersLoseNothing(t *testing.T) {
	e := newEnv(t)
	e.storm("c", 32, 5, func(arg string) result {
		return e.plugin("patch", "--no-backup", "--set", "apiServer.extraArgs."+arg+"=1")
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
					"--kubeconfig", s.cluster.Kubeconfig, "-n", e.ns, "--set", "apiServer.extraArgs."+name+"=1")
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
		present := strings.Contains(doc, "name: "+r.name+"\n")
		switch {
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
