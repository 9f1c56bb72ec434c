package agent

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// An agent of a control plane of several nodes must reach the API through
// the controlPlaneEndpoint, never through its own node's API server alone:
// that server is down exactly when the agent has the most to say (its
// node's kube-apiserver or etcd member restarts, or does not come back),
// and a RollbackFailed of kube-apiserver could never be recorded. The agent
// refuses to start rather than fail over to a list of servers of its own:
// kubeadm requires controlPlaneEndpoint for every HA control plane (join
// --control-plane refuses without it), every kubelet and admin.conf rely on
// it already, and a failover list in the agent would be a second load
// balancer with its own certificate-SAN and health-check problems.

// checkServer refuses to run the agent of node when server, its
// kubeconfig's API server, is the node's own and the control plane has more
// than one node. The node's advertise address and port, when not given,
// are read from its kube-apiserver manifest in manifestsDir, as a turn reads
// them; when they cannot be, the turns will say why, and nothing is
// refused here. The control-plane nodes are listed only when the server is
// the node's own.
func checkServer(ctx context.Context, server, manifestsDir string, node clusterconfig.NodeConfig,
	controlPlaneNodes func(context.Context) ([]string, error)) error {
	node, err := controlplane.Discover(manifestsDir, node)
	if err != nil || !ownServer(server, node) {
		return nil
	}
	names, err := controlPlaneNodes(ctx)
	if err != nil {
		return fmt.Errorf("cannot count the control-plane nodes to check the kubeconfig's server %s, which is node %s's own API server: %w",
			server, node.Name, err)
	}
	return refuseOwnServer(server, node, len(names))
}

// refuseOwnServer is the decision of checkServer: an error (exit 4) when
// server is node's own API server (ownServer) and the control plane has
// more than one node. One node has no other server to fall back on.
func refuseOwnServer(server string, node clusterconfig.NodeConfig, controlPlaneNodes int) error {
	if controlPlaneNodes <= 1 || !ownServer(server, node) {
		return nil
	}
	return exitcode.Conflictf("the kubeconfig's server %s is node %s's own API server, which is down whenever the node's kube-apiserver "+
		"or etcd member is, and the control plane has %d nodes: give the agent a kubeconfig whose server is the controlPlaneEndpoint "+
		"(the recipe in docs/agent.md, \"Running it with systemd\")", server, node.Name, controlPlaneNodes)
}

// ownServer reports whether server, an API server URL, names node's own
// API server: its advertise address or its name, or a loopback address
// (localhost included), on its bind port. A loopback address on another
// port is a load balancer of the node's own (an haproxy on each
// control-plane node is a common one), not its API server.
func ownServer(server string, node clusterconfig.NodeConfig) bool {
	u, err := url.Parse(server)
	if err != nil || u.Hostname() == "" || node.BindPort == 0 {
		return false
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	if port != strconv.Itoa(int(node.BindPort)) {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") || (node.Name != "" && strings.EqualFold(host, node.Name)) {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	return ip.IsLoopback() || ip.Equal(net.ParseIP(node.AdvertiseAddress))
}
