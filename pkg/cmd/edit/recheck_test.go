package edit

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// TestEditRolloutChecksTheAgentsAgainAfterTheEditor (R3): edit --rollout
// checks the nodes before the editor opens; cp-0's agent goes away while it
// is open (its Lease deleted, as an agent stopped cleanly leaves it).
// Nothing is written, no rollout starts, and the text is kept.
func TestEditRolloutChecksTheAgentsAgainAfterTheEditor(t *testing.T) {
	doc, err := os.ReadFile("../../../testdata/documents/v1beta4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	now := time.Now()
	objects := []runtime.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system", ResourceVersion: "7"},
			Data: map[string]string{"ClusterConfiguration": string(doc)}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-0", Labels: map[string]string{engine.ControlPlaneLabel: ""}}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: nodestate.LeaseName("cp-0"), Labels: map[string]string{nodestate.Label: "cp-0"}},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now}}},
	}
	for _, c := range controlplane.Components() {
		objects = append(objects, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: c.PodName() + "-cp-0"},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	}
	cs := fake.NewClientset(objects...)
	writes := 0
	cs.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		writes++
		return false, nil, nil
	})
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	o := NewOptions(cmdutil.NewClusterFlags(), streams)
	o.Rollout.Rollout = true
	o.Editor = cmdutil.Editor{Args: []string{"sed", "-i", "s/^clusterName: kubernetes$/clusterName: changed/"}}
	o.engine = engine.New(cs, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey},
		engine.Options{Timeout: 5 * time.Second})
	o.operator = &operator.Rollouts{
		Record: engine.New(cs, engine.Target{Namespace: "kube-system", Name: rollout.DefaultConfigMap}, engine.Options{CreateIfMissing: true}),
		Config: o.engine, Now: time.Now, By: "alice",
	}
	// The agent's Lease is there for the first check, gone after it.
	lists := 0
	cs.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		if lists > 1 {
			return true, &coordinationv1.LeaseList{}, nil
		}
		return false, nil, nil
	})
	err = o.Run(context.Background())
	if exitcode.FromError(err) != exitcode.Conflict ||
		!strings.Contains(err.Error(), "nothing was written, the rollout could not start: preflight failed, nothing was started: node cp-0: no agent") ||
		!strings.Contains(err.Error(), "your text is kept in ") {
		t.Fatalf("err %v", err)
	}
	if writes != 0 || lists != 2 {
		t.Fatalf("%d writes of kubeadm-config, %d reads of the agents; want none and 2", writes, lists)
	}
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), rollout.DefaultConfigMap, metav1.GetOptions{}); err == nil {
		t.Fatal("a rollout record was written")
	}
}
