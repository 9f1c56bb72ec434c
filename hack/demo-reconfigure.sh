#!/usr/bin/env bash
# The reconfigure part of the demo: one kubeadm control-plane node whose
# static Pods (kubeadm's own manifests, the real binaries) are run by the
# harness's static Pod runner. kubeadm needs a real node address, so this
# runs in a network namespace of its own (unshare -rn), with 192.0.2.10 (the
# load balancer) and 192.0.2.11 (the node) on its loopback device; nothing
# in it can reach outside, nothing outside sees it, and it all stops when the
# script ends.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ "${KUBEADMCFG_TEST_NETNS:-}" != 1 ]]; then
	go build -o _output/bin/localnode ./hack/localnode
	exec unshare --user --map-root-user --net -- env KUBEADMCFG_TEST_NETNS=1 "$0" "$@"
fi
ip link set lo up
ip addr add 192.0.2.10/32 dev lo
ip addr add 192.0.2.11/32 dev lo

dir="${PWD}/_output/demo-node"
kubeadm="$(hack/testbin.sh | sed -n 's/^KUBEADM_BIN=//p')"
export PATH="${PWD}/_output/bin:${PATH}"

echo "==> starting a control-plane node: etcd, and kubeadm's static Pods run by the harness's static Pod runner"
rm -f "${dir}.kubeconfig"
_output/bin/localnode --dir "${dir}" >"${dir}.kubeconfig" &
node=$!
trap 'kill "${node}" 2>/dev/null; wait "${node}" 2>/dev/null || true' EXIT
until [[ -s "${dir}.kubeconfig" ]]; do
	kill -0 "${node}" 2>/dev/null || { echo "the node did not start" >&2; exit 1; }
	sleep 1
done
KUBECONFIG="$(cat "${dir}.kubeconfig")"
export KUBECONFIG
# Backups stay inside the demo's folder; inside the namespace the script
# looks like root, so the default would be /etc.
export KUBEADMCFG_BACKUP_DIR="${dir}/backups"

step() { echo; echo "\$ $*"; "$@"; }
# What "running on the node" means here: its name and its manifests
# directory (the runner's /etc/kubernetes/manifests), and the kubeadm built
# for the demo.
on_node=(--node-name demo-node --manifests-dir "${dir}/demo-node/etc/kubernetes/manifests" --kubeadm "${kubeadm}")

echo; echo "# the node runs what the ConfigMap says: nothing to change, and that is its last known good"
step kubectl kubeadmcfg reconfigure "${on_node[@]}"

echo; echo "# a parameter changed in the ConfigMap, then rolled out to the node's kube-apiserver"
step kubectl kubeadmcfg patch --set apiServer.extraArgs.audit-log-maxbackup=7
step kubectl kubeadmcfg reconfigure "${on_node[@]}" --diff
step kubectl kubeadmcfg reconfigure "${on_node[@]}"
echo; echo "# the node's kube-apiserver process runs with it:"
echo "\$ pgrep -a -f '${dir}/demo-node/etc/kubernetes/pki/apiserver.crt' | grep -o -- '--audit-log-maxbackup=[0-9]*'"
pgrep -a -f "${dir}/demo-node/etc/kubernetes/pki/apiserver.crt" | grep -o -- '--audit-log-maxbackup=[0-9]*'

echo; echo "# a flag kube-apiserver refuses at start: the node goes back to what worked (exit 8)"
backup="$(kubectl kubeadmcfg patch --set apiServer.extraArgs.no-such-flag=1 -o jsonpath='{.backup}')"
echo "\$ kubectl kubeadmcfg patch --set apiServer.extraArgs.no-such-flag=1   # backed up to ${backup##*/}"
step kubectl kubeadmcfg reconfigure "${on_node[@]}" --wait 30s || echo "(exit $?: rolled back)"
step kubectl kubeadmcfg restore "${backup##*/}"
step kubectl kubeadmcfg backup list
echo; echo "(the node stops with this script)"
