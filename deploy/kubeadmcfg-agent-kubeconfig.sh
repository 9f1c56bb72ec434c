#!/usr/bin/env bash
# kubeadmcfg-agent-kubeconfig writes the kubeconfig of this control-plane
# node's rollout agent, /etc/kubernetes/kubeadmcfg-agent.conf, and renews it:
# a client certificate of the user kubeadmcfg-agent:NODE in the group
# kubeadmcfg:agents (deploy/rbac.yaml, deploy/agent-node-rbac.yaml), signed by
# the cluster's CA with `kubeadm kubeconfig user`, whose server is the
# cluster's controlPlaneEndpoint: kubeadm is given the ClusterConfiguration of
# kube-system/kubeadm-config, read with the node's admin.conf. Without it
# kubeadm would name this node's own API server, which the agent refuses on a
# control plane of several nodes (docs/agent.md, "Running it with systemd").
#
# Run it as root on the node, once by hand, then daily from
# kubeadmcfg-agent-kubeconfig.timer:
#
#   kubeadmcfg-agent-kubeconfig [--node NAME] [--renew-before DAYS] [--restart UNIT]
#                               [--kubeconfig FILE] [--rootfs DIR]
#
#   --node NAME          the node's name (default: the hostname, lowercased,
#                        as kubeadm and the agent take it)
#   --renew-before DAYS  write a new kubeconfig only when there is none, its
#                        certificate expires within DAYS days, it no longer
#                        verifies against the cluster's CA
#                        (/etc/kubernetes/pki/ca.crt: the CA was rotated), or
#                        its server is not the one kubeadm now writes (the
#                        controlPlaneEndpoint changed); kubeadm signs for a
#                        year, and `kubeadm certs renew` and `kubeadm upgrade`
#                        do not renew this certificate
#   --restart UNIT       after writing, restart UNIT if it runs (the agent
#                        reads its kubeconfig when it starts); while a node's
#                        turn or upgrade step, or a reconfigure by hand, holds
#                        the manifests directory's lock, write nothing and
#                        leave it to the next run: a restart would interrupt it
#   --kubeconfig FILE    what kubeadm-config is read with (default
#                        /etc/kubernetes/admin.conf)
#   --rootfs DIR         the node's root file system (default /), as
#                        kubeadm's --rootfs: /etc/kubernetes is DIR/etc/kubernetes
#
# It needs kubeadm (the node's own), kubectl and openssl on PATH. It prints
# one line saying what it did; it exits 0 when it wrote a kubeconfig or had
# nothing to do, 1 when it failed, 2 for a bad command line.
set -euo pipefail

me=kubeadmcfg-agent-kubeconfig
node="" renew="" restart="" kubeconfig="" rootfs=""
usage() {
	echo "${me}: $*" >&2
	exit 2
}
while (($# > 0)); do
	case "$1" in
	--node | --renew-before | --restart | --kubeconfig | --rootfs)
		(($# >= 2)) || usage "$1 needs a value"
		case "$1" in
		--node) node="$2" ;;
		--renew-before) renew="$2" ;;
		--restart) restart="$2" ;;
		--kubeconfig) kubeconfig="$2" ;;
		--rootfs) rootfs="${2%/}" ;;
		esac
		shift 2
		;;
	*) usage "unknown argument $1 (see the header of this script)" ;;
	esac
done
[[ -z "${renew}" || "${renew}" =~ ^[0-9]+$ ]] || usage "--renew-before takes a number of days, not ${renew}"
node="${node:-$(hostname | tr '[:upper:]' '[:lower:]')}"
[[ "${node}" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || usage "--node ${node} is not a node name"

etc="${rootfs}/etc/kubernetes"
out="${etc}/kubeadmcfg-agent.conf"
kubeconfig="${kubeconfig:-${etc}/admin.conf}"
fail() {
	echo "${me}: $*" >&2
	exit 1
}

# certificate prints the client certificate of kubeconfig $1.
certificate() {
	sed -n 's/^ *client-certificate-data: *//p' "$1" | base64 -d
}

# why says why the kubeconfig is written anew ("" while the old one may be
# kept, which its server, known once kubeadm has written the new one, may
# still change).
why=""
keep=""
if [[ -n "${renew}" && -s "${out}" ]]; then
	ca="${etc}/pki/ca.crt"
	[[ -r "${ca}" ]] || fail "cannot read the cluster's CA ${ca}"
	if ! certificate "${out}" | openssl x509 -noout -checkend $((renew * 86400)) >/dev/null 2>&1; then
		why="its certificate expires within ${renew} days"
	elif ! certificate "${out}" | openssl verify -CAfile "${ca}" >/dev/null 2>&1; then
		why="its certificate does not verify against the cluster's CA ${ca} (rotated?)"
	else
		keep=1
	fi
fi

# kubeadm reads the configuration inside --rootfs.
tmp="$(mktemp -d "${rootfs}/tmp/${me}.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
kubectl --kubeconfig "${kubeconfig}" --namespace kube-system --request-timeout 30s \
	get configmap kubeadm-config --output 'jsonpath={.data.ClusterConfiguration}' >"${tmp}/config.yaml" ||
	fail "cannot read the ClusterConfiguration of kube-system/kubeadm-config with ${kubeconfig}"
grep -q '^controlPlaneEndpoint: *[^ ]' "${tmp}/config.yaml" ||
	echo "${me}: warning: kubeadm-config has no controlPlaneEndpoint, so the kubeconfig names this node's own API server: enough for a control plane of one node only" >&2

# kubeadm defaults this node's InitConfiguration too, and without one would
# pick its advertise address from the default route, failing on a node
# without one: give it the node's own, from its kube-apiserver manifest
# (kubeadm's annotation), as kubeadm upgrade node reads it.
endpoint="$(sed -n 's/^ *kubeadm\.kubernetes\.io\/kube-apiserver\.advertise-address\.endpoint: *//p' \
	"${etc}/manifests/kube-apiserver.yaml" 2>/dev/null | tr -d "\"'" | head -n 1)"
if [[ -n "${endpoint}" ]]; then
	address="${endpoint%:*}" port="${endpoint##*:}"
	address="${address#[}" address="${address%]}"
	cat >>"${tmp}/config.yaml" <<EOF

---
apiVersion: $(sed -n 's/^apiVersion: *//p' "${tmp}/config.yaml" | head -n 1)
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: "${address}"
  bindPort: ${port}
nodeRegistration:
  name: "${node}"
EOF
fi

umask 077
if ! kubeadm ${rootfs:+--rootfs "${rootfs}"} kubeconfig user --config "${tmp#"${rootfs}"}/config.yaml" \
	--client-name "kubeadmcfg-agent:${node}" --org kubeadmcfg:agents >"${tmp}/agent.conf" 2>"${tmp}/kubeadm.err"; then
	fail "kubeadm kubeconfig user failed: $(tr '\n' ' ' <"${tmp}/kubeadm.err")"
fi
server="$(sed -n 's/^ *server: *//p' "${tmp}/agent.conf")"
if [[ -n "${keep}" ]]; then
	old="$(sed -n 's/^ *server: *//p' "${out}")"
	if [[ "${old}" == "${server}" ]]; then
		until="$(certificate "${out}" | openssl x509 -noout -enddate | cut -d= -f2)"
		echo "${me}: ${out} names ${server} and verifies against the cluster's CA, valid until ${until}, more than ${renew} days: not renewed"
		exit 0
	fi
	why="it names ${old:-no server}, not ${server}"
fi

if [[ -n "${restart}" ]]; then
	# The lock a turn, an upgrade step and reconfigure hold on the
	# manifests directory (pkg/controlplane), held until this script exits,
	# so that none starts while the agent restarts.
	lock="${etc}/manifests/.kubeadmcfg-reconfigure.lock"
	exec 9>>"${lock}" || fail "cannot open ${lock}"
	if ! flock --nonblock 9; then
		echo "${me}: a turn, an upgrade step or a reconfigure holds ${etc}/manifests: not renewed now, the next run tries again"
		exit 0
	fi
fi

until="$(certificate "${tmp}/agent.conf" | openssl x509 -noout -enddate | cut -d= -f2)"
# A .new left by an interrupted run may have any mode, or be a link: the
# new file is made afresh, 0600 (it holds the private key).
rm -f "${out}.new"
install -m 0600 "${tmp}/agent.conf" "${out}.new"
mv -f "${out}.new" "${out}"

what="wrote ${out} for kubeadmcfg-agent:${node} (server ${server}, valid until ${until}${why:+; the old one: ${why}})"
if [[ -n "${restart}" ]]; then
	systemctl try-restart "${restart}" || fail "${what}, but cannot restart ${restart}"
	echo "${me}: ${what} and restarted ${restart}"
else
	echo "${me}: ${what}"
fi
