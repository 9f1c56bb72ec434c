#!/usr/bin/env bash
# kubeadmcfg-kubelet-install installs this node's kubelet of the release in
# $KUBEADMCFG_KUBELET_VERSION and restarts it: a node's kubelet step of an
# upgrade the agents carry out. The agent's drop-in for upgrades,
# deploy/kubeadmcfg-agent.service.d/upgrades.conf, runs it with --unit: it
# then runs itself again through systemd-run, as the service UNIT outside
# the agent's sandbox, with the release in its environment, and waits for
# it (docs/agent.md, "Agents that run upgrades").
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
#   kubeadmcfg-kubelet-install [--rootfs DIR] [--unit UNIT]
#
#   --rootfs DIR  the node's root file system (default /): the kubelet's
#                 paths are under DIR
#   --unit UNIT   install as the transient service UNIT (systemd-run --unit
#                 UNIT --wait --pipe --collect), passing its output and
#                 exit code on. One install at a time: while UNIT runs, a
#                 second one is refused (by this script, with a line that
#                 says so, and by systemd, which starts no unit of a name
#                 that is loaded). Told to stop (SIGTERM, SIGINT: the agent
#                 gave up on it, past --kubelet-restart-timeout or when
#                 stopped itself), it stops UNIT (systemctl stop, which
#                 gives the install TimeoutStopSec=30s before systemd kills
#                 it) and then exits: killing systemd-run alone would leave
#                 the install running, unsupervised, after the agent
#                 recorded the step failed.
#
# It prints one line saying what it did; it exits 0 once the kubelet was
# restarted on the release, 1 when it failed (nothing changed, the restart
# failed after the switch, an install still runs, or it was told to stop),
# 2 for a bad command line.
set -euo pipefail

me=kubeadmcfg-kubelet-install
rootfs=""
unit=""
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
	--unit)
		(($# >= 2)) || usage "$1 needs a value"
		unit="$2"
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

if [[ -n "${unit}" ]]; then
	[[ "${unit}" =~ ^[A-Za-z0-9:_.@-]+$ ]] || usage "--unit must name a systemd unit, not '${unit}'"
	unit="${unit%.service}.service"
	running() {
		local state
		state="$(systemctl is-active "${unit}" 2>/dev/null)" || true
		case "${state}" in
		active | activating | deactivating | reloading | refreshing) echo "${state}" ;;
		*) return 1 ;;
		esac
	}
	if state="$(running)"; then
		fail "an install started earlier still runs as ${unit} (${state}): wait for it to end (systemctl status ${unit}), then run upgrade-resume again"
	fi
	run=(systemd-run --unit "${unit}" --wait --pipe --collect --quiet
		--setenv=KUBEADMCFG_KUBELET_VERSION --property=TimeoutStopSec=30s
		"$(realpath "$0")")
	[[ -z "${rootfs}" ]] || run+=(--rootfs "${rootfs}")
	child=""
	stop() {
		trap '' TERM INT
		echo "${me}: told to stop: stopping ${unit}" >&2
		[[ -z "${child}" ]] || kill -TERM "${child}" 2>/dev/null || true
		systemctl stop "${unit}" 2>/dev/null || true
		[[ -z "${child}" ]] || wait "${child}" 2>/dev/null || true
		# systemd-run may have had the unit started as it was stopped.
		systemctl stop "${unit}" 2>/dev/null || true
		if state="$(running)"; then
			fail "told to stop, but ${unit} still runs (${state}): see systemctl status ${unit}"
		fi
		fail "told to stop: ${unit} is stopped, the kubelet's install did not finish"
	}
	trap stop TERM INT
	# In the background, so that a signal reaches the trap at once: bash
	# runs a trap only once the foreground command has ended.
	"${run[@]}" &
	child=$!
	code=0
	wait "${child}" || code=$?
	exit "${code}"
fi

kubelet="/usr/local/kubernetes/${version}/bin/kubelet"
link="${rootfs}/usr/local/bin/kubelet"
[[ -x "${rootfs}${kubelet}" ]] || fail "no kubelet ${version} at ${rootfs}${kubelet}: unpack the release's node binaries there first"
mkdir -p "$(dirname "${link}")"
ln -sfn "${kubelet}" "${link}.${me}"
mv -fT "${link}.${me}" "${link}"
systemctl restart kubelet || fail "${link} is now ${kubelet}, but systemctl restart kubelet failed"
echo "${me}: ${link} is ${kubelet}, and the kubelet restarted"
