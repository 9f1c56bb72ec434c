#!/usr/bin/env bash
# The upgrade part of the demo: the seed's story, told by the agents.
# hack/demo.sh runs it as
#
#   _output/bin/localcluster run --nodes 3 --etcd stacked --kubernetes-version v1.36.3 \
#       --dir _output/demo-upgrade -- hack/demo-upgrade.sh _output/demo-upgrade
#
# on three kubeadm control-plane nodes cp-0..cp-2 at v1.36.3 with a stacked
# etcd, in namespaces of their own (nothing in there reaches outside). It
# starts an agent on every node as a plain process with the node flags of an
# upgrade, and has them upgrade the cluster to v1.37.2 with the real kubeadm,
# node by node. The second node's `kubeadm upgrade node` fails late, in its
# kubelet-config phase, after it wrote the new /var/lib/kubelet/config.yaml
# (a fault of the harness's); the agent records it by itself, and once the
# cause is gone upgrade-resume runs the failed phase again and the upgrade
# completes. The agents stop with the script, and the cluster with
# localcluster run.
set -euo pipefail

if [[ -z "${LOCALCLUSTER_NODES:-}" || "${LOCALCLUSTER_ETCD:-}" != stacked || "${LOCALCLUSTER_KUBERNETES_VERSION:-}" != v1.36.3 || $# -ne 1 ]]; then
	echo "usage: localcluster run --nodes 3 --etcd stacked --kubernetes-version v1.36.3 --dir DIR -- $0 DIR" >&2
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

# until_ready: waits quietly (up to 2 minutes) until every node's agent
# publishes what upgrade-apply's preflight asks of it: a kubeadm v1.37.2 on
# the node, and its etcd member healthy.
until_ready() {
	local got
	for _ in $(seq 240); do
		got="$(kubectl kubeadmcfg nodes -o jsonpath='{range .nodes[*]}{.agent.state.etcd.healthy} {.agent.state.kubeadmVersions}{"\n"}{end}' 2>/dev/null || true)"
		[[ "$(grep -c '^true .*"v1\.37\.2"' <<<"${got}")" -eq "${#nodes[@]}" ]] && return 0
		sleep 0.5
	done
	echo "the agents do not publish kubeadm v1.37.2 and a healthy etcd member after 2 minutes: ${got}" >&2
	return 1
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
echo "# three kubeadm control-plane nodes at v1.36.3; each node has the kubeadm of v1.36.3 and of v1.37.2"
step 'kubectl get nodes'
step 'kubectl kubeadmcfg get -o jsonpath="{.kubernetesVersion}{\"\\n\"}"'
step 'echo "$LOCALCLUSTER_1_KUBEADM_TEMPLATE"; ls "$LOCALCLUSTER_1_DIR/usr/local/kubernetes"'

echo
echo "# an agent on every node, with the node flags localcluster run gives (docs/development.md,"
echo "# \"Running an agent on it\"): its kubeadm of each release (--kubeadm-template), how its kubelet"
echo "# is installed and restarted, where its kubelet's configuration and certificates are, and"
echo "# SystemVerification ignored (a node's root has no /proc or /sys for kubeadm to check). Each"
echo "# logs to $1/agent-NODE.log, and serves its metrics on a port of its own: the nodes share a"
echo "# loopback, where node I's kubelet answers on 10248+10I (the agent's default, 10268, is cp-2's)"
for i in "${!nodes[@]}"; do
	step "TMPDIR=\"\$LOCALCLUSTER_${i}_TMPDIR\" kubectl kubeadmcfg agent --node-name ${nodes[i]} --manifests-dir \"\$LOCALCLUSTER_${i}_MANIFESTS\" \\
    --patches \"\$LOCALCLUSTER_${i}_PATCHES\" --backup-dir \"\$LOCALCLUSTER_${i}_DIR/etc/kubernetes/kubeadmcfg/backups\" \\
    --cert-dir \"\$LOCALCLUSTER_${i}_DIR/etc/kubernetes/pki\" --kubeadm-template \"\$LOCALCLUSTER_${i}_KUBEADM_TEMPLATE\" \\
    --kubelet-restart-command \"\$LOCALCLUSTER_${i}_KUBELET_RESTART\" --kubelet-config \"\$LOCALCLUSTER_${i}_KUBELET_CONFIG\" \\
    --ignore-preflight-errors \"\$LOCALCLUSTER_IGNORE_PREFLIGHT_ERRORS\" --metrics-bind-address \"\$LOCALCLUSTER_${i}_METRICS_ADDRESS\" 2>agent-${nodes[i]}.log &"
	agents+=("$!")
done
until_ready

echo
echo "# the seed's failure, set up: cp-1's kubeadm will fail in its kubelet-config phase, after it"
echo "# wrote the new /var/lib/kubelet/config.yaml (a fault of the harness, while this file exists)"
step 'touch "$LOCALCLUSTER_1_FAULTS/kubelet-config"'

echo
echo "# the agents upgrade node by node with the real kubeadm, phase by phase, each phase recorded"
echo "# before it runs: cp-0 runs kubeadm upgrade apply, then cp-1 kubeadm upgrade node, which fails"
echo "# past the point of no return (kubeadm-config says v1.37.2): exit 9, naming the node and the phase"
step 'kubectl kubeadmcfg upgrade-apply v1.37.2 --wait' || code=$?
if [[ "${code:-0}" -ne 9 ]]; then
	echo "upgrade-apply --wait exited ${code:-0}, not 9" >&2
	exit 1
fi
echo "(exit 9)"
echo
echo "# nobody ran upgrade-set: cp-1's agent recorded the failure, and cp-2 is untouched"
step 'kubectl kubeadmcfg upgrade-status'
step "pgrep -a kube-apiserver | grep -o -e 'kubernetes-v[0-9.]*/kube-apiserver' -e '--advertise-address=[0-9.]*' | paste - -"
echo
echo "# what cp-1's agent logged of its step"
step "grep -e UpgradeStep -e UpgradePhase -e Kubeadm -e 'phase kubelet-config' agent-cp-1.log"

echo
echo "# the cause fixed; upgrade-resume has cp-1's agent run the failed phase again, and the"
echo "# upgrade goes on to the end: cp-2, then every node's kubelet"
step 'rm "$LOCALCLUSTER_1_FAULTS/kubelet-config"'
step 'kubectl kubeadmcfg upgrade-resume --wait'
step 'kubectl kubeadmcfg upgrade-status'
step 'kubectl get nodes'
step "pgrep -a kube-apiserver | grep -o -e 'kubernetes-v[0-9.]*/kube-apiserver' -e '--advertise-address=[0-9.]*' | paste - -"

echo
echo "# the agents stop on SIGTERM, each deleting its Lease, and the cluster stops with this script"
stop_agents
