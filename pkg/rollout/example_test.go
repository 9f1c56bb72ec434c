package rollout_test

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// An agent's loop, done in memory: each change runs through Apply, as it
// would inside engine.Update's compare-and-swap write of the
// kubeadmcfg-rollout ConfigMap, and each agent starts its node only on its
// turn. The canary pauses the rollout after the first node until someone
// resumes it.
func ExampleStatus_Turn() {
	cm := &corev1.ConfigMap{}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func(by string) rollout.Clock { now = now.Add(time.Second); return rollout.Clock{Now: now, By: by} }
	apply := func(change func(r *rollout.Record) (bool, error)) *rollout.Record {
		r, _, err := rollout.Apply(cm, change)
		if err != nil {
			fmt.Println(err)
		}
		return r
	}

	apply(func(r *rollout.Record) (bool, error) {
		return true, r.Start(clock("alice"), rollout.Spec{
			Target: []byte("kind: ClusterConfiguration\nclusterName: new\n"), Previous: []byte("kind: ClusterConfiguration\n"),
			Nodes: []string{"cp-0", "cp-1", "cp-2"}, Canary: 1,
		})
	})
	for {
		r := apply(func(*rollout.Record) (bool, error) { return false, nil }) // read
		node, ok := r.Status.Turn()
		if !ok {
			fmt.Printf("nobody's turn: rollout %d is %s\n", r.Status.ID, r.Status.Phase)
			if r.Status.Phase != rollout.Paused {
				break
			}
			apply(func(r *rollout.Record) (bool, error) { return r.Resume(clock("alice")) })
			fmt.Println("resumed")
			continue
		}
		fmt.Println("turn of", node)
		id := r.Status.ID
		apply(func(r *rollout.Record) (bool, error) {
			return true, r.BeginNode(clock(node), id, node, []string{"kube-apiserver"}, "kubeadm-config-0001")
		})
		// ... the agent reconfigures its node here ...
		apply(func(r *rollout.Record) (bool, error) {
			return true, r.FinishNode(clock(node), id, node, rollout.Outcome{Phase: rollout.NodeUpdated, Components: []string{"kube-apiserver"}})
		})
	}
	// Output:
	// turn of cp-0
	// nobody's turn: rollout 1 is Paused
	// resumed
	// turn of cp-1
	// turn of cp-2
	// nobody's turn: rollout 1 is Succeeded
}
