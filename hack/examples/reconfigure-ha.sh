#!/usr/bin/env bash
# Changes a control-plane parameter on an HA kubeadm control plane, the whole
# procedure: the shared ClusterConfiguration is patched once, on the active
# node, and then every control-plane node reconfigures its own static Pods,
# one node after another. When a node refuses the change (reconfigure exits 8
# or 9), the ConfigMap is restored to the backup the patch took and the nodes
# that had already changed are reconfigured back.
#
#   reconfigure-ha.sh NODE... -- PATCH-FLAGS...
#   reconfigure-ha.sh cp-1 cp-2 cp-3 -- --set apiServer.extraArgs.audit-log-maxage=60
#
# Every command runs on a node through $ON_NODE (default: ssh), as
# `$ON_NODE NODE kubectl kubeadmcfg ...`: kubectl kubeadmcfg and kubeadm must
# be installed there, with a kubeconfig that reaches the API through the
# load balancer (an admin.conf does).
#
# Environment:
#   ON_NODE            how to run a command on a node (default: ssh)
#   LEADER_LEASE       the Lease whose holder patches (default:
#                      kube-system/kube-controller-manager)
#   RECONFIGURE_FLAGS  more flags for reconfigure, e.g. "--wait 3m"
#
# Exit codes, for automation:
#   0  every node runs the new configuration
#   8  a node refused it: the ConfigMap is restored and every node is back on
#      the previous configuration
#   9  a node refused it and going back failed too: look at the node named
#   2  usage; any other code is the failing step's own, with nothing restored
#      (the message says what state things are in)
set -uo pipefail

ON_NODE="${ON_NODE:-ssh}"
LEADER_LEASE="${LEADER_LEASE:-kube-system/kube-controller-manager}"
read -r -a reconfigure_flags <<<"${RECONFIGURE_FLAGS:-}"

say() { echo "reconfigure-ha: $*" >&2; }
on() { # on NODE ARGS...: kubectl kubeadmcfg ARGS on NODE
	local node="$1"
	shift
	${ON_NODE} "${node}" kubectl kubeadmcfg "$@"
}

nodes=()
while [[ $# -gt 0 && "$1" != "--" ]]; do
	nodes+=("$1")
	shift
done
if [[ $# -lt 2 || ${#nodes[@]} -eq 0 ]]; then
	echo "usage: $0 NODE... -- PATCH-FLAGS..." >&2
	exit 2
fi
shift
patch_flags=("$@")

# 1. Patch the shared ClusterConfiguration on the active node only: the
# others skip (exit 0, skipped). The patch backs up the document it replaces.
patcher="" backup=""
for node in "${nodes[@]}"; do
	out="$(on "${node}" patch --if-leader "${LEADER_LEASE}" "${patch_flags[@]}" \
		-o jsonpath='{.skipped} {.changed} {.backup}')"
	rc=$?
	if [[ ${rc} -ne 0 ]]; then
		say "patch on ${node} failed (exit ${rc}); nothing was changed"
		exit "${rc}"
	fi
	read -r skipped changed backup <<<"${out}"
	if [[ "${skipped}" == "false" ]]; then
		patcher="${node}"
		say "patched on ${node} (changed: ${changed}, backup: ${backup:-none})"
		break
	fi
done
if [[ -z "${patcher}" ]]; then
	say "no node holds ${LEADER_LEASE}: nothing was patched"
	exit 1
fi

# 2. Reconfigure every node, one at a time, stopping at the first refusal.
changed_nodes=() failed="" failed_rc=0
for node in "${nodes[@]}"; do
	say "reconfiguring ${node}"
	out="$(on "${node}" reconfigure "${reconfigure_flags[@]}" -o jsonpath='{.changed}')"
	rc=$?
	case "${rc}" in
	0) [[ "${out}" == "true" ]] && changed_nodes+=("${node}") ;;
	8 | 9)
		failed="${node}" failed_rc="${rc}"
		break
		;;
	*)
		say "reconfigure on ${node} failed (exit ${rc}) before changing it; the ConfigMap holds the new configuration, nodes ${changed_nodes[*]:-none} run it"
		exit "${rc}"
		;;
	esac
done
if [[ -z "${failed}" ]]; then
	say "every node runs the new configuration"
	exit 0
fi

# 3. Go back: the ConfigMap to the backup the patch took, then the nodes that
# had changed (and the failed node, when its own rollback failed).
say "${failed} refused the change (exit ${failed_rc}); going back"
status=8
[[ ${failed_rc} -eq 9 ]] && status=9 && changed_nodes+=("${failed}")
if [[ -z "${backup}" ]]; then
	say "the patch changed nothing, so there is nothing to restore"
else
	if ! on "${patcher}" restore "${backup##*/}" >/dev/null; then
		say "restoring ${backup} on ${patcher} failed: the ConfigMap still holds the new configuration"
		exit 9
	fi
	say "restored the ConfigMap from ${backup}"
fi
for node in "${changed_nodes[@]}"; do
	if on "${node}" reconfigure "${reconfigure_flags[@]}" >/dev/null; then
		say "${node} is back on the previous configuration"
	else
		say "reconfiguring ${node} back failed"
		status=9
	fi
done
exit "${status}"
