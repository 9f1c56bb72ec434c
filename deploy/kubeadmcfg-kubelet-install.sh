#!/usr/bin/env bash
# kubeadmcfg-kubelet-install installs this node's kubelet of the release in
# $KUBEADMCFG_KUBELET_VERSION and restarts it: a node's kubelet step of an
# upgrade the agents carry out. The agent's drop-in for upgrades,
# deploy/kubeadmcfg-agent.service.d/upgrades.conf, runs it through systemd-run,
# as a service of its own outside the agent's sandbox, with the release in
# its environment (docs/agent.md, "Agents that run upgrades").
#
# Installed as /usr/local/sbin/kubeadmcfg-kubelet-install, it takes the
# kubelet from the release's own directory, /usr/local/kubernetes/VERSION/bin
# (the layout of the drop-in's --kubeadm-template: the node binaries of each
# release, as kubernetes-node-linux-ARCH.tar.gz unpacks them), and makes
# /usr/local/bin/kubelet, which the kubelet.service of a node installed
# without a package manager runs, point at it: a symbolic link replaced in
# one rename, so the unit never finds no kubelet. Then `systemctl restart
# kubelet`, which returns once the kubelet started; the agent then waits for
# its /healthz, its Node Ready and reporting the release. A node with the
# distribution's kubelet package replaces the link with its package
# manager's install of that release.
#
#   kubeadmcfg-kubelet-install [--rootfs DIR]
#
#   --rootfs DIR  the node's root file system (default /): the kubelet's
#                 paths are under DIR
#
# It prints one line saying what it did; it exits 0 once the kubelet was
# restarted on the release, 1 when it failed (nothing changed, or the
# restart failed after the switch), 2 for a bad command line.
set -euo pipefail

me=kubeadmcfg-kubelet-install
rootfs=""
usage() {
	echo "${me}: $*" >&2
	exit 2
}
while (($# > 0)); do
	case "$1" in
	--rootfs)
		(($# >= 2)) || usage "$1 needs a value"
		rootfs="${2%/}"
		shift 2
		;;
	*) usage "unknown argument $1 (see the header of this script)" ;;
	esac
done
version="${KUBEADMCFG_KUBELET_VERSION:-}"
[[ "${version}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$ ]] ||
	usage "KUBEADMCFG_KUBELET_VERSION must name a release (v1.37.2), not '${version}'"
fail() {
	echo "${me}: $*" >&2
	exit 1
}

kubelet="/usr/local/kubernetes/${version}/bin/kubelet"
link="${rootfs}/usr/local/bin/kubelet"
[[ -x "${rootfs}${kubelet}" ]] || fail "no kubelet ${version} at ${rootfs}${kubelet}: unpack the release's node binaries there first"
mkdir -p "$(dirname "${link}")"
ln -sfn "${kubelet}" "${link}.${me}"
mv -fT "${link}.${me}" "${link}"
systemctl restart kubelet || fail "${link} is now ${kubelet}, but systemctl restart kubelet failed"
echo "${me}: ${link} is ${kubelet}, and the kubelet restarted"
