package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
)

// The previous document of a rollout started from the live document is the
// document its target actually replaced: the last good target only when
// kubeadm-config says its document replaced exactly that one.

// docA is what rollout 1 carries: an audit flag.
var docA = []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\napiServer:\n  extraArgs:\n  - {name: audit-log-maxage, value: \"30\"}\n")

// succeeded starts a rollout of the live document over every node and
// takes each node through its turn, as the agents would.
func succeeded(t *testing.T, o *Rollouts, try time.Duration) *rollout.Status {
	t.Helper()
	ch, err := o.Start(context.Background(), rollout.Spec{Try: try})
	if err != nil {
		t.Fatal(err)
	}
	return turns(t, o, ch)
}

// turns takes every node of the rollout ch started through its turn.
func turns(t *testing.T, o *Rollouts, ch *Change) *rollout.Status {
	t.Helper()
	ctx := context.Background()
	for i, n := range ch.Status.Order {
		if _, err := o.transition(ctx, func(r *rollout.Record) (bool, error) {
			if err := r.BeginNode(rollouttest.By("agent-"+n, 10+i), ch.Status.ID, n, nil, ""); err != nil {
				return false, err
			}
			return true, r.FinishNode(rollouttest.By("agent-"+n, 11+i), ch.Status.ID, n, rollout.Outcome{Phase: rollout.NodeUpdated})
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	s, _, _, err := o.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// patch sets path=value in kubeadm-config through the engine, as the patch
// verb does, and returns the resourceVersion written.
func patch(t *testing.T, o *Rollouts, path, value string) string {
	t.Helper()
	set, err := clusterconfig.NewSet(path, value)
	if err != nil {
		t.Fatal(err)
	}
	res, err := o.Config.UpdateDocument(context.Background(), set)
	if err != nil || !res.Changed {
		t.Fatalf("patch %s=%s: %v", path, value, err)
	}
	return res.New.ResourceVersion
}

func withDocument(w *world, doc []byte) *world {
	w.objects[0].(*corev1.ConfigMap).Data[engine.DefaultKey] = string(doc)
	return w
}

// TestUndoDoesNotDropAPlainPatch is the review's scenario (R1): rollout 1
// carries A; a plain patch writes B (carried to the nodes by reconfigure),
// another C. A try of C is refused, naming what its revert would drop; a
// plain start warns; its undo is refused, naming the same, unless forced.
func TestUndoDoesNotDropAPlainPatch(t *testing.T) {
	ctx := context.Background()
	o, _ := withDocument(healthy(rollouttest.Nodes...), docA).operator(t)
	one := succeeded(t, o, 0)
	if one.Phase != rollout.Succeeded {
		t.Fatalf("rollout 1 is %s", one.Phase)
	}
	patch(t, o, "apiServer.extraArgs.audit-log-maxage", "7")           // B
	rvC := patch(t, o, "apiServer.extraArgs.audit-log-maxbackup", "3") // C
	doc, _ := o.Config.Document(ctx)
	docC := doc
	drops := "kubeadm-config was written outside rollouts since " + rollout.Short(rollout.Hash(docA)) +
		" (resourceVersion 812 -> " + rvC + "); going back to it changes apiServer.extraArgs.audit-log-maxage, apiServer.extraArgs.audit-log-maxbackup"

	_, err := o.Start(ctx, rollout.Spec{Try: 20 * time.Second})
	wantErr(t, err, exitcode.Conflict, "a rollout on trial needs the document it would revert to, and it is not known exactly: "+drops+"; nothing was started")
	if s, _, _, _ := o.Current(ctx); s.ID != 1 {
		t.Fatalf("a refused try started rollout %d", s.ID)
	}

	ch, err := o.Start(ctx, rollout.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if s := ch.Status; s.Previous == nil || s.Previous.Hash != rollout.Hash(docA) || s.Untracked == nil ||
		s.Untracked.FromResourceVersion != "812" || s.Untracked.ToResourceVersion != rvC {
		t.Fatalf("rollout 2: previous %+v, untracked %+v", s.Previous, s.Untracked)
	}
	if strings.Join(ch.Warnings, "\n") != "rollout 2's previous document is not known exactly: "+drops+"; an undo of it would drop those writes too, and is refused unless forced" {
		t.Fatalf("warnings %q", ch.Warnings)
	}

	if s := turns(t, o, ch); s.Phase != rollout.Succeeded {
		t.Fatalf("rollout 2 is %s", s.Phase)
	}
	_, err = o.Undo(ctx, false)
	wantErr(t, err, exitcode.Conflict, "undoing rollout 2 would drop more than its own change: "+drops+"; nothing was undone")
	if got, _ := o.Config.Document(ctx); got != docC {
		t.Fatalf("a refused undo wrote kubeadm-config:\n%s", got)
	}
	if _, err := o.Undo(ctx, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := o.Config.Document(ctx); got != string(docA) {
		t.Fatalf("forced: kubeadm-config holds\n%s", got)
	}
}

// TestAWriteBySomeoneElseLeavesThePreviousUnknown: B written with kubectl
// (its stamp then disagrees with its document), C with the plugin over it:
// C replaced B, not A, and the try is refused.
func TestAWriteBySomeoneElseLeavesThePreviousUnknown(t *testing.T) {
	ctx := context.Background()
	o, cs := withDocument(healthy(rollouttest.Nodes...), docA).operator(t)
	succeeded(t, o, 0)
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[engine.DefaultKey] = strings.Replace(string(docA), `"30"`, `"7"`, 1)
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = o.Start(ctx, rollout.Spec{Try: time.Minute})
	if exitcode.FromError(err) != exitcode.Conflict || !strings.Contains(err.Error(), "going back to it changes apiServer.extraArgs.audit-log-maxage") {
		t.Fatalf("a try over a write by someone else: %v", err)
	}
}

// TestATryOfAPlainPatchRevertsToExactlyWhatItReplaced: rollout 1 carries A,
// a plain patch writes C over A; the try of C is accepted, with A as its
// previous document, and its revert goes back to A byte for byte.
func TestATryOfAPlainPatchRevertsToExactlyWhatItReplaced(t *testing.T) {
	ctx := context.Background()
	o, _ := withDocument(healthy(rollouttest.Nodes...), docA).operator(t)
	succeeded(t, o, 0)
	patch(t, o, "apiServer.extraArgs.audit-log-maxbackup", "3")
	two := succeeded(t, o, 20*time.Second)
	if two.Phase != rollout.AwaitingConfirm || two.Previous.Hash != rollout.Hash(docA) || two.Untracked != nil {
		t.Fatalf("rollout 2: %s, previous %+v, untracked %+v", two.Phase, two.Previous, two.Untracked)
	}
	ch, err := o.transition(ctx, func(r *rollout.Record) (bool, error) {
		return r.ExpireTry(rollout.Clock{Now: two.Try.Deadline.Add(time.Second), By: "agent-cp-0"})
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := o.Read(ctx)
	if err != nil || ch.Status.Kind != rollout.KindRevert || string(r.Target) != string(docA) {
		t.Fatalf("the revert goes back to %q (%v), want A", r.Target, err)
	}
}
