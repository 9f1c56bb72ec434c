//go:build linux

package queue

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
)

// hostKey is this host's part of a mark.
func hostKey() string { return proc.LocalHost().Key() }

// exitedMark is the ProcessAnnotation of a process of this host that has
// run and exited.
func exitedMark(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return hostKey() + "/" + strconv.Itoa(cmd.Process.Pid) + "/1"
}

// zombieMark is the ProcessAnnotation of a process of this host that was
// killed and not yet waited for: it is gone, though its pid still shows.
func zombieMark(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	id := proc.Describe(cmd.Process.Pid)
	if id.StartTicks == 0 {
		t.Fatalf("no start time of %d", cmd.Process.Pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if state, _ := statOf(t, cmd.Process.Pid); state == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed process never became a zombie")
		}
	}
	return hostKey() + "/" + strconv.Itoa(cmd.Process.Pid) + "/" + strconv.FormatUint(id.StartTicks, 10)
}

// statOf reads a process's state and start time from /proc/PID/stat as
// the marks of earlier releases did: fields 3 and 22, counted after the
// command name, which may hold spaces and parentheses.
func statOf(t *testing.T, pid int) (state, start string) {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", ""
	}
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(fields) < 20 {
		t.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return fields[0], fields[19]
}

// TestProcessMarkIsUnchanged: Leases of running clusters hold marks that
// earlier releases wrote, HOSTKEY/PID/STARTTICKS, which this one must
// write the same: the host key is the first 8 bytes, in hex, of the
// SHA-256 of the boot id, a newline and the PID namespace's link, and the
// start is the decimal /proc prints.
func TestProcessMarkIsUnchanged(t *testing.T) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skip("no /proc to tell processes from")
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(string(boot)) + "\n" + ns))
	_, start := statOf(t, os.Getpid())
	want := hex.EncodeToString(sum[:8]) + "/" + strconv.Itoa(os.Getpid()) + "/" + start
	if got := processMark(); got != want {
		t.Fatalf("mark %q, want %q as earlier releases wrote it", got, want)
	}
	if processExited(want) {
		t.Fatal("this process's mark is taken for an exited one")
	}
}

// TestBusyReapsLeasesOfExitedWriters (review Q1): a Lease left by a writer
// of this host that no longer runs (killed, say) is deleted by the next
// writer's first look at the queue, which then reports no writers queued
// and writes at once instead of timing out behind it. A Lease whose writer
// still runs, or that another host holds, is left alone.
func TestBusyReapsLeasesOfExitedWriters(t *testing.T) {
	self := processMark()
	if self == "" {
		t.Skip("no /proc to tell processes from")
	}
	pid, start, _ := strings.Cut(strings.SplitN(self, "/", 2)[1], "/")
	if pid != strconv.Itoa(os.Getpid()) {
		t.Fatalf("the mark %q names pid %s, not ours", self, pid)
	}
	cases := []struct {
		name     string
		mark     string
		wantBusy bool
	}{
		{"exited writer of this host", exitedMark(t), false},
		{"killed writer not yet waited for", zombieMark(t), false},
		{"pid reused by a later process", hostKey() + "/" + pid + "/" + start + "0", false},
		{"live writer of this host", self, true},
		{"writer of another host", "0123456789abcdef/1/1", true},
		{"writer without a mark", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := newFake()
			var annotations map[string]string
			if c.mark != "" {
				annotations = map[string]string{ProcessAnnotation: c.mark}
			}
			l := lease(t, cs, 7, time.Now(), annotations)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if got := newQueue(cs, "me").Busy(ctx); got != c.wantBusy {
				t.Fatalf("Busy() = %v, want %v", got, c.wantBusy)
			}
			if exists(cs, l.Name) != c.wantBusy {
				t.Fatalf("the Lease exists: %v, want %v", exists(cs, l.Name), c.wantBusy)
			}
		})
	}
}

// TestLeasesCarryTheirProcess: a writer's Lease names its process, so
// another writer of the host can tell when it is gone.
func TestLeasesCarryTheirProcess(t *testing.T) {
	cs := newFake()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	release, err := newQueue(cs, "me").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	list, _ := cs.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{})
	if len(list.Items) != 1 || list.Items[0].Annotations[ProcessAnnotation] != processMark() || processMark() == "" {
		t.Fatalf("Lease annotations %v, want %s=%q", list.Items[0].Annotations, ProcessAnnotation, processMark())
	}
	if exited(&list.Items[0]) {
		t.Fatal("a live writer's Lease is taken for one whose writer exited")
	}
}
