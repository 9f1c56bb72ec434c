package operator

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
)

// TestAbandonOnlyANodeWhoseAgentIsGone (R3): cp-0 is in progress. While its
// agent renews its Lease, abandon is refused; once the Lease stays
// unchanged for its duration, cp-0 is abandoned, with a Warning Event, and
// undo and (once the node is gone from the cluster) start work again.
func TestAbandonOnlyANodeWhoseAgentIsGone(t *testing.T) {
	ctx := context.Background()
	o, cs := healthy(rollouttest.Nodes...).operator(t)
	var progress []string
	o.Progress = func(line string) { progress = append(progress, line) }
	ch, err := o.StartPinned(ctx, rollouttest.Spec()) // as patch --rollout starts it: DocV2, from DocV1
	if err != nil {
		t.Fatal(err)
	}
	// cp-0's agent renews every 333ms: its Lease lasts 1s.
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, nodestate.LeaseName("cp-0"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.LeaseDurationSeconds = new(int32)
	*l.Spec.LeaseDurationSeconds = 1
	if _, err := cs.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.transition(ctx, func(r *rollout.Record) (bool, error) {
		return true, r.BeginNode(rollouttest.By("agent-cp-0", 10), ch.Status.ID, "cp-0", []string{"kube-apiserver"}, "b")
	}, nil); err != nil {
		t.Fatal(err)
	}

	// Alive: renewed through whatever API server, it is seen to change.
	stop, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); <-done }) }
	t.Cleanup(halt)
	go func() {
		defer close(done)
		leases := cs.CoordinationV1().Leases(ns)
		for i := 1; ; i++ {
			if l, err := leases.Get(ctx, nodestate.LeaseName("cp-0"), metav1.GetOptions{}); err == nil {
				l.Spec.RenewTime = &metav1.MicroTime{Time: rollouttest.Base.Add(-time.Hour).Add(time.Duration(i) * time.Second)}
				_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	_, err = o.Abandon(ctx, "cp-0")
	wantErr(t, err, exitcode.Conflict, "the agent of node cp-0 is alive: its Lease kube-system/kubeadmcfg-agent-cp-0 was renewed while watched; "+
		"only a node whose agent is gone can be abandoned, nothing was changed")
	if s, _, _, _ := o.Current(ctx); s.Phase != rollout.Progressing {
		t.Fatalf("a refused abandon changed the rollout: %s", s.Phase)
	}

	// Gone: the Lease stays as it is.
	halt()
	progress = nil
	res, err := o.Abandon(ctx, "cp-0")
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Status; s.Phase != rollout.Failed || !strings.HasPrefix(res.AgentGone, "its agent's Lease kube-system/kubeadmcfg-agent-cp-0 did not change in the ") {
		t.Fatalf("abandoned: %s, %q", s.Phase, res.AgentGone)
	}
	if strings.Join(progress, "\n") != "abandon: watching lease kube-system/kubeadmcfg-agent-cp-0 for up to 1s: its agent must be gone" {
		t.Errorf("progress %q", progress)
	}
	events, _ := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	var abandoned []corev1.Event
	for _, e := range events.Items {
		if e.Reason == "NodeAbandoned" {
			abandoned = append(abandoned, e)
		}
	}
	if len(abandoned) != 1 || abandoned[0].Type != corev1.EventTypeWarning ||
		!strings.HasPrefix(abandoned[0].Message, "rollout 1: node cp-0 abandoned by alice (its agent's Lease kube-system/kubeadmcfg-agent-cp-0 did not change in the ") ||
		!strings.HasSuffix(abandoned[0].Message, "): its state is unknown; failed the rollout") {
		t.Fatalf("events %+v", abandoned)
	}

	undo, err := o.Undo(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if s := undo.Status; s.Phase != rollout.Succeeded || len(s.Order) != 0 || strings.Join(s.LeftOut, ",") != "cp-0" {
		t.Fatalf("undo: %s, order %v, left out %v", s.Phase, s.Order, s.LeftOut)
	}
	// The node is gone from the cluster: the next rollout goes without it.
	if err := cs.CoreV1().Nodes().Delete(ctx, "cp-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ch, err := o.Start(ctx, rollout.Spec{}); err != nil || strings.Join(ch.Status.Order, ",") != "cp-1,cp-2" {
		t.Fatalf("start after the undo: %v", err)
	}
}

// TestAbandonANodeWithoutAnAgent: no Lease, no agent: abandoned at once,
// here dropped from an undo's order.
func TestAbandonANodeWithoutAnAgent(t *testing.T) {
	ctx := context.Background()
	w := healthy("cp-1", "cp-2")
	w.node("cp-0", true, false, time.Time{})
	o, cs := w.operator(t)
	r := rollouttest.Started(t, rollouttest.Spec())
	for i, n := range rollouttest.Nodes {
		rollouttest.Turn(t, r, 10*i, n, rollout.NodeUpdated)
	}
	storeRecord(t, cs, r)
	cm, _ := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kubeadm-config", metav1.GetOptions{})
	cm.Data["ClusterConfiguration"] = string(rollouttest.DocV2)
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	undo, err := o.Undo(ctx, false)
	if err != nil || strings.Join(undo.Status.Order, ",") != "cp-2,cp-1,cp-0" {
		t.Fatalf("undo: %v", err)
	}
	start := time.Now()
	res, err := o.Abandon(ctx, "cp-0")
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Status; s.Kind != rollout.KindUndo || strings.Join(s.Order, ",") != "cp-2,cp-1" || res.AgentGone != "it has no agent Lease kube-system/kubeadmcfg-agent-cp-0" {
		t.Fatalf("abandoned: %+v, %q", s, res.AgentGone)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("a node without a Lease took %s", took)
	}
	// Refused by the record before anything is watched.
	_, err = o.Abandon(ctx, "cp-9")
	wantErr(t, err, exitcode.Conflict, "node cp-9 is not part of rollout 2 (its nodes: cp-2, cp-1)")
}
