package agent_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/agent"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// A program that runs a node's agent in process, as the agent verb does:
// until SIGTERM, then it finishes or rolls back the node's turn in
// progress, records the outcome and deletes its Lease. It needs a kubeadm
// control-plane node, so the example is compiled, not run.
func Example() {
	var client kubernetes.Interface // built with clock.WrapTransport and engine.WrapNoWriteRetries
	clock := &engine.ServerClock{}
	store := &backup.Store{Dir: backup.DefaultDir()}
	a, err := agent.New(agent.Config{
		Node: reconfigure.Node{
			Config: engine.New(client, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey},
				engine.Options{Backup: &backup.Hook{Store: store, Keep: 50, Reason: backup.ReasonBeforeRestore}}),
			Store: store, Keep: 50, NodeConfig: clusterconfig.NodeConfig{Name: "cp-0"},
			ManifestsDir: "/etc/kubernetes/manifests", Kubeadm: "kubeadm",
		},
		Record: engine.New(client, engine.Target{Namespace: "kube-system", Name: rollout.DefaultConfigMap}, engine.Options{}),
		Clock:  clock, Wait: 2 * time.Minute,
		Log: func(e agent.Event) { fmt.Fprintln(os.Stderr, e.Reason+": "+e.Message) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := a.Run(ctx); err != nil {
		fmt.Println("agent:", err) // exit code 4: another agent of cp-0 is alive
	}
}
