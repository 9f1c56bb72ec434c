package agent

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
)

// The agent's rules for its Lease and its writes, each on a fake API: an
// agent that cannot show it holds its Lease acts no more, a write the API
// refuses is retried with a backoff and logged once, a resume defers for
// what passes by itself, and an agent writes its own node's entry only.

// expired is a record whose try of DocV2 ran out long ago (the agents'
// clock says 100s, the deadline was 42s): the next pass writes a revert.
func expired(t *testing.T) *rollout.Record {
	t.Helper()
	r := rollouttest.Started(t, rollouttest.Spec(func(s *rollout.Spec) { s.Try = 20 * time.Second }))
	for i, n := range rollouttest.Nodes {
		rollouttest.Turn(t, r, 10*i+1, n, rollout.NodeUpdated)
	}
	return r
}

// recordWrites counts the writes of the record the fake is asked for, and
// refuses them with refuse while it is set.
func recordWrites(a *Agent, client interface {
	PrependReactor(verb, resource string, reaction k8stesting.ReactionFunc)
}, refuse *atomic.Value) *atomic.Int64 {
	var n atomic.Int64
	client.PrependReactor("update", "configmaps", func(act k8stesting.Action) (bool, runtime.Object, error) {
		if act.(k8stesting.UpdateAction).GetObject().(interface{ GetName() string }).GetName() != rollout.DefaultConfigMap {
			return false, nil, nil
		}
		n.Add(1)
		if err, _ := refuse.Load().(error); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
	return &n
}

// An agent whose Lease renewals have failed for more than half its
// duration may have been taken over by another agent of its node: it
// writes nothing to the record (here, the revert of an expired try) and
// says so once, until a renewal gets through again.
func TestAgentActsNoMoreOnceItCannotShowItHoldsItsLease(t *testing.T) {
	a, client, logged := testAgent(t, expired(t), rollouttest.DocV2)
	var refuse atomic.Value
	writes := recordWrites(a, client, &refuse)
	var leaseDown atomic.Bool
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if leaseDown.Load() {
			return true, nil, apierrors.NewServiceUnavailable("the API server is restarting")
		}
		return false, nil, nil
	})
	holdFor(t, a, 50*time.Millisecond, 200*time.Millisecond)
	ctx := context.Background()
	if err := a.lease.Confirm(ctx); err != nil {
		t.Fatal(err)
	}
	a.view.Rollout = currentRecord(t, client)
	leaseDown.Store(true)
	time.Sleep(250 * time.Millisecond)
	a.rollouts.do(ctx, a.env())
	a.rollouts.do(ctx, a.env())
	if n := writes.Load(); n != 0 {
		t.Errorf("%d writes of the record by an agent not sure it holds its lease", n)
	}
	if n := logged.count("NotActing"); n != 1 {
		t.Errorf("NotActing logged %d times, want once: %+v", n, logged.all())
	}
	leaseDown.Store(false)
	if err := a.lease.Confirm(ctx); err != nil {
		t.Fatal(err)
	}
	a.rollouts.do(ctx, a.env())
	if got := currentStatus(t, client); got.Kind != rollout.KindRevert {
		t.Errorf("once its lease is renewed again the agent reverts the expired try: %+v", got)
	}
}

// A revert the API refuses (a certificate that expired, a Role
// edited, an admission webhook) is tried again with a backoff that
// doubles up to the resync period, not every 100ms, and the warning is
// logged once while its message stays the same (not 32 PUTs and 32
// warnings in 3s).
func TestAgentBacksOffAWriteTheAPIRefuses(t *testing.T) {
	a, client, logged := testAgent(t, expired(t), rollouttest.DocV2)
	var refuse atomic.Value
	refuse.Store(error(apierrors.NewUnauthorized("x509: certificate has expired or is not yet valid")))
	writes := recordWrites(a, client, &refuse)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	time.Sleep(3 * time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := writes.Load(); n < 1 || n > 4 {
		t.Errorf("%d attempts to write the revert in 3s; want a backoff of 1s, 2s, ...: at most 4", n)
	}
	if n := logged.count("TryExpired"); n != 1 {
		t.Errorf("TryExpired logged %d times, want once: %+v", n, logged.all())
	}
}

// A resumed turn that cannot start, for what passes by itself (here
// the manifests directory locked by a reconfigure run by hand), leaves the
// node in progress as the earlier agent left it: no resume counted, no
// put-back, no RollbackFailed for a node nothing touched; it is tried again
// later, rather than failing (exit 9) a healthy node in sync.
func TestAgentDefersAResumeItCannotStart(t *testing.T) {
	r := rollouttest.Started(t, rollouttest.Spec())
	if err := r.BeginNode(rollouttest.By("agent/cp-0/old", 1), 1, "cp-0", []string{"kube-apiserver"}, ""); err != nil {
		t.Fatal(err)
	}
	a, client, logged := testAgent(t, r, rollouttest.DocV2)
	hold(t, a)
	unlock, err := controlplane.Lock(a.cfg.ManifestsDir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx := context.Background()
	a.view.Rollout, a.view.Config = currentRecord(t, client), currentConfig(t, client)
	a.rollouts.do(ctx, a.env())
	got := currentStatus(t, client)
	if n := got.Nodes[0]; got.Phase != rollout.Progressing || n.Phase != rollout.NodeInProgress || n.Resumes != 0 || n.Agent != "agent/cp-0/old" {
		t.Errorf("want cp-0 left in progress as the earlier agent left it, got rollout %s, %+v", got.Phase, n)
	}
	for _, reason := range []string{"PuttingBack", "NodeRollbackFailed", "NodeRolledBack", "NodeResumed"} {
		if n := logged.count(reason); n != 0 {
			t.Errorf("%s logged %d times: %+v", reason, n, logged.all())
		}
	}
	events := logged.all()
	if n := logged.count("TurnDeferred"); n != 1 || !strings.Contains(events[len(events)-1].Message, "cannot be resumed yet: another reconfigure is running on") {
		t.Errorf("want one TurnDeferred naming the busy manifests directory: %+v", events)
	}
}

// An agent writes its own node's entry in the record, and nothing
// else of the record's nodes: a change that would touch another node's
// entry is refused before anything is written.
func TestAgentWritesItsOwnEntryOnly(t *testing.T) {
	r := rollouttest.Started(t, rollouttest.Spec())
	rollouttest.Turn(t, r, 1, "cp-0", rollout.NodeUpdated)
	a, client, _ := testAgent(t, r, rollouttest.DocV2)
	var refuse atomic.Value
	writes := recordWrites(a, client, &refuse)
	_, _, err := a.rollouts.updateOwn(context.Background(), a.env(), func(r *rollout.Record, _ string, c rollout.Clock) error {
		return r.BeginNode(c, 1, "cp-1", nil, "") // not its node
	})
	if exitcode.FromError(err) != exitcode.Internal || !strings.Contains(err.Error(), "an agent writes its own node's entry only") {
		t.Fatalf("a change of another node's entry: %v", err)
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("%d writes", n)
	}
	if got := currentStatus(t, client); got.Nodes[1].Phase != rollout.NodePending {
		t.Errorf("cp-1: %+v", got.Nodes[1])
	}
}

// The agent publishes when its client certificate expires, in its
// node's state, whatever else it finds (here, no manifests at all).
func TestAgentPublishesItsCertificateExpiry(t *testing.T) {
	a, _, _ := testAgent(t, nil, rollouttest.DocV1)
	a.cfg.CertificateExpires = time.Date(2027, 12, 2, 1, 0, 16, 0, time.UTC)
	if st := a.state.find(context.Background(), a.env()); st.CertificateExpires != "2027-12-02T01:00:16Z" || st.Error == "" {
		t.Errorf("state: %+v", st)
	}
	a.cfg.CertificateExpires = time.Time{} // a token
	if st := a.state.find(context.Background(), a.env()); st.CertificateExpires != "" {
		t.Errorf("state of an agent with a token: %+v", st)
	}
}
