package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// reconfigure changing the etcd members of a stacked control plane: three
// nodes in the test's own network namespace (testcluster.StartLocal with a
// stacked etcd), each running an etcd member from kubeadm's own manifest
// (cp-0's as `kubeadm init` writes it, the others' as `kubeadm join`
// does), run by the node's static Pod runner with the real etcd binary.
// The steps run in order on one cluster; each leaves it healthy.

func TestEtcdReconfigure(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	c := startEtcdCluster(t)
	runSteps(t, c, []step[*etcdCluster]{
		{"a joined member with nothing changed is unchanged", etcdUnchanged},
		{"an etcd.local change shows as drift of every member", etcdDrift},
		{"a member down beforehand: refused with exit 4 naming it, nothing changed", etcdMemberDown},
		{"no member changes while another holds the etcd lock; the change reaches every member one at a time, and writes never fail longer than one member restart", etcdEveryMember},
		{"the snapshot taken before a change restores with etcdutl and holds kubeadm-config", etcdSnapshotRestores},
		{"a flag etcd refuses: the first member rolls back (exit 8), the others untouched", etcdBadFlag},
		{"with an agent on every node: nodes shows etcd drift, and a rollout changes every member one at a time", etcdRollout},
	})
}

// etcdCluster is the test's control plane, its nodes in order.
type etcdCluster struct {
	*controlPlane
	bins   testcluster.Binaries
	client kubernetes.Interface
	order  []*testNode
}

func startEtcdCluster(t *testing.T) *etcdCluster {
	t.Helper()
	bins, err := testcluster.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	if bins.Etcdutl == "" {
		t.Fatal("hack/testbin.sh reports no etcdutl")
	}
	dir := keptDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	nodes, err := testcluster.StartLocal(ctx, bins, testcluster.LocalOptions{Nodes: 3, Etcd: testcluster.EtcdStacked,
		Dir: filepath.Join(dir, "cluster"), Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nodes.Stop)
	t.Logf("three control-plane nodes with a stacked etcd up in %s", time.Since(start).Round(time.Second))
	client, err := nodes.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	c := &etcdCluster{controlPlane: &controlPlane{Nodes: nodes, dir: dir, nodes: map[string]*testNode{}}, bins: bins, client: client}
	for _, n := range nodes.Nodes {
		if n.PatchesDir == "" {
			t.Fatalf("%s has no kubeadm patches: with a stacked etcd every node has some", n.Name)
		}
		tn := &testNode{Node: n, cp: c.controlPlane, backups: filepath.Join(dir, "backups-"+n.Name)}
		c.nodes[n.Name] = tn
		c.order = append(c.order, tn)
	}
	return c
}

// reconfigure runs reconfigure "on" node n: its node flags, and its
// kubeadm certificates directory, where the runner keeps the node's
// /etc/kubernetes/pki.
func (c *etcdCluster) reconfigure(t *testing.T, n *testNode, args ...string) result {
	t.Helper()
	full := append(append([]string{"kubeadmcfg", "reconfigure"}, args...), n.flags()...)
	full = append(full, "--cert-dir", filepath.Join(n.Root, "etc", "kubernetes", "pki"), "--kubeconfig", c.Kubeconfig)
	return runLong(t, 8*time.Minute, "kubectl", full...)
}

// etcdResult is the part of reconfigure -o json these tests read.
type etcdResult struct {
	Changed       bool   `json:"changed"`
	LastKnownGood string `json:"lastKnownGood"`
	Diff          string `json:"diff"`
	Error         string `json:"error"`
	Etcd          *struct {
		LeftAlone string `json:"leftAlone"`
		Member    string `json:"member"`
		Snapshot  string `json:"snapshot"`
	} `json:"etcd"`
	Components []struct {
		Name         string `json:"name"`
		Changed      bool   `json:"changed"`
		Replaced     bool   `json:"replaced"`
		RolledBack   bool   `json:"rolledBack"`
		HealthyAfter string `json:"healthyAfter"`
	} `json:"components"`
}

func decodeEtcdResult(t *testing.T, r result) etcdResult {
	t.Helper()
	var res etcdResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("reconfigure -o json: %v: %s", err, r)
	}
	return res
}

// component is the result of the component named name (its Pod name).
func (res etcdResult) component(t *testing.T, name string) (changed, replaced, rolledBack bool, healthyAfter time.Duration) {
	t.Helper()
	for _, c := range res.Components {
		if c.Name == name {
			if c.HealthyAfter != "" {
				d, err := time.ParseDuration(c.HealthyAfter)
				if err != nil {
					t.Fatal(err)
				}
				healthyAfter = d
			}
			return c.Changed, c.Replaced, c.RolledBack, healthyAfter
		}
	}
	t.Fatalf("no %s among the components: %+v", name, res.Components)
	return
}

// wantEtcdUpdates checks how many new etcd manifests each node's runner
// picked up.
func (c *etcdCluster) wantEtcdUpdates(t *testing.T, want map[string]int) {
	t.Helper()
	for _, n := range c.order {
		if got := n.Runner.Stats("etcd").Updates; got != want[n.Name] {
			t.Errorf("%s: its etcd member picked up %d new manifests, want %d", n.Name, got, want[n.Name])
		}
	}
}

// wantOneAtATime checks, as the runners saw it, that each member's last
// new manifest was picked up only once the one before it ran healthy, and
// that each is back: no member's old process had exited (PodStats.Updated)
// while another's new one had not yet answered its probe (ReadySince).
// etcdWatch's looks cannot tell: a member keeps serving the connections
// it has while it shuts down, and its next process may serve again between
// two looks.
func (c *etcdCluster) wantOneAtATime(t *testing.T) {
	t.Helper()
	for i, a := range c.order {
		sa := c.waitBack(t, a)
		for _, b := range c.order[i+1:] {
			sb := b.Runner.Stats("etcd")
			if sa.Updated.Before(sb.Updated) && !sb.Updated.After(sa.ReadySince) || sb.Updated.Before(sa.Updated) && !sa.Updated.After(sb.ReadySince) {
				t.Errorf("the members of %s and %s restarted together: %s replaced at %s, ready at %s; %s replaced at %s, ready at %s",
					a.Name, b.Name, a.Name, sa.Updated, sa.ReadySince, b.Name, sb.Updated, sb.ReadySince)
			}
		}
	}
}

// waitBack waits, up to 10s (the runner probes once a second), until n's
// member answers its probe since its last new manifest, and returns what
// its runner says.
func (c *etcdCluster) waitBack(t *testing.T, n *testNode) testcluster.PodStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := n.Runner.Stats("etcd")
		if st.Ready && st.ReadySince.After(st.Updated) {
			return st
		}
		if time.Now().After(deadline) {
			t.Errorf("%s's member is not back since its last new manifest: %+v", n.Name, st)
			return st
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// etcdStarted is when each member's running process started.
func (c *etcdCluster) etcdStarted() map[string]time.Time {
	out := map[string]time.Time{}
	for _, n := range c.order {
		out[n.Name] = n.Runner.Stats("etcd").Started
	}
	return out
}

// wantNoLock checks that no one holds the etcd lock.
func (c *etcdCluster) wantNoLock(t *testing.T) {
	t.Helper()
	l, err := c.client.CoordinationV1().Leases("kube-system").Get(context.Background(), reconfigure.EtcdLockLease, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the etcd lock is still there: %v, %v", l, err)
	}
}

// waitMembersUp waits until every member answers its status with a leader.
func (c *etcdCluster) waitMembersUp(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	watch := watchEtcd(t, c.Nodes.Nodes)
	defer watch.stopAndGet()
	waitFor(t, ctx, "every etcd member up", func() error {
		last, ok := watch.last()
		if !ok {
			return errors.New("not looked yet")
		}
		for _, n := range c.order {
			if !last.up[n.Name] {
				return errors.New(n.Name + "'s member is not up")
			}
		}
		return nil
	})
	if err := c.WaitReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// allManifests reads every node's manifests directory.
func (c *etcdCluster) allManifests(t *testing.T) map[string]map[string][]byte {
	t.Helper()
	out := map[string]map[string][]byte{}
	for _, n := range c.order {
		out[n.Name] = readManifests(t, n)
	}
	return out
}

// wantManifests checks that every node's manifests are those of before.
func (c *etcdCluster) wantManifests(t *testing.T, before map[string]map[string][]byte) {
	t.Helper()
	for _, n := range c.order {
		if diff := cmpManifests(before[n.Name], readManifests(t, n)); diff != "" {
			t.Errorf("%s: the manifests changed: %s", n.Name, diff)
		}
	}
}

// snapshots lists the etcd snapshots in node n's backup directory.
func (c *etcdCluster) snapshots(t *testing.T, n *testNode) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, b := range backups(t, n.backups) {
		if b["kind"] == "EtcdSnapshot" {
			out = append(out, b)
		}
	}
	return out
}

// flagIn reports whether line has the flag (" --name=value").
func flagIn(line, flag string) bool { return strings.Contains(line+" ", " "+flag+" ") }
