package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAPIServerKilledMidStorm kills kube-apiserver with SIGKILL while
// writers append, and restarts it. A write in flight at the kill may have
// committed with its answer lost. Every append that exited 0 is present
// exactly once, none is present twice, every absent one exited non-zero, and
// exit 7 (outcome unknown) comes only from patches in flight at the kill.
func TestAPIServerKilledMidStorm(t *testing.T) {
	e := newEnv(t)
	const writers, patches = 8, 6
	done := make(chan []written)
	go func() {
		done <- e.concurrently("f", writers, patches, func(name string, _ int) result {
			return e.plugin("patch", "--no-backup", "--timeout", "60s", "--set", appendSAN(name))
		})
	}()
	time.Sleep(700 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	killed := time.Now()
	if err := s.cluster.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	outcomes := <-done

	doc := e.document()
	exitedZero, inFlight, unknown := 0, 0, 0
	for _, o := range outcomes {
		n, code := countSAN(doc, o.arg), o.r.code
		atKill := o.start.Before(killed) && o.end.After(killed)
		switch {
		case n > 1:
			t.Errorf("%s is present %d times", o.arg, n)
		case code == 0 && n == 0:
			t.Errorf("%s exited 0 but is missing", o.arg)
		case code == 7 && !atKill:
			t.Errorf("%s exited 7 (outcome unknown) but was not in flight at the kill", o.arg)
		case code != 0 && code != 7 && n > 0:
			t.Errorf("%s exited %d, saying it failed, but is present", o.arg, code)
		}
		// A bound, not a speed target: a writer whose outcome cannot be known
		// must say so and let go of its turn, not retry until its --timeout
		// while every queued writer waits behind it.
		if took := o.end.Sub(o.start); took > 30*time.Second {
			t.Errorf("%s took %s of its 60s --timeout: the writers stalled (exit %d)", o.arg, took.Round(time.Second), code)
		}
		if code == 0 {
			exitedZero++
		}
		if code == 7 {
			unknown++
		}
		if atKill {
			inFlight++
		}
	}
	// Without patches under way when the apiserver died, nothing was tested.
	if inFlight == 0 {
		t.Fatal("no patch was in flight when kube-apiserver was killed")
	}
	t.Logf("%d patches in flight at the kill; %d of %d exited 0 across the restart, %d with exit 7", inFlight, exitedZero, len(outcomes), unknown)
	e.wantKubeadmAccepts()
}

// TestEtcdPausedAgainstTimeout freezes etcd (SIGSTOP): a patch gives up
// within its --timeout with exit 4; after SIGCONT a patch goes through and
// the document is whole.
func TestEtcdPausedAgainstTimeout(t *testing.T) {
	e := newEnv(t)
	etcd := s.cluster.Process("etcd")
	if etcd == nil {
		t.Fatal("no etcd process")
	}
	if err := etcd.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := e.plugin("patch", "--no-backup", "--timeout", "3s", "--set", "apiServer.extraArgs.paused=1")
	took := time.Since(start)
	if err := etcd.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	wantExit(t, r, 4)
	if !strings.Contains(r.stderr, "gave up") {
		t.Fatalf("%s", r)
	}
	// The timeout bounds the command; this is a bound, not a speed target.
	if took > 15*time.Second {
		t.Fatalf("a 3s --timeout took %s", took)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		r = e.plugin("patch", "--no-backup", "--set", "apiServer.extraArgs.resumed=1")
		if r.code == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	wantExit(t, r, 0)
	// The write that timed out may or may not have landed once etcd woke
	// up (the exit said "gave up", not "nothing written"); either way the
	// document is whole and kubeadm takes it.
	doc := e.document()
	if !strings.Contains(doc, "name: resumed\n") {
		t.Fatal("the patch after SIGCONT is missing")
	}
	e.wantKubeadmAccepts()
}
