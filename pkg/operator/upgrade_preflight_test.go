package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// cluster136 is kubeadm-config of a cluster at v1.36.3 with stacked etcd.
const cluster136 = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.3\n"

// upgradeWorld is a cluster at v1.36.3 ready for an upgrade to v1.37.2:
// control-plane nodes whose kubelets run v1.36.3, each with an agent alive
// that finds kubeadm v1.36.3 and v1.37.2 and a healthy etcd member, and
// whatever a test changes of it.
type upgradeWorld struct {
	doc     string
	nodes   []*corev1.Node
	leases  []*coordinationv1.Lease
	objects []runtime.Object
}

func upgradeReady(nodes ...string) *upgradeWorld {
	w := &upgradeWorld{doc: cluster136}
	for _, n := range nodes {
		w.node(n, true, "v1.36.3")
		w.agent(n, rollouttest.Base, nodestate.State{KubeadmVersions: []string{"v1.36.3", "v1.37.2"},
			Etcd: &nodestate.EtcdHealth{Member: n + " (8e9e05c52164694d)", Healthy: true}})
	}
	return w
}

// node adds a Node whose kubelet reports kubelet; control-plane ones are
// labelled so.
func (w *upgradeWorld) node(name string, controlPlane bool, kubelet string) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet}}}
	if controlPlane {
		n.Labels[engine.ControlPlaneLabel] = ""
	}
	w.nodes = append(w.nodes, n)
}

// agent adds (or replaces) node's agent Lease, renewed at renewed,
// publishing state.
func (w *upgradeWorld) agent(node string, renewed time.Time, state nodestate.State) {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nodestate.LeaseName(node), Labels: map[string]string{nodestate.Label: node}},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renewed}, LeaseDurationSeconds: new(int32(30))},
	}
	if err := nodestate.SetState(l, state); err != nil {
		panic(err)
	}
	for i, old := range w.leases {
		if old.Name == l.Name {
			w.leases[i] = l
			return
		}
	}
	w.leases = append(w.leases, l)
}

// leaseDuration sets how long node's agent Lease may go unrenewed: how
// long a preflight watches it when it looks stale.
func (w *upgradeWorld) leaseDuration(node string, seconds int32) {
	for _, l := range w.leases {
		if l.Name == nodestate.LeaseName(node) {
			l.Spec.LeaseDurationSeconds = &seconds
		}
	}
}

func (w *upgradeWorld) dropAgent(node string) {
	for i, l := range w.leases {
		if l.Name == nodestate.LeaseName(node) {
			w.leases = append(w.leases[:i], w.leases[i+1:]...)
			return
		}
	}
}

func (w *upgradeWorld) operator(t *testing.T) (*Upgrades, *fake.Clientset) {
	t.Helper()
	objects := append([]runtime.Object{&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubeadm-config", ResourceVersion: "812"},
		Data:       map[string]string{engine.DefaultKey: w.doc},
	}}, w.objects...)
	for _, n := range w.nodes {
		objects = append(objects, n)
	}
	for _, l := range w.leases {
		objects = append(objects, l)
	}
	cs := fake.NewClientset(objects...)
	n := 0
	cs.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ev := a.(k8stesting.CreateAction).GetObject().(*corev1.Event)
		n++
		ev.Name = fmt.Sprintf("%s%d", ev.GenerateName, n)
		return false, nil, nil
	})
	rollouts := &Rollouts{
		Record: engine.New(cs, engine.Target{Namespace: ns, Name: rollout.DefaultConfigMap}, engine.Options{CreateIfMissing: true}),
		Config: engine.New(cs, engine.Target{Namespace: ns, Name: "kubeadm-config", Key: engine.DefaultKey}, engine.Options{Validation: engine.ValidationIgnore}),
		Now:    func() time.Time { return rollouttest.Base.Add(5 * time.Second) },
		By:     "alice",
	}
	return &Upgrades{
		Record:   engine.New(cs, engine.Target{Namespace: ns, Name: upgrade.DefaultConfigMap}, engine.Options{CreateIfMissing: true}),
		Rollouts: rollouts,
	}, cs
}

func kubeadmPlan(t *testing.T) *upgrade.Plan {
	t.Helper()
	p, err := upgrade.Builtin("kubeadm")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// upgradeRecord is the ConfigMap of a record holding rec.
func upgradeRecord(t *testing.T, rec *upgrade.Record) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: upgrade.DefaultConfigMap, Annotations: map[string]string{}}}
	if err := rec.Encode(cm.Annotations); err != nil {
		t.Fatal(err)
	}
	return cm
}

// TestUpgradePreflightRefusals: every refusal of the preflight, with its
// exact words, exit 4 and nothing written; each case breaks one thing of a
// cluster that is otherwise ready, and the last several at once, which are
// all named.
func TestUpgradePreflightRefusals(t *testing.T) {
	byHand, err := upgrade.Start(nil, nil, upgrade.Clock{Now: rollouttest.Base, By: "bob"}, "v1.36.3", "v1.36.4", "")
	if err != nil {
		t.Fatal(err)
	}
	active := rollouttest.ConfigMap(t, rollouttest.Started(t, rollouttest.Spec()))
	cps := []string{"cp-0", "cp-1", "cp-2"}
	healthy := nodestate.State{KubeadmVersions: []string{"v1.36.3", "v1.37.2"}, Etcd: &nodestate.EtcdHealth{Healthy: true}}
	for _, tc := range []struct {
		name    string
		version string
		nodes   []string
		change  func(t *testing.T, w *upgradeWorld)
		want    string
	}{
		{name: "the target's kubeadm missing on one node", change: func(t *testing.T, w *upgradeWorld) {
			w.agent("cp-1", rollouttest.Base, nodestate.State{KubeadmVersions: []string{"v1.36.3"}, Etcd: healthy.Etcd})
		}, want: "node cp-1: no kubeadm v1.37.2 (its agent finds v1.36.3)"},
		{name: "an agent that publishes no kubeadm versions", change: func(t *testing.T, w *upgradeWorld) {
			w.agent("cp-2", rollouttest.Base, nodestate.State{Etcd: healthy.Etcd})
		}, want: "node cp-2: its agent publishes no kubeadm versions (an agent without --kubeadm-template, or older than upgrade-apply)"},
		{name: "an agent that publishes nothing", change: func(t *testing.T, w *upgradeWorld) {
			w.leases[0].Annotations = nil
		}, want: "node cp-0: its agent publishes no kubeadm versions (an agent without --kubeadm-template, or older than upgrade-apply), " +
			"its agent publishes no health of its etcd member (kubeadm-config has local etcd)"},
		{name: "two minors ahead", version: "v1.38.0",
			want: "v1.38.0 is 2 minor versions ahead of kubeadm-config's kubernetesVersion v1.36.3: kubeadm upgrades one minor version at a time (to v1.37 first); " +
				"node cp-0: no kubeadm v1.38.0 (its agent finds v1.36.3, v1.37.2); node cp-1: no kubeadm v1.38.0 (its agent finds v1.36.3, v1.37.2); " +
				"node cp-2: no kubeadm v1.38.0 (its agent finds v1.36.3, v1.37.2)"},
		{name: "a downgrade", version: "v1.36.2", change: func(t *testing.T, w *upgradeWorld) {
			for _, n := range cps {
				w.agent(n, rollouttest.Base, nodestate.State{KubeadmVersions: []string{"v1.36.2"}, Etcd: healthy.Etcd})
			}
		}, want: "v1.36.2 is older than kubeadm-config's kubernetesVersion v1.36.3: upgrade-apply does not downgrade"},
		{name: "another major version", version: "v2.0.0", change: func(t *testing.T, w *upgradeWorld) {
			for _, n := range cps {
				w.agent(n, rollouttest.Base, nodestate.State{KubeadmVersions: []string{"2.0.0"}, Etcd: healthy.Etcd})
			}
		}, want: "v2.0.0 is another major version than kubeadm-config's kubernetesVersion v1.36.3: kubeadm upgrades one minor version at a time"},
		{name: "no kubernetesVersion", change: func(t *testing.T, w *upgradeWorld) {
			w.doc = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n"
		}, want: "kubeadm-config has no kubernetesVersion: kubeadm's version rules cannot be checked"},
		{name: "a kubernetesVersion that is a label", change: func(t *testing.T, w *upgradeWorld) {
			w.doc = strings.Replace(cluster136, "v1.36.3", "stable-1.36", 1)
		}, want: `kubeadm-config's kubernetesVersion "stable-1.36" is not a version such as v1.36.3: kubeadm's version rules cannot be checked`},
		{name: "an agent lost", change: func(t *testing.T, w *upgradeWorld) {
			w.agent("cp-1", rollouttest.Base.Add(-time.Minute), healthy)
			w.leaseDuration("cp-1", 1)
		}, want: "node cp-1: its agent is lost (last seen 65s ago; its Lease did not change in the 1s watched)"},
		{name: "no agent", change: func(t *testing.T, w *upgradeWorld) { w.dropAgent("cp-2") },
			want: "node cp-2: no agent (no Lease kubeadmcfg-agent-cp-2)"},
		{name: "an agent's state unreadable", change: func(t *testing.T, w *upgradeWorld) {
			w.leases[1].Annotations[nodestate.Annotation] = `{"kubeadmVersions": "v1.37.2"}`
		}, want: "node cp-1: what its agent publishes cannot be read: lease kube-system/kubeadmcfg-agent-cp-1: annotation kubeadmcfg.io/node-state is not a node state: " +
			"json: cannot unmarshal string into Go struct field State.kubeadmVersions of type []string"},
		{name: "a rollout active", change: func(t *testing.T, w *upgradeWorld) { w.objects = append(w.objects, active) },
			want: "rollout 1 (rollout) is Progressing, started by alice: the agents carry out one kind of work at a time; let it end first"},
		{name: "an upgrade in progress", change: func(t *testing.T, w *upgradeWorld) { w.objects = append(w.objects, upgradeRecord(t, byHand)) },
			want: "an upgrade from v1.36.3 to v1.36.4 is in state upgrade-started; finish or abort it first"},
		{name: "etcd unhealthy", change: func(t *testing.T, w *upgradeWorld) {
			w.agent("cp-2", rollouttest.Base, nodestate.State{KubeadmVersions: healthy.KubeadmVersions,
				Etcd: &nodestate.EtcdHealth{Member: "cp-2 (8e9e05c52164694d)", Error: "alarm NOSPACE on member cp-0"}})
		}, want: "node cp-2: its etcd member cp-2 (8e9e05c52164694d) is not healthy: alarm NOSPACE on member cp-0"},
		{name: "no etcd health with local etcd", change: func(t *testing.T, w *upgradeWorld) {
			w.agent("cp-0", rollouttest.Base, nodestate.State{KubeadmVersions: healthy.KubeadmVersions})
		}, want: "node cp-0: its agent publishes no health of its etcd member (kubeadm-config has local etcd)"},
		{name: "a kubelet too old", change: func(t *testing.T, w *upgradeWorld) {
			w.node("worker-2", false, "v1.33.9")
			w.node("worker-1", false, "v1.33.0")
			w.node("worker-3", false, "v1.34.0")
		}, want: "the kubelet of node worker-1 is v1.33.0, more than 3 minor versions older than v1.37.2, which kubeadm refuses: upgrade it first; " +
			"the kubelet of node worker-2 is v1.33.9, more than 3 minor versions older than v1.37.2, which kubeadm refuses: upgrade it first"},
		{name: "a kubelet that reports no version", change: func(t *testing.T, w *upgradeWorld) {
			w.node("worker-1", false, "")
			w.node("worker-0", false, "1.36-dirty")
		}, want: "no kubelet version that kubeadm can read reported by node worker-0, worker-1 (status.nodeInfo.kubeletVersion)"},
		{name: "nodes that are not control-plane nodes", nodes: []string{"cp-0", "worker-1", "cp-9", "cp-1", "cp-2"},
			change: func(t *testing.T, w *upgradeWorld) { w.node("worker-1", false, "v1.36.3") },
			want:   "nodes worker-1, cp-9 are not control-plane nodes (the control-plane nodes: cp-0, cp-1, cp-2)"},
		{name: "an order that leaves a node out", nodes: []string{"cp-2", "cp-0"},
			want: "the order leaves out control-plane node cp-1: an upgrade takes every control-plane node"},
		{name: "everything at once", version: "v1.38.1", change: func(t *testing.T, w *upgradeWorld) {
			w.objects = append(w.objects, active, upgradeRecord(t, byHand))
			w.dropAgent("cp-0")
			w.agent("cp-2", rollouttest.Base.Add(-time.Minute), healthy)
			w.node("worker-1", false, "v1.34.2")
		}, want: "an upgrade from v1.36.3 to v1.36.4 is in state upgrade-started; finish or abort it first; " +
			"rollout 1 (rollout) is Progressing, started by alice: the agents carry out one kind of work at a time; let it end first; " +
			"v1.38.1 is 2 minor versions ahead of kubeadm-config's kubernetesVersion v1.36.3: kubeadm upgrades one minor version at a time (to v1.37 first); " +
			"node cp-0: no agent (no Lease kubeadmcfg-agent-cp-0); node cp-1: no kubeadm v1.38.1 (its agent finds v1.36.3, v1.37.2); " +
			"node cp-2: its agent looks lost (last seen 65s ago by the API server's clock, not confirmed); " +
			"the kubelet of node worker-1 is v1.34.2, more than 3 minor versions older than v1.38.1, which kubeadm refuses: upgrade it first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := upgradeReady(cps...)
			if tc.change != nil {
				tc.change(t, w)
			}
			o, cs := w.operator(t)
			version := tc.version
			if version == "" {
				version = "v1.37.2"
			}
			before, _, _ := o.Read(context.Background())
			_, err := o.Apply(context.Background(), ApplySpec{Version: version, Plan: kubeadmPlan(t), Nodes: tc.nodes})
			wantErr(t, err, exitcode.Conflict, "preflight failed, nothing was started: "+tc.want)
			var pf *PreflightError
			if !errors.As(err, &pf) {
				t.Errorf("not a *PreflightError: %T", err)
			}
			after, _, _ := o.Read(context.Background())
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("a refused start wrote the record (-before +after)\n%s", diff)
			}
			for _, a := range cs.Actions() {
				if a.GetVerb() != "get" && a.GetVerb() != "list" {
					t.Errorf("a refused start did %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
		})
	}
}

// TestUpgradePreflightRefusesVersions: a version the agents cannot carry
// out (trailing whitespace, build metadata, a pre-release) is a usage error
// of its own, before the cluster is read, and nothing is written.
func TestUpgradePreflightRefusesVersions(t *testing.T) {
	for version, want := range map[string]string{
		"v1.37.2" + " ": `want a Kubernetes version such as v1.37.2, not "v1.37.2 "`,
		"v1.37.2+build": `want a Kubernetes version such as v1.37.2, not "v1.37.2+build": build metadata names no release`,
		"v1.37.2-rc.0": "v1.37.2-rc.0 is a pre-release, which the agents' kubeadm upgrade refuses (it allows no release candidate or experimental upgrade): " +
			"upgrade to a release, or drive a pre-release by hand with upgrade-start and upgrade-run",
	} {
		t.Run(version, func(t *testing.T) {
			w := upgradeReady("cp-0", "cp-1")
			for _, n := range []string{"cp-0", "cp-1"} {
				w.agent(n, rollouttest.Base, nodestate.State{KubeadmVersions: []string{"v1.36.3", strings.TrimSpace(version)},
					Etcd: &nodestate.EtcdHealth{Healthy: true}})
			}
			o, cs := w.operator(t)
			_, err := o.Apply(context.Background(), ApplySpec{Version: version, Plan: kubeadmPlan(t)})
			wantErr(t, err, exitcode.Usage, want)
			if n := len(cs.Actions()); n != 0 {
				t.Errorf("a refused version made %d calls: %v", n, cs.Actions())
			}
		})
	}
}

// TestUpgradePreflightAllows: a patch release, the same version again, a
// kubelet exactly three minors behind, external etcd whose agents publish
// no member, and an order of one's own pass.
func TestUpgradePreflightAllows(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, version string
		nodes         []string
		change        func(w *upgradeWorld)
		order         string
	}{
		{name: "a minor up", version: "v1.37.2", order: "cp-0, cp-1"},
		{name: "a patch release", version: "v1.36.4", change: func(w *upgradeWorld) {
			for _, l := range w.leases {
				_ = nodestate.SetState(l, nodestate.State{KubeadmVersions: []string{"1.36.4"}, Etcd: &nodestate.EtcdHealth{Healthy: true}})
			}
		}, order: "cp-0, cp-1"},
		{name: "the same version again", version: "v1.36.3", order: "cp-0, cp-1"},
		{name: "a kubelet three minors behind", version: "v1.37.2", change: func(w *upgradeWorld) { w.node("worker-0", false, "v1.34.9") }, order: "cp-0, cp-1"},
		{name: "external etcd", version: "v1.37.2", change: func(w *upgradeWorld) {
			w.doc += "etcd:\n  external:\n    endpoints: [https://etcd-0:2379]\n"
			for _, l := range w.leases {
				_ = nodestate.SetState(l, nodestate.State{KubeadmVersions: []string{"v1.37.2"}})
			}
		}, order: "cp-0, cp-1"},
		{name: "an order of one's own", version: "v1.37.2", nodes: []string{"cp-1", "cp-0"}, order: "cp-1, cp-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := upgradeReady("cp-1", "cp-0")
			if tc.change != nil {
				tc.change(w)
			}
			o, _ := w.operator(t)
			ap, err := o.Preflight(ctx, ApplySpec{Version: tc.version, Plan: kubeadmPlan(t), Nodes: tc.nodes})
			if err != nil {
				t.Fatal(err)
			}
			if got := joinNames(ap.Plan.WorkNodes()); got != tc.order || ap.From != "v1.36.3" {
				t.Errorf("nodes %s from %s, want %s from v1.36.3", got, ap.From, tc.order)
			}
		})
	}
}

// TestUpgradePreflightWatchesALeaseThatLooksStale: as a rollout's
// preflight (R9), an agent whose Lease looks a minute old by the API
// server's clock is watched before it is taken for lost: renewed while
// watched, it is alive and the upgrade starts; the preflight says what it
// waits for.
func TestUpgradePreflightWatchesALeaseThatLooksStale(t *testing.T) {
	w := upgradeReady("cp-0", "cp-1")
	w.agent("cp-1", rollouttest.Base.Add(-time.Minute), nodestate.State{KubeadmVersions: []string{"v1.37.2"}, Etcd: &nodestate.EtcdHealth{Healthy: true}})
	w.leaseDuration("cp-1", 3)
	o, cs := w.operator(t)
	var progress []string
	o.Rollouts.Progress = func(line string) { progress = append(progress, line) }
	// The agent's server's clock runs a minute behind the reader's.
	start := time.Now()
	renewing(t, cs, "cp-1", 500*time.Millisecond, func() time.Time { return rollouttest.Base.Add(-time.Minute + time.Since(start)) })
	if _, err := o.Apply(context.Background(), ApplySpec{Version: "v1.37.2", Plan: kubeadmPlan(t)}); err != nil {
		t.Fatalf("a live agent renewing through another API server: %v", err)
	}
	want := []string{"preflight: waiting for node cp-1: its agent looks lost by the API server's clock: watching its Lease for up to 3s"}
	if diff := cmp.Diff(want, progress); diff != "" {
		t.Errorf("progress (-want +got)\n%s", diff)
	}
}
