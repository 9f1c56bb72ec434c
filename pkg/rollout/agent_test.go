package rollout

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// Single paths of the agent against a fake clientset. That exactly one
// agent makes each transition, and that nodes go one at a time, is shown
// against the real control plane (internal/e2e TestAgent).

// testAgent is an agent of cp-0 over a fake clientset holding the record
// r (none when nil) and kubeadm-config with doc; logged collects its
// events.
func testAgent(t *testing.T, r *Record, doc []byte) (a *Agent, client *fake.Clientset, logged *[]AgentEvent) {
	t.Helper()
	client = fake.NewClientset()
	ctx := context.Background()
	live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config", UID: "uid-1"},
		Data: map[string]string{engine.DefaultKey: string(doc)}}
	if _, err := client.CoreV1().ConfigMaps("kube-system").Create(ctx, live, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if r != nil {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: DefaultConfigMap}}
		if err := r.ToConfigMap(cm); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var events []AgentEvent
	a, err := NewAgent(AgentConfig{
		Record: engine.New(client, engine.Target{Namespace: "kube-system", Name: DefaultConfigMap}, engine.Options{}),
		Config: engine.New(client, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey},
			engine.Options{Validation: engine.ValidationIgnore}),
		Clock: &engine.ServerClock{Local: func() time.Time { return ts(100) }}, Store: &backup.Store{Dir: t.TempDir()},
		// An empty manifests directory: a turn fails there before it
		// changes anything, and its lock stays out of the package.
		Node: clusterconfig.NodeConfig{Name: "cp-0"}, ManifestsDir: t.TempDir(), Identity: "agent/cp-0/1", Heartbeat: 50 * time.Millisecond, StaleAfter: 200 * time.Millisecond,
		Log: func(e AgentEvent) { events = append(events, e) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, client, &events
}

// read returns what the fake holds: the record and the live document.
func read(t *testing.T, client *fake.Clientset) (*Record, string) {
	t.Helper()
	ctx := context.Background()
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, DefaultConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	live, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r, live.Data[engine.DefaultKey]
}

// reverting is a record whose try of docV2 (from docV1) expired after
// every node was Updated: a revert of cp-2, cp-1, cp-0 whose document is
// not yet restored.
func reverting(t *testing.T) *Record {
	t.Helper()
	r := started(t, spec(func(s *Spec) { s.Try = 20 * time.Second }))
	for i, n := range cps {
		turn(t, r, 10*i+1, n, NodeUpdated)
	}
	if changed, err := r.ExpireTry(by("agent-cp-1", 60)); err != nil || !changed {
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
		{"holds the reverted target", string(docV2), string(docV1), "kubeadm-config was put back from " + Hash(docV2) + " to " + Hash(docV1)},
		{"already put back", string(docV1), string(docV1), "kubeadm-config holds " + Hash(docV1) + " already"},
		{"changed since", string(docV3), string(docV3), "kubeadm-config was left alone: it holds " + Hash(docV3) +
			", no longer the reverted target " + Hash(docV2) + ", so someone changed it since; the nodes go back to " + Hash(docV1) + " anyway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := reverting(t)
			a, client, logged := testAgent(t, rec, []byte(tc.live))
			a.restoreDocument(context.Background(), rec)
			got, live := read(t, client)
			if live != tc.want {
				t.Errorf("kubeadm-config holds:\n%s\nwant:\n%s", live, tc.want)
			}
			if !got.Status.DocumentRestored || got.Status.Message != tc.message {
				t.Errorf("record: restored %v, message %q; want %q", got.Status.DocumentRestored, got.Status.Message, tc.message)
			}
			// A second agent, on the record it read before: nothing more.
			a.restoreDocument(context.Background(), rec)
			if again, live2 := read(t, client); live2 != tc.want || again.Status.Message != tc.message {
				t.Errorf("the second pass changed something: %q, %q", live2, again.Status.Message)
			}
			if n := countReason(*logged, "DocumentRestored"); n != 1 {
				t.Errorf("DocumentRestored logged %d times, want once", n)
			}
		})
	}
}

func countReason(events []AgentEvent, reason string) int {
	n := 0
	for _, e := range events {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

// A damaged record is reported once per version, and nothing else is
// done with it.
func TestAgentReportsADamagedRecordOnce(t *testing.T) {
	a, client, logged := testAgent(t, nil, docV1)
	a.record = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: DefaultConfigMap, ResourceVersion: "5"},
		Data: map[string]string{KeyStatus: "nodes: [[["}}
	a.act(context.Background())
	a.act(context.Background())
	if n := countReason(*logged, "RecordDamaged"); n != 1 {
		t.Fatalf("RecordDamaged logged %d times, want once: %+v", n, *logged)
	}
	e := (*logged)[0]
	if !e.Warning || !strings.HasPrefix(e.Message, "the rollout record kube-system/kubeadmcfg-rollout is damaged: data.status: ") ||
		!strings.HasSuffix(e.Message, "; fix or delete it; this agent changes nothing on node cp-0 until it is") {
		t.Errorf("got %+v", e)
	}
	events, err := client.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(events.Items) != 1 || events.Items[0].Reason != "RecordDamaged" {
		t.Errorf("want one RecordDamaged Event on the record: %+v, %v", events, err)
	}
	a.record.ResourceVersion = "6"
	a.act(context.Background())
	if n := countReason(*logged, "RecordDamaged"); n != 2 {
		t.Errorf("a new version of the damaged record was not reported: %d", n)
	}
}

// A try that ran out is turned into a revert by the first agent; the
// second finds it made and records nothing.
func TestAgentExpiresATryOnce(t *testing.T) {
	r := started(t, spec(func(s *Spec) { s.Try = 20 * time.Second }))
	for i, n := range cps {
		turn(t, r, 10*i+1, n, NodeUpdated)
	}
	a, client, logged := testAgent(t, r, docV2) // its clock is at 100s, the deadline at 42s
	a.expireTry(context.Background())
	a.expireTry(context.Background())
	got, _ := read(t, client)
	if got.Status.Kind != KindRevert || got.Status.StartedBy != "agent/cp-0/1" {
		t.Fatalf("want a revert started by the agent, got %+v", got.Status)
	}
	if n := countReason(*logged, "TryExpired"); n != 1 {
		t.Errorf("TryExpired logged %d times, want once", n)
	}
}

// How a node's turn ended, from what the run returned.
func TestAgentOutcomes(t *testing.T) {
	replaced := &reconfigure.Report{Outcomes: []controlplane.Outcome{
		{Component: controlplane.APIServer, Replaced: true}, {Component: controlplane.Scheduler}}}
	for _, tc := range []struct {
		name string
		rep  *reconfigure.Report
		err  error
		want Outcome
	}{
		{"updated", replaced, nil, Outcome{Phase: NodeUpdated, Components: []string{"kube-apiserver"}}},
		{"unchanged", &reconfigure.Report{Warnings: []error{errors.New("not recorded")}}, nil,
			Outcome{Phase: NodeUnchanged, Message: "warning: not recorded"}},
		{"rolled back", replaced, exitcode.New(exitcode.RolledBack, errors.New("kube-apiserver did not become healthy")),
			Outcome{Phase: NodeRolledBack, Components: []string{"kube-apiserver"}, Message: "kube-apiserver did not become healthy"}},
		{"rollback failed", replaced, exitcode.New(exitcode.RollbackFailed, errors.New("kube-apiserver may be down")),
			Outcome{Phase: NodeRollbackFailed, Components: []string{"kube-apiserver"}, Message: "kube-apiserver may be down"}},
		{"before anything changed", &reconfigure.Report{}, exitcode.Failuref("no probe"),
			Outcome{Phase: NodeRolledBack, Message: "no probe; nothing was changed on the node"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, outcomeOf(tc.rep, tc.err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A second agent of the same node is refused while the first one's Lease
// is fresh, and takes over a stale one.
func TestAgentLeaseTakeover(t *testing.T) {
	a, client, _ := testAgent(t, nil, docV1) // the clock says 100s
	holder := "agent/cp-0/old"
	renewed := func(sec int) *metav1.MicroTime { m := metav1.NewMicroTime(ts(sec)); return &m }
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: AgentLeaseName("cp-0")},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: renewed(100)}}
	leases := client.CoordinationV1().Leases("kube-system")
	if _, err := leases.Create(context.Background(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The clock stays at 100s: the lease stays fresh while it is waited for.
	err := a.Run(ctx)
	if exitcode.FromError(err) != exitcode.Conflict || !strings.Contains(err.Error(), "another agent of node cp-0 is alive (agent/cp-0/old holds lease kubeadmcfg-agent-cp-0 and renews it)") {
		t.Fatalf("a fresh lease: want exit 4 naming the holder, got %v", err)
	}
	lease.Spec.RenewTime = renewed(99) // a second ago: past StaleAfter
	if _, err := leases.Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := leases.Get(context.Background(), AgentLeaseName("cp-0"), metav1.GetOptions{})
		if err == nil && *l.Spec.HolderIdentity == "agent/cp-0/1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stale lease was not taken over: %+v, %v", l, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(context.Background(), AgentLeaseName("cp-0"), metav1.GetOptions{}); err == nil {
		t.Error("a clean stop left the lease")
	}
}

// A turn applies the record's pinned document, never the live one: the
// pinned copy carries the target's bytes and resourceVersion, and the
// live ConfigMap's uid, which the backups of what was applied record.
func TestAgentAppliesThePinnedTarget(t *testing.T) {
	r := started(t, spec())
	a, _, _ := testAgent(t, r, docV3) // someone patched meanwhile
	a.live = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: "uid-1", ResourceVersion: "900"},
		Data: map[string]string{engine.DefaultKey: string(docV3)}}
	req := a.request(r, nil)
	p := req.Source.Pinned
	if p == nil || p.Data[engine.DefaultKey] != string(docV2) || p.ResourceVersion != "812" || p.UID != "uid-1" ||
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
	a, client, logged := testAgent(t, started(t, spec()), docV2)
	ctx := context.Background()
	cms := client.CoreV1().ConfigMaps("kube-system")
	var err error
	if a.live, err = cms.Get(ctx, "kubeadm-config", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if a.record, err = cms.Get(ctx, DefaultConfigMap, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	// cp-0's turn; in an empty manifests directory it fails unchanged, and
	// the rollout with it.
	a.act(ctx)
	if got, _ := read(t, client); got.Status.Phase != Failed || got.Status.Nodes[0].Phase != NodeRolledBack {
		t.Fatalf("want cp-0 RolledBack and the rollout Failed, got %+v", got.Status)
	}
	before := len(*logged)
	a.act(ctx) // as a change of kubeadm-config has it act
	for _, e := range (*logged)[before:] {
		t.Errorf("the agent acted again on the copy that began its turn: %s: %s", e.Reason, e.Message)
	}
}

// NewAgent refuses a config that misses what a turn needs, rather than
// default it: an empty manifests directory would be the working directory,
// where a turn would take its lock and write manifests.
func TestNewAgentRefuses(t *testing.T) {
	client := fake.NewClientset()
	full := func() AgentConfig {
		return AgentConfig{
			Record: engine.New(client, engine.Target{Namespace: "kube-system", Name: DefaultConfigMap}, engine.Options{}),
			Config: engine.New(client, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey}, engine.Options{}),
			Clock:  &engine.ServerClock{}, Store: &backup.Store{Dir: t.TempDir()},
			Node: clusterconfig.NodeConfig{Name: "cp-0"}, ManifestsDir: t.TempDir(),
		}
	}
	for _, tc := range []struct {
		name   string
		change func(c *AgentConfig)
		want   string
	}{
		{"no engine", func(c *AgentConfig) { c.Record = nil },
			"an agent needs the record's and kubeadm-config's engines, the server clock and a backup store"},
		{"no node name", func(c *AgentConfig) { c.Node.Name = "" }, "an agent needs its node's name"},
		{"no manifests directory", func(c *AgentConfig) { c.ManifestsDir = "" },
			"an agent needs its node's static Pod manifests directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := full()
			tc.change(&cfg)
			_, err := NewAgent(cfg)
			if err == nil || err.Error() != tc.want {
				t.Errorf("NewAgent: got %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := NewAgent(full()); err != nil {
		t.Errorf("NewAgent of a full config: %v", err)
	}
}
