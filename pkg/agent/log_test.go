package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// Every event of a node's turn says which rollout it was in, as the record
// numbers them: its start, its outcome, and all it logs in between.
// The turn is in the record's second rollout, so that an id taken from
// anywhere but the record shows. What the agent logs once the work is done
// concerns no rollout.
func TestAgentLogsTheRolloutOfATurn(t *testing.T) {
	r := rollouttest.Started(t, rollouttest.Spec())
	for i, n := range rollouttest.Nodes {
		rollouttest.Turn(t, r, 10*i+1, n, rollout.NodeUpdated)
	}
	if err := r.Start(rollouttest.By("alice", 40), rollouttest.Spec(func(s *rollout.Spec) {
		s.Target, s.TargetResourceVersion, s.Previous, s.PreviousResourceVersion = rollouttest.DocV3, "900", rollouttest.DocV2, "812"
	})); err != nil {
		t.Fatal(err)
	}
	if r.Status.ID != 2 {
		t.Fatalf("want the record's second rollout, got id %d", r.Status.ID)
	}
	a, client, logged := testAgent(t, r, rollouttest.DocV3)
	hold(t, a)
	a.view.Rollout, a.view.Config = currentRecord(t, client), currentConfig(t, client)
	before := len(logged.all())
	// cp-0's turn; in an empty manifests directory it fails unchanged.
	a.rollouts.do(context.Background(), a.env())
	a.info("AfterTheWork", "logged once the rollouts work is done")

	events := logged.all()[before:]
	reasons := map[string]bool{}
	for _, e := range events[:len(events)-1] {
		reasons[e.Reason] = true
		if e.Rollout != 2 || e.Upgrade != "" || e.Step != "" || e.Phase != "" {
			t.Errorf("%s: %s: concerns rollout %d, upgrade %q, step %q, phase %q; want rollout 2 only",
				e.Reason, e.Message, e.Rollout, e.Upgrade, e.Step, e.Phase)
		}
	}
	for _, want := range []string{"NodeStarted", "NodeRolledBack"} {
		if !reasons[want] {
			t.Errorf("no %s logged: %+v", want, events)
		}
	}
	if last := events[len(events)-1]; last.Rollout != 0 {
		t.Errorf("an event logged after the work concerns rollout %d", last.Rollout)
	}
}

// An upgrade step's events say the upgrade (its target version), the
// step, and the phase the node is in: the step's start and kubeadm's
// preflight say preflight; the next phase's start, what kubeadm does in
// it (here it fails) and the step's outcome say control-plane.
func TestAgentLogsTheUpgradeStepAndPhase(t *testing.T) {
	a, client, logged := testAgent(t, nil, rollouttest.DocV1)
	kubeadm := filepath.Join(t.TempDir(), "kubeadm")
	script := "#!/bin/sh\ncase \"$*\" in *preflight*) exit 0;; esac\necho 'no control plane here' >&2\nexit 1\n"
	if err := os.WriteFile(kubeadm, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	a.cfg.Upgrades.Kubeadms.Default, a.cfg.Wait = kubeadm, time.Second
	a.cfg.Upgrade = engine.New(client, engine.Target{Namespace: "kube-system", Name: "kubeadmcfg-upgrade"}, engine.Options{})
	p, err := upgrade.Builtin("kubeadm")
	if err == nil {
		p, err = p.Instantiate([]string{"cp-0"})
	}
	if err == nil {
		err = p.AssignNodes([]string{"cp-0"})
	}
	if err != nil {
		t.Fatal(err)
	}
	c := upgrade.Clock{Now: rollouttest.TS(0), By: "upgrade-apply"}
	rec, err := upgrade.Start(nil, p, c, "v1.37.2", "v1.38.0", "upgrade-apply")
	if err != nil {
		t.Fatal(err)
	}
	rec.Agents = upgrade.NewAgents(c, "v1.38.0", p)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadmcfg-upgrade", Annotations: map[string]string{}}}
	if err := rec.Encode(cm.Annotations); err != nil {
		t.Fatal(err)
	}
	if a.view.Upgrade, err = client.CoreV1().ConfigMaps("kube-system").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hold(t, a)
	before := len(logged.all())
	a.upgrades.do(context.Background(), a.env())
	a.info("AfterTheWork", "logged once the upgrades work is done")

	var got []string
	for _, e := range logged.all()[before:] {
		got = append(got, fmt.Sprintf("%s rollout=%d upgrade=%s step=%s phase=%s", e.Reason, e.Rollout, e.Upgrade, e.Step, e.Phase))
	}
	const step = " rollout=0 upgrade=v1.38.0 step=upgrading-control-plane-cp-0"
	want := []string{
		"UpgradeStepStarted" + step + " phase=preflight",
		"UpgradeStep" + step + " phase=preflight",
		"Kubeadm" + step + " phase=preflight",
		"UpgradePhase" + step + " phase=control-plane",
		// kubeadm left no backup to put the node back from.
		"UpgradeStepRollbackFailed" + step + " phase=control-plane",
		"AfterTheWork rollout=0 upgrade= step= phase=",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
