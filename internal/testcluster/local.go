package testcluster

import (
	"context"
	"fmt"
	"maps"
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
// ports kubeadm fixes, which only kubeadm patches can move (NodePatches),
// and so does a stacked etcd member, whose API server must then be pointed
// at it the same way (LocalNodePatches). A member's peer and advertised
// client URLs are on its node's address, as on a real node.

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
	// Etcd is where etcd runs: EtcdExternal (the default), or EtcdStacked,
	// a member on every node as kubeadm builds it.
	Etcd EtcdMode
	// KubernetesVersion is the control plane's version, a release the
	// harness built: Binaries.Version (the default) or
	// Binaries.Previous.Version, which an upgrade starts from.
	KubernetesVersion string
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
	etcd, err := ParseEtcdMode(string(opts.Etcd))
	if err != nil {
		return nil, err
	}
	specs, err := localNodes(opts.Nodes, etcd)
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
		Dir: opts.Dir, Endpoint: LocalEndpoint, Etcd: etcd, KubernetesVersion: opts.KubernetesVersion, Nodes: specs, Grace: opts.Grace, Log: opts.Log,
	})
}

// localNodes are the specs of an n-node local control plane.
func localNodes(n int, etcd EtcdMode) ([]NodeSpec, error) {
	if n < 1 || n > MaxLocalNodes {
		return nil, fmt.Errorf("a local control plane has 1 to %d nodes, not %d", MaxLocalNodes, n)
	}
	specs := make([]NodeSpec, n)
	for i := range specs {
		specs[i] = NodeSpec{
			Name:                "cp-" + strconv.Itoa(i),
			Address:             localAddress(i),
			BindPort:            int32(6443 + i),
			AgentMetricsAddress: LocalAgentMetricsAddress(i),
			Patches:             LocalNodePatches(i, etcd),
		}
	}
	return specs, nil
}

// localAddress is the advertise address of the local control plane's
// node i.
func localAddress(i int) string { return "192.0.2." + strconv.Itoa(11+i) }

// LocalAgentMetricsAddress is where an agent of the local control plane's
// node i (from 0) serves its metrics: 127.0.0.1:(10300+10i). The nodes
// share one loopback, where the agent's default, 127.0.0.1:10268, is node
// 2's kubelet's /healthz (10248+10i); 10300+10i is above every port a
// node's components take (LocalNodePatches), 10 apart as theirs are.
func LocalAgentMetricsAddress(i int) string {
	return "127.0.0.1:" + strconv.Itoa(agentMetricsPort+10*i)
}

// agentMetricsPort is node 0's agent's metrics port.
const agentMetricsPort = 10300

// NodePatches are the kubeadm patches of the i-th node (from 0) of a control
// plane with external etcd whose nodes share one network namespace: node i's
// kube-controller-manager serves on 10257+10i, its kube-scheduler on
// 10259+10i, and its kubelet's /healthz on 10248+10i (the kubeletconfiguration
// patch, which kubeadm applies to /var/lib/kubelet/config.yaml). Node 0
// keeps kubeadm's ports and has none (nil). Being patches, they are what a
// node's reconfiguration and upgrade must render with (--patches): without
// them its components would not start.
func NodePatches(i int) map[string]string {
	return LocalNodePatches(i, EtcdExternal)
}

// LocalNodePatches are the kubeadm patches of the local control plane's
// node i (from 0) with etcd where etcd says: NodePatches, and with a stacked
// etcd those of stackedEtcdPatches, which every node has.
func LocalNodePatches(i int, etcd EtcdMode) map[string]string {
	p := map[string]string{}
	if i > 0 {
		p["kube-controller-manager+json.yaml"] = securePortPatch(10257 + 10*i)
		p["kube-scheduler+json.yaml"] = securePortPatch(10259 + 10*i)
		p["kubeletconfiguration+merge.yaml"] = fmt.Sprintf("healthzPort: %d\n", kubeletHealthzPort+10*i)
	}
	if etcd == EtcdStacked {
		maps.Copy(p, stackedEtcdPatches(localAddress(i), etcdClientPort+10*i, etcdMetricsPort+10*i))
	}
	if len(p) == 0 {
		return nil
	}
	return p
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

// kubeletHealthzPort is the kubelet's /healthz port on loopback, kubeadm's
// default.
const kubeletHealthzPort = 10248

// kubeadmEtcdFeatureGates is the --feature-gates kubeadm 1.37 gives etcd.
const kubeadmEtcdFeatureGates = "--feature-gates=InitialCorruptCheck=true"

// stackedEtcdPatches are what a stacked etcd member at address needs when
// the members share one network namespace:
//
//   - etcd's SetMemberLocalAddr feature gate, on every node: a connection to
//     an address of the namespace comes from that same address, so a
//     member's connections to its peers would come from their address, not
//     its own, and the peers, which check a peer certificate's addresses
//     against where the connection comes from, would refuse them. With the
//     gate a member connects from its advertised peer address, as it does
//     from its own host on a real node;
//   - unless clientPort is kubeadm's (node 0), its loopback client URL on
//     clientPort and its metrics URL, which its probes ask, on metricsPort,
//     and its API server's --etcd-servers on that loopback client URL.
//
// A JSON patch names an argument by its index, which kubeadm's sorted
// arguments shift (a joined member has --initial-cluster-state before
// these; an extraArgs override moves an argument to the end), so a
// strategic merge patch deletes kubeadm's argument by its value
// ($deleteFromPrimitiveList) and a JSON patch adds the node's at the end,
// where kubeadm puts an extraArgs override too. Should kubeadm's value
// change, the deletion does nothing and the last argument still wins (etcd
// merges repeated --feature-gates). The probes' port is the container's
// only port.
func stackedEtcdPatches(address string, clientPort, metricsPort int) map[string]string {
	clientURLs := func(port int) string {
		return fmt.Sprintf("--listen-client-urls=https://127.0.0.1:%d,https://%s:%d", port, address, etcdClientPort)
	}
	metricsURL := func(port int) string { return fmt.Sprintf("--listen-metrics-urls=http://127.0.0.1:%d", port) }
	servers := func(port int) string { return fmt.Sprintf("--etcd-servers=https://127.0.0.1:%d", port) }
	deleted := []string{kubeadmEtcdFeatureGates}
	added := []string{kubeadmEtcdFeatureGates + ",SetMemberLocalAddr=true"}
	p := map[string]string{}
	if clientPort != etcdClientPort {
		deleted = append(deleted, clientURLs(etcdClientPort), metricsURL(etcdMetricsPort))
		added = append(added, clientURLs(clientPort), metricsURL(metricsPort))
		p["kube-apiserver.yaml"] = deleteArgsPatch("kube-apiserver", servers(etcdClientPort))
		p["kube-apiserver+json.yaml"] = addArgsPatch(servers(clientPort))
	}
	p["etcd.yaml"] = deleteArgsPatch("etcd", deleted...)
	p["etcd+json.yaml"] = addArgsPatch(added...)
	if metricsPort != etcdMetricsPort {
		p["etcd+json.yaml"] += fmt.Sprintf(`- op: replace
  path: /spec/containers/0/ports/0/containerPort
  value: %d
`, metricsPort)
	}
	return p
}

// addArgsPatch is a JSON patch that adds args at the end of the command of
// the static Pod's container.
func addArgsPatch(args ...string) string {
	var s string
	for _, a := range args {
		s += fmt.Sprintf("- op: add\n  path: /spec/containers/0/command/-\n  value: %q\n", a)
	}
	return s
}

// deleteArgsPatch is a strategic merge patch that deletes args from the
// command of the static Pod's container.
func deleteArgsPatch(container string, args ...string) string {
	s := fmt.Sprintf("spec:\n  containers:\n  - name: %s\n    $deleteFromPrimitiveList/command:\n", container)
	for _, a := range args {
		s += fmt.Sprintf("    - %q\n", a)
	}
	return s
}
