package operator

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
)

// These tests take one path each through the operator on a fake
// clientset; that two starts racing end with one winner is shown against a
// real API server (internal/e2e, TestRolloutConcurrentStarts).

const ns = "kube-system"

// world is a cluster of control-plane nodes, each with its mirror Pods and
// agent Lease as a healthy kubeadm cluster with agents has them.
type world struct {
	objects []runtime.Object
}

func healthy(nodes ...string) *world {
	w := &world{objects: []runtime.Object{&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubeadm-config", ResourceVersion: "812"},
		Data:       map[string]string{engine.DefaultKey: string(rollouttest.DocV2)},
	}}}
	for _, n := range nodes {
		w.node(n, true, true, rollouttest.Base)
	}
	return w
}

// node adds a control-plane node; ready says whether its mirror Pods are
// Ready, and an agent (renewed at renewed) is added when agent is true.
func (w *world) node(name string, ready, agent bool, renewed time.Time) {
	w.objects = append(w.objects, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{engine.ControlPlaneLabel: ""}}})
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	for _, c := range controlplane.Components() {
		w.objects = append(w.objects, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: MirrorPodNamespace, Name: c.PodName() + "-" + name},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}})
	}
	if agent {
		w.objects = append(w.objects, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nodestate.LeaseName(name), Labels: map[string]string{nodestate.Label: name}},
			Spec:       coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renewed}},
		})
	}
}

// leaseDuration sets the leaseDurationSeconds of node's agent Lease.
func (w *world) leaseDuration(node string, seconds int32) {
	for _, obj := range w.objects {
		if l, ok := obj.(*coordinationv1.Lease); ok && l.Name == nodestate.LeaseName(node) {
			l.Spec.LeaseDurationSeconds = &seconds
		}
	}
}

func (w *world) operator(t *testing.T) (*Rollouts, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset(w.objects...)
	// The fake does not generate names; the API server does.
	n := 0
	cs.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ev := a.(k8stesting.CreateAction).GetObject().(*corev1.Event)
		n++
		ev.Name = fmt.Sprintf("%s%d", ev.GenerateName, n)
		return false, nil, nil
	})
	// Nor does it count resourceVersions: kubeadm-config's go on from 900.
	rv := 900
	cs.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if cm := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap); cm.Name == "kubeadm-config" {
			rv++
			cm.ResourceVersion = fmt.Sprint(rv)
		}
		return false, nil, nil
	})
	return &Rollouts{
		Record: engine.New(cs, engine.Target{Namespace: ns, Name: rollout.DefaultConfigMap}, engine.Options{CreateIfMissing: true}),
		Config: engine.New(cs, engine.Target{Namespace: ns, Name: "kubeadm-config", Key: engine.DefaultKey}, engine.Options{Validation: engine.ValidationIgnore}),
		Now:    func() time.Time { return rollouttest.Base.Add(5 * time.Second) },
		By:     "alice",
	}, cs
}

func wantErr(t *testing.T, err error, code exitcode.Code, msg string) {
	t.Helper()
	if err == nil || exitcode.FromError(err) != code || err.Error() != msg {
		t.Fatalf("got exit %d: %v\nwant exit %d: %s", exitcode.FromError(err), err, code, msg)
	}
}

func TestPreflight(t *testing.T) {
	ctx := context.Background()
	o, _ := healthy("cp-2", "cp-0", "cp-1").operator(t)
	spec, err := o.Preflight(ctx, rollout.Spec{})
	if err != nil || joinNames(spec.Nodes) != "cp-0, cp-1, cp-2" {
		t.Fatalf("default order: %v %v", spec.Nodes, err)
	}
	spec, err = o.Preflight(ctx, rollout.Spec{Nodes: []string{"cp-2", "cp-0"}})
	if err != nil || joinNames(spec.Nodes) != "cp-2, cp-0" {
		t.Fatalf("--nodes order: %v %v", spec.Nodes, err)
	}
	_, err = o.Preflight(ctx, rollout.Spec{Nodes: []string{"cp-9", "cp-0", "worker-1"}})
	wantErr(t, err, exitcode.Conflict, "nodes cp-9, worker-1 are not control-plane nodes (the control-plane nodes: cp-0, cp-1, cp-2); nothing was started")
	_, err = o.Preflight(ctx, rollout.Spec{Canary: 3})
	wantErr(t, err, exitcode.Usage, "the canary must be from 0 to 2 (fewer than the 3 nodes), not 3")

	// Every node that is not ready is named, with everything wrong with it,
	// even a node the rollout leaves out.
	w := healthy("cp-0")
	w.node("cp-1", false, false, rollouttest.Base)
	w.node("cp-2", true, true, rollouttest.Base.Add(-time.Minute))
	o, _ = w.operator(t)
	_, err = o.Preflight(ctx, rollout.Spec{Nodes: []string{"cp-0"}})
	wantErr(t, err, exitcode.Conflict, "preflight failed, nothing was started: "+
		"node cp-1: kube-apiserver is not Ready, kube-controller-manager is not Ready, kube-scheduler is not Ready, no agent (no Lease kubeadmcfg-agent-cp-1); "+
		"node cp-2: its agent looks lost (last seen 65s ago by the API server's clock, not confirmed)")

	o, _ = (&world{}).operator(t)
	_, err = o.Preflight(ctx, rollout.Spec{})
	wantErr(t, err, exitcode.Conflict, "no node is labelled node-role.kubernetes.io/control-plane: there is no control-plane node to roll out to (is this a kubeadm cluster?)")
}

func TestPreflightNamesAMissingMirrorPod(t *testing.T) {
	w := healthy("cp-0")
	w.objects = append(w.objects[:2], w.objects[3:]...) // drop kube-apiserver-cp-0
	o, _ := w.operator(t)
	o.PreflightWait = time.Second // the kubelet may be publishing it again: it is waited for
	_, err := o.Preflight(context.Background(), rollout.Spec{})
	wantErr(t, err, exitcode.Conflict, "preflight failed after waiting 1s, nothing was started: node cp-0: no mirror Pod kube-system/kube-apiserver-cp-0")
}

// TestStartPinsTheLiveDocument: the record holds kubeadm-config's document
// byte for byte, with its resourceVersion, and an Event says so.
func TestStartPinsTheLiveDocument(t *testing.T) {
	ctx := context.Background()
	o, cs := healthy("cp-0", "cp-1").operator(t)
	ch, err := o.Start(ctx, rollout.Spec{Canary: 1, Message: "audit"})
	if err != nil {
		t.Fatal(err)
	}
	s := ch.Status
	if !ch.Changed || s.ID != 1 || s.Target.Hash != rollout.Hash(rollouttest.DocV2) || s.Target.ResourceVersion != "812" || s.Target.Source != rollout.SourceLive ||
		s.Previous != nil || s.StartedBy != "alice" || !s.StartedAt.Equal(rollouttest.TS(5)) || s.Canary != 1 {
		t.Fatalf("started %+v", s)
	}
	r, _, err := o.Read(ctx)
	if err != nil || string(r.Target) != string(rollouttest.DocV2) {
		t.Fatalf("pinned %q, %v", r.Target, err)
	}
	events, _ := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if len(events.Items) != 1 || events.Items[0].Reason != "RolloutStarted" ||
		events.Items[0].Message != "rollout 1 started by alice: "+rollout.Short(rollout.Hash(rollouttest.DocV2))+" (live, resourceVersion 812) over cp-0, cp-1" {
		t.Fatalf("events %+v", events.Items)
	}
	// A second start is refused, naming the first.
	_, err = o.Start(ctx, rollout.Spec{})
	wantErr(t, err, exitcode.Conflict, "another rollout is active: rollout 1 (rollout) is Progressing, started by alice at 2026-11-30T12:00:05Z; wait for it to end")
}

func TestControlWithoutARollout(t *testing.T) {
	ctx := context.Background()
	o, _ := healthy("cp-0").operator(t)
	for name, op := range map[string]func(context.Context) (*Change, error){"pause": o.Pause, "resume": o.Resume, "confirm": o.Confirm} {
		_, err := op(ctx)
		wantErr(t, err, exitcode.NotFound, "no rollout is recorded in configmap kube-system/kubeadmcfg-rollout")
		if _, err := o.Record.Get(ctx); exitcode.FromError(err) != exitcode.NotFound {
			t.Errorf("%s created the record: %v", name, err)
		}
	}
	_, err := o.Undo(ctx, false)
	wantErr(t, err, exitcode.Conflict, "nothing to undo: no rollout is recorded in configmap kube-system/kubeadmcfg-rollout")
}

func TestPauseResume(t *testing.T) {
	ctx := context.Background()
	o, cs := healthy("cp-0", "cp-1").operator(t)
	if _, err := o.Start(ctx, rollout.Spec{}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		op      func(context.Context) (*Change, error)
		changed bool
		phase   rollout.Phase
	}{{o.Pause, true, rollout.Paused}, {o.Pause, false, rollout.Paused}, {o.Resume, true, rollout.Progressing}, {o.Resume, false, rollout.Progressing}} {
		ch, err := step.op(ctx)
		if err != nil || ch.Changed != step.changed || ch.Status.Phase != step.phase {
			t.Fatalf("got %+v %v, want changed %v, %s", ch, err, step.changed, step.phase)
		}
	}
	events, _ := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	var reasons []string
	for _, e := range events.Items {
		reasons = append(reasons, e.Reason)
	}
	if joinNames(reasons) != "RolloutStarted, RolloutPaused, RolloutResumed" {
		t.Errorf("one Event per transition made, got %v", reasons)
	}
	_, err := o.Confirm(ctx)
	wantErr(t, err, exitcode.Conflict, "rollout 1 (rollout) is not on trial: there is nothing to confirm")
}

// storeRecord stores r as the record in cs.
func storeRecord(t *testing.T, cs *fake.Clientset, r *rollout.Record) {
	t.Helper()
	cm := rollouttest.ConfigMap(t, r)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// failedAtFirstNode is rollout 1 of DocV2 over Nodes, from DocV1, whose first
// node rolled itself back.
func failedAtFirstNode(t *testing.T) *rollout.Record {
	r := rollouttest.Started(t, rollouttest.Spec())
	rollouttest.Turn(t, r, 10, "cp-0", rollout.NodeRolledBack)
	return r
}

// TestUndoPutsTheDocumentBack: kubeadm-config holds the failed rollout's
// target; the undo puts the previous document back and ends, no node having
// changed.
func TestUndoPutsTheDocumentBack(t *testing.T) {
	ctx := context.Background()
	o, cs := healthy(rollouttest.Nodes...).operator(t)
	storeRecord(t, cs, failedAtFirstNode(t))
	res, err := o.Undo(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Undone != 1 || res.Status.ID != 2 || res.Status.Kind != rollout.KindUndo || res.Status.Phase != rollout.Succeeded || res.Document == nil || res.LeftAlone != "" {
		t.Fatalf("undo: %+v %+v", res, res.Status)
	}
	if doc, _ := o.Config.Document(ctx); doc != string(rollouttest.DocV1) {
		t.Fatalf("kubeadm-config holds %q", doc)
	}
	// Undone again: the undo is taken back (the document goes forward).
	if res, err = o.Undo(ctx, false); err != nil || res.Status.Target.Hash != rollout.Hash(rollouttest.DocV2) {
		t.Fatalf("undo of the undo: %+v %v", res, err)
	}
}

// TestUndoRefusedWhenTheDocumentChanged: someone patched kubeadm-config after
// the rollout; the undo is refused and nothing is written, unless forced.
func TestUndoRefusedWhenTheDocumentChanged(t *testing.T) {
	ctx := context.Background()
	w := healthy(rollouttest.Nodes...)
	w.objects[0].(*corev1.ConfigMap).Data[engine.DefaultKey] = string(rollouttest.DocV3)
	o, cs := w.operator(t)
	storeRecord(t, cs, failedAtFirstNode(t))
	_, err := o.Undo(ctx, false)
	wantErr(t, err, exitcode.Conflict, "configmap kube-system/kubeadm-config no longer holds the target of rollout 1: the rollout pinned "+
		rollout.Short(rollout.Hash(rollouttest.DocV2))+" (resourceVersion 812), the ConfigMap now holds "+rollout.Short(rollout.Hash(rollouttest.DocV3))+
		" (resourceVersion 812); putting the previous document back would throw away the change made since")
	var notTarget *NotTargetError
	if !errors.As(err, &notTarget) {
		t.Errorf("not a *NotTargetError: %T", err)
	}
	if r, _, _ := o.Read(ctx); r.Status.ID != 1 {
		t.Fatalf("a refused undo changed the record: %+v", r.Status)
	}
	if doc, _ := o.Config.Document(ctx); doc != string(rollouttest.DocV3) {
		t.Fatalf("a refused undo wrote kubeadm-config: %q", doc)
	}
	if _, err := o.Undo(ctx, true); err != nil {
		t.Fatal(err)
	}
	if doc, _ := o.Config.Document(ctx); doc != string(rollouttest.DocV1) {
		t.Fatalf("forced: kubeadm-config holds %q", doc)
	}
}

// TestUndoFinishesAnUndoThatDidNotPutTheDocumentBack: the command that
// started an undo died before writing kubeadm-config; the next undo writes
// it and ends the undo, rather than undoing the undo.
func TestUndoFinishesAnUndoThatDidNotPutTheDocumentBack(t *testing.T) {
	ctx := context.Background()
	o, cs := healthy(rollouttest.Nodes...).operator(t)
	r := failedAtFirstNode(t)
	if err := r.Undo(rollouttest.By("bob", 20), false); err != nil {
		t.Fatal(err)
	}
	storeRecord(t, cs, r)
	res, err := o.Undo(ctx, false)
	if err != nil || !res.Resumed || res.Undone != 1 || res.Status.ID != 2 || res.Status.Phase != rollout.Succeeded {
		t.Fatalf("resumed undo: %+v %v", res, err)
	}
	if doc, _ := o.Config.Document(ctx); doc != string(rollouttest.DocV1) {
		t.Fatalf("kubeadm-config holds %q", doc)
	}
}
