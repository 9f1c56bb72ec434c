package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/casfake"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
)

// Single paths of the agent against a fake clientset. That exactly one
// agent makes each transition, and that nodes go one at a time, is shown
// against the real control plane (internal/e2e TestAgent).

// testAgent is an agent of cp-0 over a fake clientset holding the record
// r (none when nil) and kubeadm-config with doc; logged collects its
// events.
func testAgent(t *testing.T, r *rollout.Record, doc []byte) (a *Agent, client *fake.Clientset, logged *logBook) {
	t.Helper()
	client = byName(casfake.Leases(fake.NewClientset()))
	ctx := context.Background()
	live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config", UID: "uid-1"},
		Data: map[string]string{engine.DefaultKey: string(doc)}}
	if _, err := client.CoreV1().ConfigMaps("kube-system").Create(ctx, live, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if r != nil {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: rollout.DefaultConfigMap}}
		if err := r.ToConfigMap(cm); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	logged = &logBook{}
	a, err := New(Config{
		Record: engine.New(client, engine.Target{Namespace: "kube-system", Name: rollout.DefaultConfigMap}, engine.Options{}),
		Node: reconfigure.Node{
			Config: engine.New(client, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey},
				engine.Options{Validation: engine.ValidationIgnore}),
			Store: &backup.Store{Dir: t.TempDir()}, NodeConfig: clusterconfig.NodeConfig{Name: "cp-0"},
			// An empty manifests directory: a turn fails there before it
			// changes anything, and its lock stays out of the package.
			ManifestsDir: t.TempDir(), Identity: "agent/cp-0/1",
		},
		Clock:     &engine.ServerClock{Local: func() time.Time { return rollouttest.TS(100) }},
		Heartbeat: 50 * time.Millisecond, StaleAfter: 200 * time.Millisecond,
		Log: logged.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, client, logged
}

// logBook keeps what an agent logged, from whichever goroutine.
type logBook struct {
	mu     sync.Mutex
	events []Event
}

func (b *logBook) add(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, e)
}

func (b *logBook) all() []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.events)
}

// count is how many events had reason.
func (b *logBook) count(reason string) int {
	n := 0
	for _, e := range b.all() {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

// byName makes the fake's lists and watches of ConfigMaps honour a
// metadata.name field selector, as the API server does: each of an agent's
// followers (engine.Follow) then sees its own ConfigMap only.
func byName(client *fake.Clientset) *fake.Clientset {
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	named := func(f fields.Selector) (string, bool) {
		if f == nil {
			return "", false
		}
		return f.RequiresExactMatch("metadata.name")
	}
	client.PrependReactor("list", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name, ok := named(a.(k8stesting.ListAction).GetListRestrictions().Fields)
		if !ok {
			return false, nil, nil
		}
		obj, err := client.Tracker().List(gvr, gvk, a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := obj.(*corev1.ConfigMapList)
		list.Items = slices.DeleteFunc(list.Items, func(cm corev1.ConfigMap) bool { return cm.Name != name })
		return true, list, nil
	})
	client.PrependWatchReactor("configmaps", func(a k8stesting.Action) (bool, watch.Interface, error) {
		name, ok := named(a.(k8stesting.WatchAction).GetWatchRestrictions().Fields)
		if !ok {
			return false, nil, nil
		}
		w, err := client.Tracker().Watch(gvr, a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			cm, isCM := e.Object.(*corev1.ConfigMap)
			return e, !isCM || cm.Name == name
		}), nil
	})
	return client
}

// hold has a take its node's Lease, as Run does first, for a test that
// hands it work without its loop. The Lease is renewed every second for a
// minute: these tests are about what the agent does while it holds it,
// and a loaded machine that delays a renewal past half of testAgent's
// 200ms must not take it away (holdFor gives a test those).
func hold(t *testing.T, a *Agent) *Agent {
	t.Helper()
	return holdFor(t, a, time.Second, time.Minute)
}

// holdFor is hold with the Lease renewed every heartbeat for staleAfter.
func holdFor(t *testing.T, a *Agent, heartbeat, staleAfter time.Duration) *Agent {
	t.Helper()
	wasHeartbeat, wasStaleAfter := a.cfg.Heartbeat, a.cfg.StaleAfter
	a.cfg.Heartbeat, a.cfg.StaleAfter = heartbeat, staleAfter
	lease, err := a.holdLease(context.Background())
	a.cfg.Heartbeat, a.cfg.StaleAfter = wasHeartbeat, wasStaleAfter
	if err != nil {
		t.Fatal(err)
	}
	a.lease = lease
	t.Cleanup(func() { _ = lease.Stop() })
	return a
}

// read returns what the fake holds: the record and the live document.
func read(t *testing.T, client *fake.Clientset) (*rollout.Record, string) {
	t.Helper()
	ctx := context.Background()
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, rollout.DefaultConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rollout.FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	live, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r, live.Data[engine.DefaultKey]
}

// reverting is a record whose try of DocV2 (from DocV1) expired after
// every node was Updated: a revert of cp-2, cp-1, cp-0 whose document is
// not yet restored.
func reverting(t *testing.T) *rollout.Record {
	t.Helper()
	r := rollouttest.Started(t, rollouttest.Spec(func(s *rollout.Spec) { s.Try = 20 * time.Second }))
	for i, n := range rollouttest.Nodes {
		rollouttest.Turn(t, r, 10*i+1, n, rollout.NodeUpdated)
	}
	if changed, err := r.ExpireTry(rollouttest.By("agent-cp-1", 60)); err != nil || !changed {
		t.Fatalf("expire: %v, %v", changed, err)
	}
	return r
}

// The revert puts kubeadm-config back only when it still holds the
// reverted target, and says so either way; the record is marked once.
func TestAgentRestoresTheDocumentOnce(t *testing.T) {
	for _, tc := range []struct {
		name, live, want, message string
	}{
		{"holds the reverted target", string(rollouttest.DocV2), string(rollouttest.DocV1), "kubeadm-config was put back from " + rollout.Hash(rollouttest.DocV2) + " to " + rollout.Hash(rollouttest.DocV1)},
		{"already put back", string(rollouttest.DocV1), string(rollouttest.DocV1), "kubeadm-config holds " + rollout.Hash(rollouttest.DocV1) + " already"},
		{"changed since", string(rollouttest.DocV3), string(rollouttest.DocV3), "kubeadm-config was left alone: it holds " + rollout.Hash(rollouttest.DocV3) +
			", no longer the reverted target " + rollout.Hash(rollouttest.DocV2) + ", so someone changed it since; the nodes go back to " + rollout.Hash(rollouttest.DocV1) + " anyway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := reverting(t)
			a, client, logged := testAgent(t, rec, []byte(tc.live))
			hold(t, a)
			a.rollouts.restoreDocument(context.Background(), a.env(), rec)
			got, live := read(t, client)
			if live != tc.want {
				t.Errorf("kubeadm-config holds:\n%s\nwant:\n%s", live, tc.want)
			}
			if !got.Status.DocumentRestored || got.Status.Message != tc.message {
				t.Errorf("record: restored %v, message %q; want %q", got.Status.DocumentRestored, got.Status.Message, tc.message)
			}
			// A second agent, on the record it read before: nothing more.
			a.rollouts.restoreDocument(context.Background(), a.env(), rec)
			if again, live2 := read(t, client); live2 != tc.want || again.Status.Message != tc.message {
				t.Errorf("the second pass changed something: %q, %q", live2, again.Status.Message)
			}
			if n := logged.count("DocumentRestored"); n != 1 {
				t.Errorf("DocumentRestored logged %d times, want once", n)
			}
		})
	}
}

// A damaged record is reported once per version, and nothing else is
// done with it.
func TestAgentReportsADamagedRecordOnce(t *testing.T) {
	a, client, logged := testAgent(t, nil, rollouttest.DocV1)
	a.view.Rollout = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: rollout.DefaultConfigMap, ResourceVersion: "5"},
		Data: map[string]string{rollout.KeyStatus: "nodes: [[["}}
	a.rollouts.do(context.Background(), a.env())
	a.rollouts.do(context.Background(), a.env())
	if n := logged.count("RecordDamaged"); n != 1 {
		t.Fatalf("RecordDamaged logged %d times, want once: %+v", n, logged.all())
	}
	e := logged.all()[0]
	if !e.Warning || !strings.HasPrefix(e.Message, "the rollout record kube-system/kubeadmcfg-rollout is damaged: data.status: ") ||
		!strings.HasSuffix(e.Message, "; fix or delete it; this agent changes nothing on node cp-0 until it is") {
		t.Errorf("got %+v", e)
	}
	events, err := client.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(events.Items) != 1 || events.Items[0].Reason != "RecordDamaged" {
		t.Errorf("want one RecordDamaged Event on the record: %+v, %v", events, err)
	}
	a.view.Rollout.ResourceVersion = "6"
	a.rollouts.do(context.Background(), a.env())
	if n := logged.count("RecordDamaged"); n != 2 {
		t.Errorf("a new version of the damaged record was not reported: %d", n)
	}
}

// A try that ran out is turned into a revert by the first agent; the
// second finds it made and records nothing.
func TestAgentExpiresATryOnce(t *testing.T) {
	r := rollouttest.Started(t, rollouttest.Spec(func(s *rollout.Spec) { s.Try = 20 * time.Second }))
	for i, n := range rollouttest.Nodes {
		rollouttest.Turn(t, r, 10*i+1, n, rollout.NodeUpdated)
	}
	a, client, logged := testAgent(t, r, rollouttest.DocV2) // its clock is at 100s, the deadline at 42s
	hold(t, a)
	a.rollouts.expireTry(context.Background(), a.env())
	a.rollouts.expireTry(context.Background(), a.env())
	got, _ := read(t, client)
	if got.Status.Kind != rollout.KindRevert || got.Status.StartedBy != "agent/cp-0/1" {
		t.Fatalf("want a revert started by the agent, got %+v", got.Status)
	}
	if n := logged.count("TryExpired"); n != 1 {
		t.Errorf("TryExpired logged %d times, want once", n)
	}
}

// How a node's turn ended, from what the run returned.
func TestAgentOutcomes(t *testing.T) {
	unhealthy, apiserver := errors.New("kube-apiserver did not become healthy"), []controlplane.Component{controlplane.APIServer}
	replaced := &reconfigure.Report{Outcomes: []controlplane.Outcome{
		{Component: controlplane.APIServer, Replaced: true}, {Component: controlplane.Scheduler}}}
	for _, tc := range []struct {
		name string
		rep  *reconfigure.Report
		err  error
		want rollout.Outcome
	}{
		{"updated", replaced, nil, rollout.Outcome{Phase: rollout.NodeUpdated, Components: []string{"kube-apiserver"}}},
		{"unchanged", &reconfigure.Report{Warnings: []error{errors.New("not recorded")}}, nil,
			rollout.Outcome{Phase: rollout.NodeUnchanged, Message: "warning: not recorded"}},
		{"rolled back", replaced, exitcode.New(exitcode.RolledBack, &controlplane.FailedError{Err: unhealthy, RolledBack: apiserver}),
			rollout.Outcome{Phase: rollout.NodeRolledBack, Components: []string{"kube-apiserver"},
				Message: "kube-apiserver did not become healthy; rolled back kube-apiserver: the node is back on its previous configuration"}},
		{"rollback failed", replaced, exitcode.New(exitcode.RollbackFailed, &controlplane.RollbackError{Err: unhealthy, Down: apiserver, RollbackErr: unhealthy}),
			rollout.Outcome{Phase: rollout.NodeRollbackFailed, Components: []string{"kube-apiserver"},
				Message: "kube-apiserver did not become healthy; the rollback failed: kube-apiserver may be down: kube-apiserver did not become healthy"}},
		// The phase comes from the error's type, never its exit code.
		{"rolled back, wrapped without its exit code", replaced, fmt.Errorf("apply: %w", &controlplane.FailedError{Err: unhealthy, RolledBack: apiserver}),
			rollout.Outcome{Phase: rollout.NodeRolledBack, Components: []string{"kube-apiserver"},
				Message: "apply: kube-apiserver did not become healthy; rolled back kube-apiserver: the node is back on its previous configuration"}},
		{"before anything changed", &reconfigure.Report{}, exitcode.Failuref("no probe"),
			rollout.Outcome{Phase: rollout.NodeRolledBack, Message: "no probe; nothing was changed on the node"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, outcomeOf(tc.rep, tc.err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Another agent's Lease is judged by watching it change, never by its
// renewTime against this agent's API server's clock: on an HA control
// plane each API server stamps its own host's time. A Lease
// renewed by a live agent, though its renewTime says an hour ago, is never
// taken over (exit 4, naming the holder); one nobody renews any more,
// though its renewTime says now, is taken over once seen unchanged for its
// duration.
func TestAgentLeaseTakeover(t *testing.T) {
	a, client, _ := testAgent(t, nil, rollouttest.DocV1) // the clock says 100s; StaleAfter 200ms
	holder := "agent/cp-0/old"
	renewed := func(sec int) *metav1.MicroTime { m := metav1.NewMicroTime(rollouttest.TS(sec)); return &m }
	leases := client.CoordinationV1().Leases("kube-system")
	lease, err := leases.Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: nodestate.LeaseName("cp-0")},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: renewed(100 - 3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The old agent renews every 20ms, with its own (slow) clock.
	renewing, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for n := 0; ; n++ {
			select {
			case <-renewing:
				return
			case <-time.After(20 * time.Millisecond):
			}
			l, err := leases.Get(context.Background(), lease.Name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			l.Annotations = map[string]string{"renewal": strconv.Itoa(n)}
			_, _ = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		}
	}()
	err = a.Run(ctx)
	close(renewing)
	<-stopped
	if exitcode.FromError(err) != exitcode.Conflict || !strings.Contains(err.Error(), "another agent of node cp-0 is alive (agent/cp-0/old holds lease kubeadmcfg-agent-cp-0 and renews it)") {
		t.Fatalf("a lease renewed by a live agent: want exit 4 naming the holder, got %v", err)
	}
	// Dead now, with a last renewTime that a fast clock made look fresh.
	lease, err = leases.Get(context.Background(), lease.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease.Spec.RenewTime = renewed(100)
	if _, err := leases.Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := leases.Get(context.Background(), nodestate.LeaseName("cp-0"), metav1.GetOptions{})
		if err == nil && *l.Spec.HolderIdentity == "agent/cp-0/1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the abandoned lease was not taken over: %+v, %v", l, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(context.Background(), nodestate.LeaseName("cp-0"), metav1.GetOptions{}); err == nil {
		t.Error("a clean stop left the lease")
	}
}

// A turn applies the record's pinned document, never the live one: the
// pinned copy carries the target's bytes and resourceVersion, and the
// live ConfigMap's uid, which the backups of what was applied record.
func TestAgentAppliesThePinnedTarget(t *testing.T) {
	r := rollouttest.Started(t, rollouttest.Spec())
	a, _, _ := testAgent(t, r, rollouttest.DocV3) // someone patched meanwhile
	a.view.Config = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: "uid-1", ResourceVersion: "900"},
		Data: map[string]string{engine.DefaultKey: string(rollouttest.DocV3)}}
	req := a.rollouts.request(a.env(), r, nil)
	p := req.Source.Pinned
	if p == nil || p.Data[engine.DefaultKey] != string(rollouttest.DocV2) || p.ResourceVersion != "812" || p.UID != "uid-1" ||
		p.Namespace != "kube-system" || p.Name != "kubeadm-config" {
		t.Fatalf("pinned: %+v", p)
	}
	if req.Source.Backup != "" || req.Source.LatestGood || req.DryRun {
		t.Errorf("source: %+v, dry run %v", req.Source, req.DryRun)
	}
}

// After its turn the agent acts on the record as its own write left it,
// not on the copy that began the turn: a change of kubeadm-config that
// arrives before the watch's copy of that write (an undo writes both)
// does not take the turn again, which would render for nothing and log a
// TurnDeferred warning. (make demo showed one after `rollout undo`.)
func TestAgentActsOnItsOwnLastWrite(t *testing.T) {
	a, client, logged := testAgent(t, rollouttest.Started(t, rollouttest.Spec()), rollouttest.DocV2)
	hold(t, a)
	ctx := context.Background()
	cms := client.CoreV1().ConfigMaps("kube-system")
	var err error
	if a.view.Config, err = cms.Get(ctx, "kubeadm-config", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if a.view.Rollout, err = cms.Get(ctx, rollout.DefaultConfigMap, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	// cp-0's turn; in an empty manifests directory it fails unchanged, and
	// the rollout with it.
	a.rollouts.do(ctx, a.env())
	if got, _ := read(t, client); got.Status.Phase != rollout.Failed || got.Status.Nodes[0].Phase != rollout.NodeRolledBack {
		t.Fatalf("want cp-0 RolledBack and the rollout rollout.Failed, got %+v", got.Status)
	}
	before := len(logged.all())
	a.rollouts.do(ctx, a.env()) // as a change of kubeadm-config has it act
	for _, e := range logged.all()[before:] {
		t.Errorf("the agent acted again on the copy that began its turn: %s: %s", e.Reason, e.Message)
	}
}

// NewAgent refuses a config that misses what a turn needs, rather than
// default it: an empty manifests directory would be the working directory,
// where a turn would take its lock and write manifests.
func TestNewAgentRefuses(t *testing.T) {
	client := fake.NewClientset()
	full := func() Config {
		return Config{
			Record: engine.New(client, engine.Target{Namespace: "kube-system", Name: rollout.DefaultConfigMap}, engine.Options{}),
			Node: reconfigure.Node{
				Config: engine.New(client, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey}, engine.Options{}),
				Store:  &backup.Store{Dir: t.TempDir()}, NodeConfig: clusterconfig.NodeConfig{Name: "cp-0"}, ManifestsDir: t.TempDir(),
			},
			Clock: &engine.ServerClock{},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(c *Config)
		want   string
	}{
		{"no engine", func(c *Config) { c.Record = nil },
			"an agent needs the record's and kubeadm-config's engines, the server clock and a backup store"},
		{"no node name", func(c *Config) { c.Name = "" }, "an agent needs its node's name"},
		{"no manifests directory", func(c *Config) { c.ManifestsDir = "" },
			"an agent needs its node's static Pod manifests directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := full()
			tc.change(&cfg)
			_, err := New(cfg)
			if err == nil || err.Error() != tc.want {
				t.Errorf("NewAgent: got %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := New(full()); err != nil {
		t.Errorf("NewAgent of a full config: %v", err)
	}
}

// currentRecord, currentStatus and currentConfig read what the fake holds.
func currentRecord(t *testing.T, client *fake.Clientset) *corev1.ConfigMap {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), rollout.DefaultConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func currentStatus(t *testing.T, client *fake.Clientset) *rollout.Status {
	t.Helper()
	r, _ := read(t, client)
	return r.Status
}

func currentConfig(t *testing.T, client *fake.Clientset) *corev1.ConfigMap {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}
