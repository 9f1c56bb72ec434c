package e2e

import (
	"context"
	"errors"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// The steps of TestEtcdReconfigure, in the order they run.

// etcdUnchanged: kubeadm renders every member as a first member (its
// --initial-cluster names the node alone); cp-1 and cp-2 joined and run
// with the cluster's. With nothing changed in etcd.local, no member is
// seen to change, and a run restarts nothing and records the node's last
// known good, etcd included.
func etcdUnchanged(t *testing.T, c *etcdCluster) {
	for _, n := range c.order {
		res := decodeEtcdResult(t, c.reconfigure(t, n, "--diff", "-o", "json"))
		if changed, _, _, _ := res.component(t, "etcd"); changed || res.Changed || res.Diff != "" {
			t.Errorf("%s: etcd changed %v, the node changed %v; diff:\n%s", n.Name, changed, res.Changed, res.Diff)
		}
	}
	r := c.reconfigure(t, c.order[1], "-o", "json")
	wantExit(t, r, 0)
	if res := decodeEtcdResult(t, r); res.Changed || res.LastKnownGood == "" {
		t.Errorf("cp-1: want unchanged and recorded as the last known good: %s", r)
	}
	c.wantEtcdUpdates(t, nil)
	c.wantUpdates(t, nil)
}

// etcdDrift: a change of etcd.local.extraArgs is etcd drift on every
// member, and nothing else.
func etcdDrift(t *testing.T, c *etcdCluster) {
	c.patch(t, c.order[0], "--set", "etcd.local.extraArgs.snapshot-count=12345")
	for _, n := range c.order {
		res := decodeEtcdResult(t, c.reconfigure(t, n, "--diff", "-o", "json"))
		for _, comp := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"} {
			if changed, _, _, _ := res.component(t, comp); changed != (comp == "etcd") {
				t.Errorf("%s: %s would change: %v", n.Name, comp, changed)
			}
		}
		if !strings.Contains(res.Diff, "+    - --snapshot-count=12345\n") || strings.Contains(res.Diff, "initial-cluster") {
			t.Errorf("%s: the diff does not add the flag alone:\n%s", n.Name, res.Diff)
		}
	}
}

// etcdMemberDown: with cp-2's member down (its process killed and kept
// down, as a member that crashed), cp-1's member may not be changed: its
// cluster would lose quorum. Nothing changes: no manifest, no snapshot,
// no lock left.
func etcdMemberDown(t *testing.T, c *etcdCluster) {
	victim := c.order[2]
	victim.Runner.Hold("etcd")
	released := false
	release := func() {
		if !released {
			released = true
			victim.Runner.Release("etcd")
			c.waitMembersUp(t)
		}
	}
	defer release()
	watch := watchEtcd(t, c.Nodes.Nodes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitFor(t, ctx, "cp-2's member down", func() error {
		if s, ok := watch.last(); !ok || s.up[victim.Name] {
			return errors.New("it answers")
		}
		return nil
	})
	before := c.allManifests(t)
	// The load balancer checks /readyz twice a second: a run that starts
	// before it marked cp-2's API server, which has no storage, down may
	// be sent there and not read kubeadm-config before its timeout. Such a
	// run is tried again: it too must change nothing.
	var r result
	for attempt := 1; ; attempt++ {
		r = c.reconfigure(t, c.order[1], "-o", "json") // no progress: stderr is the error alone
		if attempt == 6 || !strings.Contains(r.stderr, "gave up reading") {
			break
		}
		t.Logf("attempt %d reached cp-2's API server, without storage: %s", attempt, strings.TrimSpace(r.stderr))
	}
	wantExit(t, r, 4)
	for _, want := range []string{"refusing to change etcd member cp-1", "etcd member cp-2 (ID", "is unhealthy"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refusal does not say %q: %s", want, r)
		}
	}
	c.wantManifests(t, before)
	if snaps := c.snapshots(t, c.order[1]); len(snaps) != 0 {
		t.Errorf("a snapshot was written: %v", snaps)
	}
	release()
	c.wantNoLock(t)
	c.wantEtcdUpdates(t, nil)
}

// etcdEveryMember: while someone else holds the etcd lock, no member is
// changed (exit 4, naming the holder). Then cp-0 and cp-1 are
// reconfigured at once, as two people might: their members change one
// after the other (the second waits for the lock, or is refused while the
// first holds it and is run again); then cp-2. All the while a client
// writes to the API every 200ms, and etcd's own status is watched.
func etcdEveryMember(t *testing.T, c *etcdCluster) {
	c.heldLock(t)
	ids := c.memberIDs(t)
	watch := watchEtcd(t, c.Nodes.Nodes)
	writer := startWriter(t, c.Kubeconfig)
	time.Sleep(2 * time.Second)
	start := time.Now()

	results := map[string]result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range c.order[:2] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := c.reconfigure(t, n, "-o", "json")
			mu.Lock()
			results[n.Name] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	healthyAfter := map[string]time.Duration{}
	next := []*testNode{c.order[2]}
	for _, n := range c.order[:2] {
		r := results[n.Name]
		switch {
		case r.code == 0:
			_, replaced, _, took := decodeEtcdResult(t, r).component(t, "etcd")
			if !replaced {
				t.Errorf("%s: its member was not replaced: %s", n.Name, r)
			}
			healthyAfter[n.Name] = took
		case r.code == 4 && strings.Contains(r.stderr, "another etcd member is being changed"):
			t.Logf("%s was refused while the other member changed", n.Name)
			next = append([]*testNode{n}, next...)
		default:
			t.Fatalf("%s: %s", n.Name, r)
		}
	}
	if len(next) > 2 {
		t.Fatalf("both were refused: %v", results)
	}
	for _, n := range next {
		r := c.reconfigure(t, n, "-o", "json")
		wantExit(t, r, 0)
		_, _, _, healthyAfter[n.Name] = decodeEtcdResult(t, r).component(t, "etcd")
	}
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	verdict := judge(watch.names, watch.stopAndGet())
	writes := writer.stopAndGet()

	// etcd's own view: never two members down, the member list whole.
	// Which member restarted when is the runners' to say (below).
	t.Logf("etcd: %s", verdict)
	if verdict.minUp < 2 || verdict.minListed != 3 {
		t.Errorf("quorum was at risk: %s", verdict)
	}
	// The writer: no write failed for longer than one member's change.
	restart := time.Duration(0)
	for _, d := range healthyAfter {
		restart = max(restart, d)
	}
	longest, failed := longestOutage(writes)
	t.Logf("figures: three members changed in %s; each member's change took %v; %d writes, %d failed attempts, the longest a write took to land once it failed %s",
		took.Round(100*time.Millisecond), healthyAfter, len(writes), failed, longest.Round(100*time.Millisecond))
	if longest > restart+attemptTimeout {
		t.Errorf("a write failed for %s, longer than one member's change (%s) and one attempt (%s)", longest, restart, attemptTimeout)
	}
	if len(writes) < int(took/time.Second) {
		t.Errorf("only %d writes in %s", len(writes), took)
	}

	// Every member runs the new flag, with its data: the same member IDs.
	for _, n := range c.order {
		if line := commandLine(t, n, "etcd"); !flagIn(line, "--snapshot-count=12345") {
			t.Errorf("%s: etcd runs without the new flag: %s", n.Name, line)
		}
	}
	if got := c.memberIDs(t); !maps.Equal(got, ids) {
		t.Errorf("the member IDs changed: %v, were %v", got, ids)
	}
	c.wantEtcdUpdates(t, map[string]int{"cp-0": 1, "cp-1": 1, "cp-2": 1})
	c.wantUpdates(t, nil)
	c.wantNoLock(t)
	c.wantOneAtATime(t)
	for _, n := range c.order {
		if lg := n.lastKnownGood(t); !strings.Contains(lg, "snapshot-count") {
			t.Errorf("%s: the last known good is not the document applied:\n%s", n.Name, lg)
		}
	}
}

// etcdSnapshotRestores: each node's change left one snapshot of its member
// in its backup directory, 0600, listed by backup list; cp-0's restores
// with etcdutl into a scratch directory, and the member started on it holds
// kubeadm-config as it was when the snapshot was taken.
func etcdSnapshotRestores(t *testing.T, c *etcdCluster) {
	for _, n := range c.order {
		snaps := c.snapshots(t, n)
		if len(snaps) != 1 || snaps[0]["node"] != n.Name || snaps[0]["reason"] != "before etcd change" {
			t.Fatalf("%s: want one snapshot of its member taken before the change, got %v", n.Name, snaps)
		}
		fi, err := os.Stat(snaps[0]["path"].(string))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: the snapshot's mode: %v, %v", n.Name, fi, err)
		}
	}
	path := c.snapshots(t, c.order[0])[0]["path"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	restored, err := testcluster.RestoreEtcdSnapshot(ctx, c.bins.Etcdutl, c.bins.Etcd, path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Stop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{restored.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/registry/configmaps/kube-system/kubeadm-config")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("kubeadm-config in the restored data: %v, %v", resp, err)
	}
	if v := string(resp.Kvs[0].Value); !strings.Contains(v, "kind: ClusterConfiguration") || !strings.Contains(v, "value: \"12345\"") {
		t.Errorf("the restored kubeadm-config is not the document of the snapshot's time:\n%q", v)
	}
}

// etcdBadFlag: a flag etcd refuses at start. cp-0's member crash-loops on
// it and is put back on its previous manifest (exit 8); cp-1 and cp-2 are
// never touched, and the cluster keeps quorum throughout.
func etcdBadFlag(t *testing.T, c *etcdCluster) {
	n := c.order[0]
	before := c.allManifests(t)
	updates := n.Runner.Stats("etcd").Updates
	backup := c.patch(t, n, "--set", "etcd.local.extraArgs.no-such-flag=1")
	defer c.restore(t, n, backup)
	watch := watchEtcd(t, c.Nodes.Nodes)
	started := c.etcdStarted()
	r := c.reconfigure(t, n, "--no-etcd-snapshot", "--wait", "2m", "-o", "json") // the crash loop ends the wait long before
	verdict := judge(watch.names, watch.stopAndGet())
	if r.code != 8 {
		t.Fatalf("want exit 8, got %s", r)
	}
	res := decodeEtcdResult(t, r)
	if _, replaced, rolledBack, _ := res.component(t, "etcd"); !replaced || !rolledBack || !strings.Contains(res.Error, "etcd keeps exiting") {
		t.Errorf("etcd replaced %v, rolled back %v: %s", replaced, rolledBack, res.Error)
	}
	c.wantManifests(t, before)
	if line := commandLine(t, n, "etcd"); strings.Contains(line, "no-such-flag") {
		t.Errorf("cp-0's etcd runs the refused flag: %s", line)
	}
	if got := n.Runner.Stats("etcd").Updates; got != updates+2 {
		t.Errorf("cp-0's member picked up %d new manifests, want 2 (the bad one, and the previous one back)", got-updates)
	}
	c.wantEtcdUpdates(t, map[string]int{"cp-0": updates + 2, "cp-1": 1, "cp-2": 1})
	t.Logf("etcd: %s", verdict)
	if verdict.minUp < 2 || verdict.minListed != 3 {
		t.Errorf("quorum was at risk: %s", verdict)
	}
	// As the runners saw it: cp-0's member is back on its previous
	// manifest, the others' processes are the ones that ran before.
	c.waitBack(t, n)
	for _, other := range c.order[1:] {
		if now := other.Runner.Stats("etcd").Started; !now.Equal(started[other.Name]) {
			t.Errorf("%s's member was restarted (its process started at %s, before at %s)", other.Name, now, started[other.Name])
		}
	}
	if snaps := c.snapshots(t, n); len(snaps) != 1 {
		t.Errorf("--no-etcd-snapshot took one: %v", snaps)
	}
	c.wantNoLock(t)
	c.waitMembersUp(t)
}

// heldLock: with the etcd lock held by another holder that renews it (an
// agent's turn on cp-2, say), reconfigure on cp-0 is refused with exit 4
// naming it, and changes nothing.
func (c *etcdCluster) heldLock(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	leases := c.client.CoordinationV1().Leases("kube-system")
	holder, seconds := "agent/cp-2/e2e", int32(60)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: reconfigure.EtcdLockLease, Labels: map[string]string{reconfigure.EtcdLockLabel: "cp-2"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds},
	}
	if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	renewing := make(chan struct{})
	go func() { // the holder renews
		defer close(renewing)
		for ctx.Err() == nil {
			if l, err := leases.Get(ctx, reconfigure.EtcdLockLease, metav1.GetOptions{}); err == nil {
				now := metav1.NowMicro()
				l.Spec.RenewTime = &now
				_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	before := c.allManifests(t)
	r := c.reconfigure(t, c.order[0], "-o", "json")
	cancel()
	<-renewing
	if err := leases.Delete(context.Background(), reconfigure.EtcdLockLease, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantExit(t, r, 4)
	if want := "another etcd member is being changed (on node cp-2, by agent/cp-2/e2e"; !strings.Contains(r.stderr, want) {
		t.Errorf("the refusal does not say %q: %s", want, r)
	}
	c.wantManifests(t, before)
	if snaps := c.snapshots(t, c.order[0]); len(snaps) != 0 {
		t.Errorf("a snapshot was written: %v", snaps)
	}
}

// memberIDs maps the member names to their IDs.
func (c *etcdCluster) memberIDs(t *testing.T) map[string]uint64 {
	t.Helper()
	cli, err := c.EtcdClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, m := range list.Members {
		out[m.Name] = m.ID
	}
	return out
}
