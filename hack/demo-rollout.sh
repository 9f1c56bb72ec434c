#!/usr/bin/env bash
# The rollout part of the demo. hack/demo.sh runs it as
#
#   _output/bin/localcluster run --nodes 3 --dir _output/demo-ha -- hack/demo-rollout.sh _output/demo-ha
#
# on three kubeadm control-plane nodes cp-0..cp-2 with a stacked etcd, in
# namespaces of their own (nothing in there reaches outside). It starts an
# agent on every node as a plain process with the node flags, carries a
# change to every node one node at a time, then stops a flag kube-apiserver
# refuses on the first node and undoes it. The agents stop with the script,
# and the cluster with localcluster run.
set -euo pipefail

if [[ -z "${LOCALCLUSTER_NODES:-}" || "${LOCALCLUSTER_ETCD:-}" != stacked || $# -ne 1 ]]; then
	echo "usage: localcluster run --nodes 3 --etcd stacked --dir DIR -- $0 DIR" >&2
	exit 2
fi
cd "$1"
read -r -a nodes <<<"${LOCALCLUSTER_NODES}"
# kubeadm on PATH, as on a node. The operator's backups stay in the demo's
# folder (inside the namespace the script looks like root, whose default is
# /etc/kubernetes/kubeadmcfg/backups).
PATH="$(dirname "${KUBEADM}"):${PATH}"
export KUBEADMCFG_BACKUP_DIR="${PWD}/backups"

# step CMD: prints CMD as it is written, variables and all, and runs it.
step() {
	echo
	echo "\$ $1"
	eval "$1"
}

# until_nodes FIELD VALUE: waits quietly (up to 2 minutes) until every
# node's agent publishes VALUE as FIELD (of nodes -o json).
until_nodes() {
	local want got
	want="$(printf "$2 %.0s" "${nodes[@]}")"
	for _ in $(seq 240); do
		got="$(kubectl kubeadmcfg nodes -o jsonpath="{range .nodes[*]}{$1} {end}" 2>/dev/null || true)"
		[[ "${got}" == "${want}" ]] && return 0
		sleep 0.5
	done
	echo "the agents do not publish $1 = $2 after 2 minutes: ${got}" >&2
	return 1
}

# manifests_sums: the checksum of every manifest of every node.
manifests_sums() {
	local i m
	for i in "${!nodes[@]}"; do
		m="LOCALCLUSTER_${i}_MANIFESTS"
		sha256sum "${!m}"/*.yaml
	done
}

agents=()
stop_agents() {
	[[ ${#agents[@]} -gt 0 ]] || return 0
	kill -TERM "${agents[@]}" 2>/dev/null || true
	wait "${agents[@]}" 2>/dev/null || true
	agents=()
}
trap stop_agents EXIT

echo
echo "# three kubeadm control-plane nodes; kubectl reaches them through the load balancer"
step 'kubectl get nodes'

echo
echo "# an agent on every node: the plugin with the node's flags, as reconfigure takes them"
echo "# (docs/development.md, \"Running an agent on it\"); each logs to $1/agent-NODE.log, and serves"
echo "# its metrics on a port of its own: the nodes share a loopback, where node I's kubelet"
echo "# answers on 10248+10I (the agent's default, 10268, is cp-2's)"
for i in "${!nodes[@]}"; do
	step "kubectl kubeadmcfg agent --node-name ${nodes[i]} --manifests-dir \"\$LOCALCLUSTER_${i}_MANIFESTS\" --patches \"\$LOCALCLUSTER_${i}_PATCHES\" \\
    --backup-dir \"\$LOCALCLUSTER_${i}_DIR/etc/kubernetes/kubeadmcfg/backups\" --metrics-bind-address \"\$LOCALCLUSTER_${i}_METRICS_ADDRESS\" 2>agent-${nodes[i]}.log &"
	agents+=("$!")
done
until_nodes .inSync yes
step 'kubectl kubeadmcfg nodes'

echo
echo "# a change written to kubeadm-config reaches no node by itself: every node is out of sync"
step 'kubectl kubeadmcfg patch --set apiServer.extraArgs.audit-log-maxbackup=7'
until_nodes .inSync no
step 'kubectl kubeadmcfg nodes'
echo
echo "# what a node's turn will change there: the dry run of reconfigure, on cp-0"
step 'kubectl kubeadmcfg reconfigure --diff --node-name cp-0 --manifests-dir "$LOCALCLUSTER_0_MANIFESTS" --patches "$LOCALCLUSTER_0_PATCHES"'

echo
echo "# a rollout carries it to every node, one node at a time, each healthy before the next starts"
step 'kubectl kubeadmcfg rollout start --wait'
until_nodes .inSync yes # the last node publishes its state a moment after its turn
step 'kubectl kubeadmcfg rollout status'
echo
echo "# every node's kube-apiserver runs with the new flag"
step "pgrep -a kube-apiserver | grep -o -e '--advertise-address=[0-9.]*' -e '--audit-log-maxbackup=[0-9]*' | paste - -"
step 'kubectl kubeadmcfg nodes'

echo
echo "# a flag kube-apiserver refuses, written and rolled out in one step: the first node rolls"
echo "# itself back, the rollout stops there (exit 8), and the other nodes are not touched"
before="$(manifests_sums)"
step 'kubectl kubeadmcfg patch --set apiServer.extraArgs.no-such-flag=1 --rollout --wait' || echo "(exit $?)"
step 'kubectl kubeadmcfg rollout status'
if [[ "$(manifests_sums)" != "${before}" ]]; then
	echo "a node's manifests are not what they were before the bad flag" >&2
	exit 1
fi
echo
echo "(sha256sum: every node's manifests are byte for byte what they were before the bad flag)"

echo
echo "# undo puts the previous document back in kubeadm-config; no node had changed, so none is touched"
step 'kubectl kubeadmcfg rollout undo --wait'
until_nodes .inSync yes
step 'kubectl kubeadmcfg nodes'
step 'kubectl kubeadmcfg rollout history'

echo
echo "# what cp-0's agent logged of its failed turn (the record's Events tell the same:"
echo "# kubectl -n kube-system describe configmap kubeadmcfg-rollout)"
step "sed -n '/started its turn in rollout 2/,\$p' agent-cp-0.log"
echo
echo "# the agents stop on SIGTERM, each deleting its Lease, and the cluster stops with this script"
stop_agents
