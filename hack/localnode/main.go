// Command localnode runs one kubeadm control-plane node for the demo: etcd,
// and kubeadm's own kube-apiserver, kube-controller-manager and
// kube-scheduler manifests run by the harness's static Pod runner, behind a
// load balancer on the controlPlaneEndpoint. kubeadm needs a real node
// address, so it runs only inside a network namespace of its own, which
// hack/demo-reconfigure.sh creates:
//
//	localnode --dir DIR   # prints the kubeconfig's path once the node is up,
//	                      # runs until SIGTERM or SIGINT
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

func main() {
	dir := flag.String("dir", "_output/demo-node", "directory for the node's files, logs and kubeconfig")
	name := flag.String("name", "demo-node", "the node's name")
	address := flag.String("address", "192.0.2.11", "the node's advertise address (on the namespace's loopback device)")
	endpoint := flag.String("endpoint", "192.0.2.10:8443", "the controlPlaneEndpoint, where the load balancer listens")
	flag.Parse()
	if err := run(*dir, *name, *address, *endpoint); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(dir, name, address, endpoint string) error {
	if !testcluster.InTestNetns() {
		return fmt.Errorf("run me inside a network namespace of my own (hack/demo-reconfigure.sh), with %s=1", testcluster.NetnsEnv)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(abs); err != nil {
		return err
	}
	bins, err := testcluster.FindBinaries()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logf := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		if !strings.Contains(line, "create mirror Pod") { // while the API server bootstraps
			fmt.Fprintln(os.Stderr, "  [node] "+line)
		}
	}
	nodes, err := testcluster.StartNodes(ctx, bins, testcluster.NodesOptions{
		Dir: abs, Endpoint: endpoint, Log: logf, Grace: 5 * time.Second,
		Nodes: []testcluster.NodeSpec{{Name: name, Address: address, BindPort: 6443}},
	})
	if err != nil {
		return err
	}
	defer nodes.Stop()
	fmt.Println(nodes.Kubeconfig)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	return nil
}
