package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/kubeadmupgrade"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// refusingAPI has the fake refuse (403, which the engine does not retry)
// the next writes of the upgrade record, as many as set says, and counts
// the writes it lets through.
type refusingAPI struct {
	mu              sync.Mutex
	refuse, refused int
	written         int
}

func (r *refusingAPI) set(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refuse = n
}

func (r *refusingAPI) counts() (refused, written int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused, r.written
}

func (r *refusingAPI) install(client *fake.Clientset) {
	client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		cm := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap)
		if cm.Name != upgradestate.DefaultConfigMap {
			return false, nil, nil
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.refuse > 0 {
			r.refuse--
			r.refused++
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, cm.Name, errors.New("a policy edited mid-upgrade"))
		}
		r.written++
		return false, nil, nil
	})
}

// upgradeAgent is testAgent's agent of cp-0, holding its Lease, with an
// upgrade to v1.37.2 the agents carry out over cp-0 and cp-1 in which cp-0's
// agent runs its control-plane step (rn), in its last phase, and an API
// that refuses the writes of the record it is told to.
func upgradeAgent(t *testing.T) (a *Agent, client *fake.Clientset, rn upgradestate.Runner, api *refusingAPI, logged *logBook) {
	t.Helper()
	a, client, logged = testAgent(t, nil, rollouttest.DocV1)
	a.cfg.Upgrade = engine.New(client, engine.Target{Namespace: "kube-system", Name: upgradestate.DefaultConfigMap}, engine.Options{})
	hold(t, a)
	p, err := upgradestate.Builtin("kubeadm")
	if err != nil {
		t.Fatal(err)
	}
	nodes := []string{"cp-0", "cp-1"}
	if p, err = p.Instantiate(nodes); err != nil {
		t.Fatal(err)
	}
	if err := p.AssignNodes(nodes); err != nil {
		t.Fatal(err)
	}
	c := upgradestate.Clock{Now: rollouttest.TS(10), By: "alice"}
	rec, err := upgradestate.Start(nil, p, c, "v1.36.3", "v1.37.2", "upgrade-apply")
	if err != nil {
		t.Fatal(err)
	}
	rec.Agents = upgradestate.NewAgents(c, "v1.37.2", p)
	turn := rec.TurnOf("cp-0", "")
	c.By = a.cfg.Identity
	rn, err = rec.BeginRun(c, upgradestate.Run{ID: a.cfg.Identity, Step: string(turn.Step), Command: "kubeadm upgrade", Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec.Agents.BeginPhase(c, "cp-0", rn.State, "post-upgrade")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: upgradestate.DefaultConfigMap, Annotations: map[string]string{}}}
	if err := rec.Encode(cm.Annotations); err != nil {
		t.Fatal(err)
	}
	if a.view.Upgrade, err = client.CoreV1().ConfigMaps("kube-system").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	api = &refusingAPI{}
	api.install(client)
	a.upgrades.pause = time.Millisecond
	return a, client, rn, api, logged
}

// storedUpgrade is the upgrade record the fake holds.
func storedUpgrade(t *testing.T, client *fake.Clientset) *upgradestate.Record {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), upgradestate.DefaultConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := upgradestate.FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// reached counts the transitions of the history into state: one outcome
// recorded twice would show as two.
func reached(rec *upgradestate.Record, state string) int {
	n := 0
	for _, tr := range rec.History {
		if tr.To == state {
			n++
		}
	}
	return n
}

var doneRequest = kubeadmupgrade.Request{Kind: kubeadmupgrade.Apply, Version: "v1.37.2", From: "v1.36.3"}

// A step's outcome the API refuses a few times is tried again until it
// lands, once; and once landed, writing it again changes nothing (a try
// whose answer was lost).
func TestStepOutcomeIsTriedAgain(t *testing.T) {
	a, client, rn, api, _ := upgradeAgent(t)
	api.set(3)
	a.upgrades.end(context.Background(), nil, a.env(), rn, doneRequest, nil)
	rec := storedUpgrade(t, client)
	if refused, written := api.counts(); refused != 3 || written != 1 {
		t.Errorf("refused %d writes and let %d through, want 3 and 1", refused, written)
	}
	if rec.State != "upgraded-control-plane-cp-0" || reached(rec, "upgraded-control-plane-cp-0") != 1 || len(rec.Runners) != 0 ||
		rec.Agents.Progress("cp-0").Outcome != upgradestate.NodeDone || a.upgrades.unrecorded != nil {
		t.Fatalf("state %s (reached %d times), runners %v, cp-0 %+v, unrecorded %+v",
			rec.State, reached(rec, "upgraded-control-plane-cp-0"), rec.Runners, rec.Agents.Progress("cp-0"), a.upgrades.unrecorded)
	}
	o := &stepEnd{runner: rn, ok: true}
	o.outcome, o.reason = stepOutcome("cp-0", rn.State, doneRequest, nil)
	if cm, refused, err := a.upgrades.writeOutcome(context.Background(), a.env(), o); cm != nil || refused || err != nil {
		t.Errorf("the same outcome again: wrote %v, refused %v, %v", cm != nil, refused, err)
	}
	if _, written := api.counts(); written != 1 {
		t.Errorf("%d writes, want 1", written)
	}
}

// An outcome the API refuses for longer than the agent tries is kept, and
// recorded on a later pass, when the step, still held by this agent's run,
// is handed back to it: the step is not run again, and the upgrade goes on.
func TestStepOutcomeIsRecordedOnALaterPass(t *testing.T) {
	a, client, rn, api, _ := upgradeAgent(t)
	a.upgrades.within = 20 * time.Millisecond
	api.set(1 << 20)
	a.upgrades.end(context.Background(), nil, a.env(), rn, doneRequest, nil)
	if a.upgrades.unrecorded == nil || storedUpgrade(t, client).State != "upgrading-control-plane-cp-0" {
		t.Fatalf("the outcome was not kept for later: %+v", a.upgrades.unrecorded)
	}
	if again := a.upgrades.do(context.Background(), a.env()); again <= 0 {
		t.Errorf("a pass while the API refuses looks again in %s, want a backoff", again)
	}
	api.set(0)
	a.upgrades.do(context.Background(), a.env())
	rec := storedUpgrade(t, client)
	if rec.State != "upgraded-control-plane-cp-0" || reached(rec, "upgraded-control-plane-cp-0") != 1 || len(rec.Runners) != 0 ||
		rec.Agents.Progress("cp-0").Outcome != upgradestate.NodeDone || a.upgrades.unrecorded != nil {
		t.Fatalf("state %s, runners %v, cp-0 %+v, unrecorded %+v", rec.State, rec.Runners, rec.Agents.Progress("cp-0"), a.upgrades.unrecorded)
	}
	if n := reached(rec, "upgrading-control-plane-cp-0"); n != 1 {
		t.Errorf("the step began %d times, want once", n)
	}
	// The next pass goes on with the upgrade: cp-1's turn, not cp-0's.
	if turn := rec.TurnOf("cp-0", ""); turn.Kind != upgradestate.TurnNone {
		t.Errorf("cp-0 still has a turn: %+v", turn)
	}
}

// An agent told to stop makes one try of its outcome and no more: the
// stop keeps its bound, and the node's next agent takes the step over.
func TestStepOutcomeOfAStoppingAgent(t *testing.T) {
	a, client, rn, api, _ := upgradeAgent(t)
	api.set(1 << 20)
	stopped := make(chan struct{})
	close(stopped)
	a.upgrades.end(context.Background(), stopped, a.env(), rn, doneRequest, nil)
	if refused, _ := api.counts(); refused != 1 || a.upgrades.unrecorded != nil || storedUpgrade(t, client).State != "upgrading-control-plane-cp-0" {
		t.Errorf("refused %d writes (want 1), unrecorded %+v", refused, a.upgrades.unrecorded)
	}
}

// The outcome kept for later is dropped once someone moved the step (here
// upgrade-fail): that decision stands, and the agent says so.
func TestStepOutcomeDroppedWhenTheStepWasMoved(t *testing.T) {
	a, client, rn, api, logged := upgradeAgent(t)
	a.upgrades.within = 20 * time.Millisecond
	api.set(1 << 20)
	a.upgrades.end(context.Background(), nil, a.env(), rn, doneRequest, nil)
	api.set(0)
	if _, err := a.cfg.Upgrade.Update(context.Background(), func(cm *corev1.ConfigMap) (bool, error) {
		c, err := upgradestate.Apply(cm, upgradestate.Existing(func(rec *upgradestate.Record) (bool, error) {
			return rec.Fail(upgradestate.Clock{Now: rollouttest.TS(20), By: "bob"}, "forced to failed by bob")
		}))
		return c.Changed, err
	}); err != nil {
		t.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), upgradestate.DefaultConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.view.Upgrade = cm
	a.upgrades.do(context.Background(), a.env())
	if rec := storedUpgrade(t, client); rec.State != "upgrading-control-plane-cp-0-failed" || a.upgrades.unrecorded != nil {
		t.Errorf("state %s, unrecorded %+v", rec.State, a.upgrades.unrecorded)
	}
	said := false
	for _, e := range logged.all() {
		said = said || e.Reason == "UpgradeNotRecorded" && strings.Contains(e.Message, "someone moved the step before this agent could record it")
	}
	if !said {
		t.Errorf("the agent did not say it dropped the outcome: %+v", logged.all())
	}
}
