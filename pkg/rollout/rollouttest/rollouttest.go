// Package rollouttest builds rollout records for tests of code that acts on
// them (pkg/operator and pkg/agent use it, as net/http/httptest serves the
// tests of HTTP code): documents, a time base, a rollout started and nodes
// taken through their turns, as the transitions of pkg/rollout make them.
package rollouttest

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// Base is the time the tests' clocks start at.
var Base = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// By is who acts sec seconds after Base.
func By(who string, sec int) rollout.Clock {
	return rollout.Clock{Now: TS(sec), By: who}
}

// TS is the time stamped sec seconds after Base.
func TS(sec int) time.Time { return Base.Add(time.Duration(sec) * time.Second) }

// Three ClusterConfigurations a cluster runs one after the other.
var (
	DocV1 = []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n")
	DocV2 = []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\napiServer:\n  extraArgs:\n  - {name: audit-log-maxage, value: \"7\"}\n")
	DocV3 = []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\nclusterName: other\n")
)

// Nodes are the control-plane nodes, in their default order.
var Nodes = []string{"cp-0", "cp-1", "cp-2"}

// Spec is a rollout of DocV2 over Nodes, from DocV1, as patch --rollout
// starts one; mods change it.
func Spec(mods ...func(*rollout.Spec)) rollout.Spec {
	s := rollout.Spec{Target: DocV2, TargetResourceVersion: "812", Source: rollout.SourcePatch, Previous: DocV1,
		PreviousResourceVersion: "790", Nodes: Nodes}
	for _, m := range mods {
		m(&s)
	}
	return s
}

// Started is a record with spec's rollout started by alice at Base.
func Started(t *testing.T, spec rollout.Spec) *rollout.Record {
	t.Helper()
	r := &rollout.Record{}
	if err := r.Start(By("alice", 0), spec); err != nil {
		t.Fatal(err)
	}
	return r
}

// Turn runs node's turn to outcome, at sec, as its agent would.
func Turn(t *testing.T, r *rollout.Record, sec int, node string, outcome rollout.NodePhase) {
	t.Helper()
	agent := "agent-" + node
	if err := r.BeginNode(By(agent, sec), r.Status.ID, node, []string{"kube-apiserver"}, "b-"+node); err != nil {
		t.Fatal(err)
	}
	o := rollout.Outcome{Phase: outcome, Components: []string{"kube-apiserver"}, Message: "m"}
	if err := r.FinishNode(By(agent, sec+1), r.Status.ID, node, o); err != nil {
		t.Fatal(err)
	}
}

// ConfigMap stores r in a new record ConfigMap in kube-system.
func ConfigMap(t *testing.T, r *rollout.Record) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: rollout.DefaultConfigMap}}
	if err := r.ToConfigMap(cm); err != nil {
		t.Fatal(err)
	}
	return cm
}
