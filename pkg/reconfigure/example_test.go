package reconfigure_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// A program that carries a ClusterConfiguration it pinned earlier to the
// node it runs on, as the reconfigure verb does with the live one. It needs
// a kubeadm control-plane node, so the example is compiled, not run.
func Example() {
	var client kubernetes.Interface // from the program's kubeconfig
	var pinned *corev1.ConfigMap    // the kubeadm-config copy it pinned

	config := engine.New(client, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey}, engine.Options{})
	node := reconfigure.Node{
		Config: config, Store: &backup.Store{Dir: backup.DefaultDir()}, Keep: 50,
		NodeConfig:   clusterconfig.NodeConfig{Name: "cp-0"},
		ManifestsDir: "/etc/kubernetes/manifests", Kubeadm: "kubeadm",
	}
	rep, err := reconfigure.Run(context.Background(), node, reconfigure.Request{
		Source: reconfigure.Source{Pinned: pinned}, Wait: 5 * time.Minute,
		Progress: func(e reconfigure.Event) {
			if e.Kind != reconfigure.EventComponent {
				fmt.Println(e.Message)
			}
		},
	})
	if err != nil {
		fmt.Println("failed:", err) // exit code 8: rolled back; 9: the rollback failed too
		return
	}
	for _, w := range rep.Warnings {
		fmt.Println("warning:", w)
	}
	fmt.Printf("node %s runs %s; last known good %q\n", rep.Node, rep.Source, rep.LastKnownGood)
}
