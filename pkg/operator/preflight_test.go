package operator

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
)

// serverClock is the clock of an API server whose host says date: a
// ServerClock that has seen one response from it.
func serverClock(t *testing.T, date time.Time) *engine.ServerClock {
	t.Helper()
	c := &engine.ServerClock{}
	rt := c.WrapTransport(roundTrip(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Date": {date.UTC().Format(http.TimeFormat)}}, Body: http.NoBody}, nil
	}))
	req, err := http.NewRequest(http.MethodGet, "https://apiserver/version", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return c
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// renewing renews node's agent Lease every interval, on clock, until the
// test ends: an agent that talks to another API server than the reader.
func renewing(t *testing.T, cs *fake.Clientset, node string, interval time.Duration, clock func() time.Time) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		leases := cs.CoordinationV1().Leases(ns)
		for {
			if l, err := leases.Get(ctx, nodestate.LeaseName(node), metav1.GetOptions{}); err == nil {
				l.Spec.RenewTime = &metav1.MicroTime{Time: clock()}
				_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// TestPreflightDoesNotRefuseOnOneServersClock (R9): the agent of cp-1 renews
// its Lease through an API server whose clock is 2 minutes behind the one
// the preflight reads through. By that clock the Lease looks 2 minutes
// old, 40 times its duration; watched, it changes: the agent is alive, and
// the preflight passes. A Lease that does not change while watched for its
// duration is lost, whatever its renewTime says.
func TestPreflightDoesNotRefuseOnOneServersClock(t *testing.T) {
	ctx := context.Background()
	agentServer := serverClock(t, rollouttest.Base)
	readerServer := serverClock(t, rollouttest.Base.Add(2*time.Minute))
	w := healthy("cp-0")
	w.node("cp-1", true, true, agentServer.Now())
	w.leaseDuration("cp-0", 3600)
	w.leaseDuration("cp-1", 3)
	o, cs := w.operator(t)
	o.Now = readerServer.Now
	renewing(t, cs, "cp-1", time.Second, agentServer.Now)
	if _, err := o.Preflight(ctx, rollout.Spec{}); err != nil {
		t.Fatalf("a live agent renewing through another API server: %v", err)
	}

	// An agent that died with its Lease renewed "just now" by the agent's
	// server: the reader's server sees it 2 minutes old, and watching it
	// confirms it lost.
	w = healthy("cp-0")
	w.node("cp-1", true, true, agentServer.Now())
	w.leaseDuration("cp-0", 3600)
	w.leaseDuration("cp-1", 1)
	o, _ = w.operator(t)
	o.Now = readerServer.Now
	_, err := o.Preflight(ctx, rollout.Spec{})
	if exitcode.FromError(err) != exitcode.Conflict || !strings.Contains(fmtErr(err), "node cp-1: its agent is lost (last seen 2m") ||
		!strings.Contains(fmtErr(err), "its Lease did not change in the 1s watched") {
		t.Fatalf("a dead agent: %v", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestPreflightWaitsForANodeNotReadyYet (R15): every agent alive, cp-1's
// kube-apiserver not Ready yet (it is restarting after the last rollout):
// the preflight says what it waits for and passes once it is Ready. Not
// Ready past the wait, it refuses, saying how long it waited; a lost agent
// is refused at once, without waiting for the rest.
func TestPreflightWaitsForANodeNotReadyYet(t *testing.T) {
	ctx := context.Background()
	w := healthy("cp-0")
	w.node("cp-1", false, true, rollouttest.Base)
	o, cs := w.operator(t)
	var progress []string
	var mu sync.Mutex
	o.Progress = func(line string) { mu.Lock(); progress = append(progress, line); mu.Unlock() }
	go func() {
		time.Sleep(1500 * time.Millisecond)
		for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			pod, err := cs.CoreV1().Pods(MirrorPodNamespace).Get(ctx, c+"-cp-1", metav1.GetOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			if _, err := cs.CoreV1().Pods(MirrorPodNamespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		}
	}()
	if _, err := o.Preflight(ctx, rollout.Spec{}); err != nil {
		t.Fatalf("a node Ready within the wait: %v", err)
	}
	mu.Lock()
	said := strings.Join(progress, "\n")
	mu.Unlock()
	if said != "preflight: waiting up to 2m0s for node cp-1: kube-apiserver is not Ready, kube-controller-manager is not Ready, kube-scheduler is not Ready" {
		t.Errorf("progress: %q", said)
	}

	w = healthy("cp-0")
	w.node("cp-1", false, true, rollouttest.Base)
	o, _ = w.operator(t)
	o.PreflightWait = time.Second
	start := time.Now()
	_, err := o.Preflight(ctx, rollout.Spec{})
	wantErr(t, err, exitcode.Conflict, "preflight failed after waiting 1s, nothing was started: "+
		"node cp-1: kube-apiserver is not Ready, kube-controller-manager is not Ready, kube-scheduler is not Ready")
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("refused after %s, before the wait ended", waited)
	}

	// What waiting cannot fix is refused at once.
	w = healthy("cp-0")
	w.node("cp-1", false, false, rollouttest.Base)
	o, _ = w.operator(t)
	start = time.Now()
	_, err = o.Preflight(ctx, rollout.Spec{})
	wantErr(t, err, exitcode.Conflict, "preflight failed, nothing was started: "+
		"node cp-1: kube-apiserver is not Ready, kube-controller-manager is not Ready, kube-scheduler is not Ready, no agent (no Lease kubeadmcfg-agent-cp-1)")
	if waited := time.Since(start); waited > 500*time.Millisecond {
		t.Errorf("a missing agent was refused after %s", waited)
	}
}

var _ = coordinationv1.Lease{}

// TestPreflightSaysOnceWhatItWaitsFor: a line when what it waits for
// changes, not one per look.
func TestPreflightSaysOnceWhatItWaitsFor(t *testing.T) {
	w := healthy("cp-0")
	w.node("cp-1", false, true, rollouttest.Base.Add(-time.Minute))
	w.leaseDuration("cp-0", 3600)
	w.leaseDuration("cp-1", 2)
	o, _ := w.operator(t)
	var progress []string
	o.Progress = func(line string) { progress = append(progress, line) }
	o.PreflightWait = time.Second
	_, err := o.Preflight(context.Background(), rollout.Spec{})
	wantErr(t, err, exitcode.Conflict, "preflight failed, nothing was started: node cp-1: kube-apiserver is not Ready, kube-controller-manager is not Ready, "+
		"kube-scheduler is not Ready, its agent is lost (last seen 65s ago; its Lease did not change in the 2s watched)")
	if got := strings.Join(progress, "\n"); got != "preflight: waiting up to 1s for node cp-1: kube-apiserver is not Ready, kube-controller-manager is not Ready, "+
		"kube-scheduler is not Ready, its agent looks lost by the API server's clock: watching its Lease for up to 2s" {
		t.Errorf("progress:\n%s", got)
	}
}
