package e2e

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// What an operator does when a rollout cannot simply go on, with the real
// agents, through the built plugin and the real kubectl: a take-back that
// would drop a change no rollout carried (R1 of the 2026-12-02 review), a
// start right after another while a component restarts (R15), and a node
// that never comes back (R3). The last step takes a node out of the
// cluster: it goes last.

func TestRolloutRecoveryOnAgents(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	c := startAgentCluster(t)
	runSteps(t, c, []step[*agentCluster]{
		{"plain patches after a rollout: --try refused naming them, start warns, undo refused naming them, undo --force goes back", recoveryUntracked},
		{"a plain patch over the last rollout's target: --try accepted, its expiry reverts to exactly that target", recoveryTryOfAPlainPatch},
		{"a start right after another ends, while a component restarts, waits for it and succeeds", recoveryStartWaitsForReady},
		{"an agent killed in its node's turn: abandon refused while it lives, needs --force, works once it is lost; undo and start work again", recoveryAbandon},
	})
}

// recoveryA is the document rollout 1 carries, for the later steps.
var recoveryA string

func recoveryUntracked(t *testing.T, c *agentCluster) {
	c.wantNodes(t, nodestate.SyncYes, "") // every agent up
	r := c.logged(t, 8*time.Minute, "patch", "--no-backup", "--set", "apiServer.extraArgs.audit-log-maxage=31", "--rollout", "--wait")
	wantEnded(t, r, 0)
	one := c.current(t).Status
	recoveryA = c.liveDocument(t)
	// B, carried to the nodes by nothing but a later rollout, then C.
	c.patch(t, "--set", "apiServer.extraArgs.audit-log-maxage=7")
	c.patch(t, "--set", "apiServer.extraArgs.audit-log-maxbackup=3")
	rvC := c.liveResourceVersion(t)
	drops := "kubeadm-config was written outside rollouts since " + rollout.Short(one.Target.Hash) + " (resourceVersion " + one.Target.ResourceVersion +
		" -> " + rvC + "); going back to it changes apiServer.extraArgs.audit-log-maxage, apiServer.extraArgs.audit-log-maxbackup"

	r = c.logged(t, time.Minute, "rollout", "start", "--try", "20s")
	wantEnded(t, r, 4)
	wantStderr(t, r, "a rollout on trial needs the document it would revert to, and it is not known exactly: "+drops+"; nothing was started",
		"then try the next change with 'kubectl kubeadmcfg patch --rollout --try'")
	if got := c.current(t).Status.ID; got != one.ID {
		t.Fatalf("a refused try started rollout %d", got)
	}

	r = c.logged(t, 8*time.Minute, "rollout", "start", "--wait")
	wantEnded(t, r, 0)
	wantStderr(t, r, "warning: rollout 2's previous document is not known exactly: "+drops)
	two := c.current(t).Status
	if two.Untracked == nil || two.Previous.Hash != one.Target.Hash {
		t.Fatalf("rollout 2: previous %+v, untracked %+v", two.Previous, two.Untracked)
	}
	c.wantAPIServerFlag(t, "--audit-log-maxbackup=3")

	r = c.logged(t, time.Minute, "rollout", "undo")
	wantEnded(t, r, 4)
	wantStderr(t, r, "undoing rollout 2 would drop more than its own change: "+drops+"; nothing was undone", "use --force to go back anyway")
	if c.liveResourceVersion(t) != rvC || c.current(t).Status.ID != two.ID {
		t.Fatal("a refused undo wrote kubeadm-config or the record")
	}

	r = c.logged(t, 8*time.Minute, "rollout", "undo", "--force", "--wait", "--no-backup")
	wantEnded(t, r, 0)
	if got := c.liveDocument(t); got != recoveryA {
		t.Fatalf("after undo --force kubeadm-config holds:\n%s\nwant rollout 1's target:\n%s", got, recoveryA)
	}
	c.wantAPIServerFlag(t, "--audit-log-maxage=31")
	for _, l := range c.apiServers(t) {
		if strings.Contains(l, "--audit-log-maxbackup=3") {
			t.Errorf("a kube-apiserver still runs C after the undo: %s", l)
		}
	}
	c.wantOneAtATime(t)
}

func recoveryTryOfAPlainPatch(t *testing.T, c *agentCluster) {
	c.patch(t, "--set", "apiServer.extraArgs.audit-log-maxsize=77") // over A, which the undo put back
	r := c.logged(t, 8*time.Minute, "rollout", "start", "--try", "20s", "--wait")
	wantEnded(t, r, 0)
	if strings.Contains(r.stderr, "warning:") {
		t.Errorf("a try whose previous is known warned: %s", r)
	}
	tried := c.current(t).Status
	if tried.Phase != rollout.AwaitingConfirm || tried.Previous.Hash != rollout.Hash([]byte(recoveryA)) || tried.Untracked != nil {
		t.Fatalf("the try: %s, previous %+v, untracked %+v", tried.Phase, tried.Previous, tried.Untracked)
	}
	rec := c.waitRecord(t, 6*time.Minute, "reverted", func(r *rollout.Record) bool {
		return r.Status.ID > tried.ID && r.Status.Kind == rollout.KindRevert && !r.Status.Phase.Active()
	})
	if rec.Status.Phase != rollout.Succeeded {
		t.Fatalf("the revert ended %s: %s", rec.Status.Phase, rec.Status.Message)
	}
	if got := c.liveDocument(t); got != recoveryA {
		t.Fatalf("after the revert kubeadm-config holds:\n%s\nwant exactly what the try replaced:\n%s", got, recoveryA)
	}
	wantEveryNode(t, rec.Status, rollout.NodeUpdated)
	for _, l := range c.apiServers(t) {
		if strings.Contains(l, "--audit-log-maxsize=77") {
			t.Errorf("a kube-apiserver still runs the tried flag: %s", l)
		}
	}
}

func recoveryStartWaitsForReady(t *testing.T, c *agentCluster) {
	// The revert just ended; cp-2's scheduler is restarting.
	runner := c.node(t, "cp-2").Runner
	runner.Hold("kube-scheduler")
	released := false
	release := func() {
		if !released {
			runner.Release("kube-scheduler")
			released = true
		}
	}
	t.Cleanup(release)
	c.waitPodReady(t, "kube-scheduler-cp-2", false)
	last := c.current(t).Status.ID
	var r result
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r = c.logged(t, 8*time.Minute, "patch", "--no-backup", "--set", "apiServer.extraArgs.audit-log-maxsize=50", "--rollout", "--wait")
	}()
	time.Sleep(5 * time.Second) // the plugin's preflight finds cp-2 not Ready, and waits
	if got := c.current(t).Status; got.ID != last {
		release()
		wg.Wait()
		t.Fatalf("rollout %d started while cp-2's scheduler was down: %s", got.ID, r)
	}
	release()
	wg.Wait()
	wantEnded(t, r, 0)
	wantStderr(t, r, "preflight: waiting up to 2m0s for node cp-2: kube-scheduler is not Ready")
	wantEveryNode(t, c.current(t).Status, rollout.NodeUpdated)
	c.wantAPIServerFlag(t, "--audit-log-maxsize=50")
}

func recoveryAbandon(t *testing.T, c *agentCluster) {
	before := c.current(t)
	wantExit(t, c.logged(t, time.Minute, "patch", "--no-backup", "--set", "apiServer.extraArgs.audit-log-maxage=9", "--rollout"), 0)
	c.waitRecord(t, 2*time.Minute, "cp-0 in progress", func(r *rollout.Record) bool {
		n, _ := r.Status.Lookup("cp-0")
		return r.Status.ID > before.Status.ID && n.Phase == rollout.NodeInProgress
	})
	// cp-0's kube-apiserver does not come back: its agent waits for it.
	runner := c.node(t, "cp-0").Runner
	runner.Hold("kube-apiserver")
	t.Cleanup(func() { runner.Release("kube-apiserver") })

	r := c.logged(t, time.Minute, "rollout", "abandon", "cp-0", "--force", "--identity", "alice")
	wantEnded(t, r, 4)
	wantStderr(t, r, "the agent of node cp-0 is alive: its Lease kube-system/kubeadmcfg-agent-cp-0 was renewed while watched")
	r = c.logged(t, time.Minute, "rollout", "abandon", "cp-0")
	wantExit(t, r, 2)
	wantStderr(t, r, "it needs --force")

	c.kill(t, "cp-0", syscall.SIGKILL) // and it never comes back
	r = c.logged(t, time.Minute, "rollout", "undo")
	wantExit(t, r, 4)
	wantStderr(t, r, "node cp-0 is in progress in rollout")

	r = c.logged(t, time.Minute, "rollout", "abandon", "cp-0", "--force", "--identity", "alice")
	wantEnded(t, r, 0)
	wantStderr(t, r, "abandon: watching lease kube-system/kubeadmcfg-agent-cp-0 for up to 6s: its agent must be gone")
	if !strings.Contains(r.stdout, "node cp-0 abandoned (its agent's Lease kube-system/kubeadmcfg-agent-cp-0 did not change in the") ||
		!strings.Contains(r.stdout, "the rollout is Failed") {
		t.Fatalf("abandon said %s", r)
	}
	s := c.current(t).Status
	if n, _ := s.Lookup("cp-0"); s.Phase != rollout.Failed || n.Phase != rollout.NodeRollbackFailed || n.Message != "abandoned by alice: state unknown" {
		t.Fatalf("after abandon: %s, cp-0 %+v", s.Phase, n)
	}
	c.wantEvent(t, corev1.EventTypeWarning, "NodeAbandoned", "node cp-0 abandoned by alice")
	r = c.logged(t, time.Minute, "rollout", "history")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "Failed     node cp-0 was abandoned by alice: its state is unknown") {
		t.Errorf("history: %s", r.stdout)
	}

	runner.Release("kube-apiserver") // the node's processes go on; the record no longer waits for them
	r = c.logged(t, 5*time.Minute, "rollout", "undo", "--wait", "--no-backup")
	wantEnded(t, r, 0)
	if !strings.Contains(r.stdout, "left out: cp-0 (abandoned") {
		t.Errorf("the undo does not say it leaves cp-0 out: %s", r)
	}
	if got := c.current(t).Status; got.Kind != rollout.KindUndo || got.Phase != rollout.Succeeded || strings.Join(got.LeftOut, ",") != "cp-0" {
		t.Fatalf("the undo: %+v", got)
	}
	// The node is gone: out of the cluster, as docs/rollout.md says.
	wantExit(t, runLong(t, time.Minute, "kubectl", "delete", "node", "cp-0", "--kubeconfig", c.Kubeconfig), 0)
	r = c.logged(t, 5*time.Minute, "rollout", "start", "--wait")
	wantEnded(t, r, 0)
	if s := c.current(t).Status; strings.Join(s.Order, ",") != "cp-1,cp-2" || s.Phase != rollout.Succeeded {
		t.Fatalf("the start after: %+v", s)
	}
}

// liveResourceVersion is kubeadm-config's resourceVersion.
func (c *agentCluster) liveResourceVersion(t *testing.T) string {
	t.Helper()
	cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.ResourceVersion
}

// waitPodReady waits until the mirror Pod name is Ready (or not).
func (c *agentCluster) waitPodReady(t *testing.T, name string, ready bool) {
	t.Helper()
	want := corev1.ConditionFalse
	if ready {
		want = corev1.ConditionTrue
	}
	c.waitEvents(t, "pod "+name+" Ready "+string(want), func() bool {
		pod, err := c.client.CoreV1().Pods("kube-system").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady {
				return cond.Status == want
			}
		}
		return false
	})
}

// waitEvents polls done for up to a minute.
func (c *agentCluster) waitEvents(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after a minute", what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// wantEvent checks that the record has an Event of type and reason whose
// message holds sub.
func (c *agentCluster) wantEvent(t *testing.T, eventType, reason, sub string) {
	t.Helper()
	list, err := c.client.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + rollout.DefaultConfigMap + ",reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range list.Items {
		if ev.Type == eventType && strings.Contains(ev.Message, sub) {
			return
		}
	}
	t.Errorf("no %s Event %s saying %q: %+v", eventType, reason, sub, list.Items)
}

// logged is plugin, with the command and what it printed in the test's log
// (docs/rollout.md quotes it).
func (c *agentCluster) logged(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	r := c.plugin(t, timeout, args...)
	t.Logf("$ kubectl kubeadmcfg %s\n%s%s(exit %d)", strings.Join(args, " "), r.stdout, r.stderr, r.code)
	return r
}
