package testcluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"
)

// The local control plane: one to three kubeadm control-plane nodes in one
// network namespace, behind a load balancer on the controlPlaneEndpoint. It is
// the cluster `hack/localcluster run` gives its command and the one e2e tests
// of several nodes start in their own namespace, so that what a test proves
// is what a user sees. The addresses are documentation addresses (RFC 5737):
// they exist only on the loopback device of a namespace the caller created.
//
// The nodes share one network namespace where real nodes each have their
// own, so whatever a node's components listen on must differ from node to
// node. The API server's port is part of the node's kubeadm configuration
// (its bindPort); kube-controller-manager and kube-scheduler bind loopback
// ports kubeadm fixes, which only kubeadm patches can move (NodePatches). A
// stacked etcd member, which listens on loopback too, would get its ports the
// same way, and the external etcd of StartNodes would give way to it.

const (
	// MaxLocalNodes is the largest local control plane: three nodes are
	// what an HA control plane, and later an etcd quorum, needs.
	MaxLocalNodes = 3
	// LocalEndpoint is the controlPlaneEndpoint of the local control plane,
	// where its load balancer listens. Node i advertises 192.0.2.(11+i)
	// and serves its API on port 6443+i.
	LocalEndpoint = "192.0.2.10:8443"
)

// DefaultLocalGrace is the grace period of a local control plane's
// components unless LocalOptions say otherwise: a kube-apiserver draining its
// watches would otherwise take the kubelet's whole 30s on every restart, which
// a local cluster has no use for.
const DefaultLocalGrace = 5 * time.Second

// LocalOptions configure StartLocal.
type LocalOptions struct {
	// Nodes is the number of control-plane nodes, 1 to MaxLocalNodes.
	Nodes int
	// Dir holds everything: etcd's data and each node's root directory
	// (Dir/cp-0, ...). Empty means a temporary directory Stop removes.
	Dir string
	// Grace is how long a component has to stop after SIGTERM
	// (DefaultLocalGrace when zero).
	Grace time.Duration
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

// StartLocal starts the local control plane: it puts the load balancer's and
// the nodes' addresses on the namespace's loopback device, then starts etcd,
// nodes cp-0..cp-(n-1) and the load balancer on LocalEndpoint with
// StartNodes, and returns once every node's components are Ready. It refuses
// to run outside a network namespace of the caller's own (see ReexecInNetns).
func StartLocal(ctx context.Context, bins Binaries, opts LocalOptions) (*Nodes, error) {
	specs, err := localNodes(opts.Nodes)
	if err != nil {
		return nil, err
	}
	lb, _, err := net.SplitHostPort(LocalEndpoint)
	if err != nil {
		return nil, err
	}
	addrs := []string{lb}
	for _, s := range specs {
		addrs = append(addrs, s.Address)
	}
	if err := SetUpLoopback(addrs...); err != nil {
		return nil, err
	}
	if opts.Grace == 0 {
		opts.Grace = DefaultLocalGrace
	}
	return StartNodes(ctx, bins, NodesOptions{
		Dir: opts.Dir, Endpoint: LocalEndpoint, Nodes: specs, Grace: opts.Grace, Log: opts.Log,
	})
}

// localNodes are the specs of an n-node local control plane.
func localNodes(n int) ([]NodeSpec, error) {
	if n < 1 || n > MaxLocalNodes {
		return nil, fmt.Errorf("a local control plane has 1 to %d nodes, not %d", MaxLocalNodes, n)
	}
	specs := make([]NodeSpec, n)
	for i := range specs {
		specs[i] = NodeSpec{
			Name:     "cp-" + strconv.Itoa(i),
			Address:  "192.0.2." + strconv.Itoa(11+i),
			BindPort: int32(6443 + i),
			Patches:  NodePatches(i),
		}
	}
	return specs, nil
}

// NodePatches are the kubeadm patches of the i-th node (from 0) of a control
// plane whose nodes share one network namespace: node i's
// kube-controller-manager serves on 10257+10i and its kube-scheduler on
// 10259+10i. Node 0 keeps kubeadm's ports and has none (nil). Being patches,
// they are what a node's reconfiguration must render with (--patches):
// without them its components would not start.
func NodePatches(i int) map[string]string {
	if i == 0 {
		return nil
	}
	return map[string]string{
		"kube-controller-manager+json.yaml": securePortPatch(10257 + 10*i),
		"kube-scheduler+json.yaml":          securePortPatch(10259 + 10*i),
	}
}

// securePortPatch moves a component's --secure-port, and the container port
// its probes name, to port.
func securePortPatch(port int) string {
	return fmt.Sprintf(`- op: add
  path: /spec/containers/0/command/-
  value: --secure-port=%d
- op: replace
  path: /spec/containers/0/ports/0/containerPort
  value: %d
`, port, port)
}
