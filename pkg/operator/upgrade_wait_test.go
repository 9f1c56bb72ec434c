package operator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// TestUpgradeEnded: how a wait judges each record of the upgrade it
// follows, as its agents (or operators) leave it: exit code and words.
func TestUpgradeEnded(t *testing.T) {
	nodes := []string{"cp-0", "cp-1", "cp-2"}
	bob := upgrade.Clock{Now: rollouttest.TS(50), By: "bob"}
	for _, tc := range []struct {
		name string
		// move takes the started upgrade where the case needs it.
		move func(t *testing.T, rec *upgrade.Record) *upgrade.Record
		done bool
		code exitcode.Code
		want string
	}{
		{name: "just started", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record { return rec }},
		{name: "a node in its step", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record {
			stepDone(t, rec, "cp-0")
			stepBegins(t, rec, "cp-1", "control-plane")
			return rec
		}},
		{name: "complete", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record {
			for _, n := range nodes {
				stepDone(t, rec, n)
			}
			enterKubelets(t, rec)
			for _, n := range nodes {
				stepDone(t, rec, n)
			}
			complete(t, rec)
			return rec
		}, done: true},
		{name: "rolled back", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record {
			stepFails(t, rec, "cp-0", upgrade.NodeRolledBack, "[upgrade/staticpods] timed out")
			return rec
		}, done: true, code: exitcode.RolledBack,
			want: "the upgrade to v1.37.2 failed at node cp-0 (upgrading-control-plane-cp-0, phase control-plane), the node is back on its previous version: " +
				"node cp-0: upgrading-control-plane-cp-0: phase control-plane failed: exit status 1; last output: [upgrade/staticpods] timed out; " +
				"the nodes after it are untouched: cp-1, cp-2"},
		{name: "rollback failed", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record {
			stepDone(t, rec, "cp-0")
			stepFails(t, rec, "cp-1", upgrade.NodeRollbackFailed, "etcd did not come back")
			return rec
		}, done: true, code: exitcode.RollbackFailed,
			want: "the upgrade to v1.37.2 failed at node cp-1 (upgrading-control-plane-cp-1, phase control-plane), and it was not put back on its previous version, " +
				"or not wholly (recovery is forward): node cp-1: upgrading-control-plane-cp-1: phase control-plane failed: exit status 1; last output: etcd did not come back"},
		{name: "failed past the point of no return", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record {
			stepDone(t, rec, "cp-0")
			stepFails(t, rec, "cp-1", upgrade.NodeFailed, "kubelet-config: write /var/lib/kubelet/config.yaml")
			return rec
		}, done: true, code: exitcode.RollbackFailed,
			want: "the upgrade to v1.37.2 failed at node cp-1 (upgrading-control-plane-cp-1, phase control-plane), past the point where kubeadm-config says v1.37.2, " +
				"so it was not put back (recovery is forward): node cp-1: upgrading-control-plane-cp-1: phase control-plane failed: exit status 1; " +
				"last output: kubelet-config: write /var/lib/kubelet/config.yaml"},
		{name: "a kubelet failed", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record {
			for _, n := range nodes {
				stepDone(t, rec, n)
			}
			enterKubelets(t, rec)
			stepDone(t, rec, "cp-0")
			stepFails(t, rec, "cp-1", upgrade.NodeFailed, "restart: exit status 3")
			return rec
		}, done: true, code: exitcode.RollbackFailed,
			want: "the upgrade to v1.37.2 failed at node cp-1 (upgrading-kubelet, phase control-plane), past the point where kubeadm-config says v1.37.2, " +
				"so it was not put back (recovery is forward): node cp-1: upgrading-kubelet: phase control-plane failed: exit status 1; last output: restart: exit status 3"},
		{name: "resumed, not yet run again", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record {
			stepFails(t, rec, "cp-0", upgrade.NodeRolledBack, "x")
			if err := rec.Resumed(); err != nil {
				t.Fatal(err)
			}
			return rec
		}},
		{name: "resumed, run again and failed again", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record {
			stepFails(t, rec, "cp-0", upgrade.NodeRolledBack, "x")
			if err := rec.Resumed(); err != nil {
				t.Fatal(err)
			}
			stepFails(t, rec, "cp-0", upgrade.NodeRolledBack, "again")
			return rec
		}, done: true, code: exitcode.RolledBack,
			want: "the upgrade to v1.37.2 failed at node cp-0 (upgrading-control-plane-cp-0, phase control-plane), the node is back on its previous version: " +
				"node cp-0: upgrading-control-plane-cp-0: phase control-plane failed: exit status 1; last output: again; the nodes after it are untouched: cp-1, cp-2"},
		{name: "failed by upgrade-fail", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record {
			stepBegins(t, rec, "cp-0", "upgrade/etcd")
			if _, err := rec.Fail(bob, "forced to failed by bob"); err != nil {
				t.Fatal(err)
			}
			return rec
		}, done: true, code: exitcode.RollbackFailed,
			want: "the upgrade to v1.37.2 failed at node cp-0 (upgrading-control-plane-cp-0, phase upgrade/etcd), failed by someone else than its agent, and not put back: forced to failed by bob"},
		{name: "aborting", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record {
			if _, err := rec.Set(bob, upgrade.Aborting, "", false, "abandoned"); err != nil {
				t.Fatal(err)
			}
			return rec
		}, done: true, code: exitcode.Conflict, want: "the upgrade to v1.37.2 was aborted: it is in upgrade-aborting (abandoned)"},
		{name: "aborted", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record {
			for _, s := range []upgrade.State{upgrade.Aborting, upgrade.Aborted} {
				if _, err := rec.Set(bob, s, "", false, ""); err != nil {
					t.Fatal(err)
				}
			}
			return rec
		}, done: true, code: exitcode.Conflict, want: "the upgrade to v1.37.2 was aborted: it is in upgrade-aborted (-)"},
		{name: "replaced by an upgrade driven by hand", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record {
			for _, s := range []upgrade.State{upgrade.Aborting, upgrade.Aborted} {
				if _, err := rec.Set(bob, s, "", false, ""); err != nil {
					t.Fatal(err)
				}
			}
			next, err := upgrade.Start(rec, nil, bob, "v1.36.3", "v1.37.2", "")
			if err != nil {
				t.Fatal(err)
			}
			return next
		}, done: true, code: exitcode.Conflict,
			want: "the upgrade to v1.37.2 is no longer carried out by the agents: the record holds an upgrade from v1.36.3 to v1.37.2 in upgrade-started, driven by hand"},
		{name: "replaced by another upgrade-apply", move: func(t *testing.T, rec *upgrade.Record) *upgrade.Record {
			rec.Agents = upgrade.NewAgents(bob, "v1.37.3", rec.PlanOf())
			return rec
		}, done: true, code: exitcode.Conflict,
			want: "the upgrade to v1.37.2 started by alice at 2026-11-30T12:00:05Z is no longer the recorded one: an upgrade to v1.37.3 started by bob at 2026-11-30T12:00:50Z is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := agentsRecord(t, nodes...)
			follow := *rec.Agents
			done, err := UpgradeEnded(tc.move(t, rec), &follow)
			if done != tc.done {
				t.Fatalf("done %v, want %v (%v)", done, tc.done, err)
			}
			if tc.code == exitcode.OK {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			wantErr(t, err, tc.code, tc.want)
			var failed *UpgradeFailedError
			if isFailure := tc.code == exitcode.RolledBack || tc.code == exitcode.RollbackFailed; isFailure != errors.As(err, &failed) {
				t.Errorf("an *UpgradeFailedError: %v, want %v", !isFailure, isFailure)
			}
		})
	}
}

// TestUpgradeWait follows the record through a watch: each change is shown
// to Progress, the first failure ends the wait with its code; a deleted
// record and a wait that ends first are exit 7.
func TestUpgradeWait(t *testing.T) {
	nodes := []string{"cp-0", "cp-1"}
	stored := func(t *testing.T, rec *upgrade.Record, rv string) *corev1.ConfigMap {
		cm := upgradeRecord(t, rec)
		cm.ResourceVersion = rv
		return cm
	}
	for _, tc := range []struct {
		name   string
		events func(t *testing.T, rec *upgrade.Record, w *watch.FakeWatcher)
		ctx    time.Duration
		code   exitcode.Code
		seen   int
		want   string
	}{
		{name: "a node rolled back", events: func(t *testing.T, rec *upgrade.Record, w *watch.FakeWatcher) {
			stepBegins(t, rec, "cp-0", "control-plane")
			w.Modify(stored(t, rec, "11"))
			rec.Agents.Nodes[0].Phase = "control-plane" // an unrelated change, before the failure
			w.Modify(stored(t, rec, "12"))
			c := upgrade.Clock{Now: rollouttest.TS(20), By: "agent"}
			if _, err := rec.EndRun(c, upgrade.AgentRunnerPrefix("cp-0")+"1", false, "health check"); err != nil {
				t.Fatal(err)
			}
			rec.Agents.EndNode("cp-0", upgrade.NodeRolledBack, "health check")
			w.Modify(stored(t, rec, "13"))
		}, code: exitcode.RolledBack, seen: 4,
			want: "the upgrade to v1.37.2 failed at node cp-0 (upgrading-control-plane-cp-0, phase control-plane), the node is back on its previous version: health check; the nodes after it are untouched: cp-1"},
		{name: "complete", events: func(t *testing.T, rec *upgrade.Record, w *watch.FakeWatcher) {
			for _, n := range nodes {
				stepDone(t, rec, n)
			}
			enterKubelets(t, rec)
			for _, n := range nodes {
				stepDone(t, rec, n)
			}
			complete(t, rec)
			w.Modify(stored(t, rec, "11"))
		}, seen: 2},
		{name: "deleted", events: func(t *testing.T, rec *upgrade.Record, w *watch.FakeWatcher) {
			w.Delete(stored(t, rec, "11"))
		}, code: exitcode.OutcomeUnknown, seen: 1,
			want: "stopped waiting before the upgrade ended (upgrade to v1.37.2, upgrade-started, 0 of 2 control planes and 0 of 2 kubelets done): the upgrade record was deleted; it goes on in the cluster without this command"},
		{name: "the wait ends first", events: func(*testing.T, *upgrade.Record, *watch.FakeWatcher) {}, ctx: 300 * time.Millisecond,
			code: exitcode.OutcomeUnknown, seen: 1,
			want: "stopped waiting before the upgrade ended (upgrade to v1.37.2, upgrade-started, 0 of 2 control planes and 0 of 2 kubelets done): context deadline exceeded; it goes on in the cluster without this command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := agentsRecord(t, nodes...)
			follow := *rec.Agents
			w := upgradeReady(nodes...)
			w.objects = append(w.objects, stored(t, rec, "10"))
			o, cs := w.operator(t)
			fw := watch.NewFakeWithChanSize(10, false)
			cs.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) { return true, fw, nil })
			again, _, err := o.Read(context.Background()) // a copy to move, as the stored one is
			if err != nil {
				t.Fatal(err)
			}
			tc.events(t, again, fw)
			ctx := context.Background()
			if tc.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctx)
				defer cancel()
			}
			seen := 0
			_, err = o.Wait(ctx, &follow, UpgradeWaitOptions{Progress: func(*upgrade.Record) { seen++ }})
			if seen != tc.seen {
				t.Errorf("progress saw %d records, want %d", seen, tc.seen)
			}
			if tc.code == exitcode.OK {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, tc.code, tc.want)
		})
	}
}

// TestUpgradeSummaryCountsEachNodesWork: a node whose control-plane step
// is done counts as such from then on (issue 34: "0 of 3 nodes done" once
// cp-0 was done), its kubelet apart, as the resume's first line shows it.
func TestUpgradeSummaryCountsEachNodesWork(t *testing.T) {
	nodes := []string{"cp-0", "cp-1", "cp-2"}
	rec := agentsRecord(t, nodes...)
	var got []string
	say := func() { got = append(got, UpgradeSummary(rec)) }
	say()
	stepDone(t, rec, "cp-0")
	say()
	stepFails(t, rec, "cp-1", upgrade.NodeFailed, "x")
	if err := rec.Resumed(); err != nil {
		t.Fatal(err)
	}
	say()
	stepDone(t, rec, "cp-1")
	stepDone(t, rec, "cp-2")
	enterKubelets(t, rec)
	stepDone(t, rec, "cp-0")
	say()
	stepBegins(t, rec, "cp-1", "kubelet")
	say()
	want := []string{
		"upgrade-started, 0 of 3 control planes and 0 of 3 kubelets done",
		"upgraded-control-plane-cp-0, 1 of 3 control planes and 0 of 3 kubelets done",
		"upgrading-control-plane-cp-1-failed, 1 of 3 control planes and 0 of 3 kubelets done, resume 1",
		"upgrading-kubelets, 3 of 3 control planes and 1 of 3 kubelets done, resume 1",
		"upgrading-kubelets, 3 of 3 control planes and 1 of 3 kubelets done, node cp-1 in upgrading-kubelet phase kubelet, resume 1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}
