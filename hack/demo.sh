#!/usr/bin/env bash
# Starts a real local control plane, seeds kubeadm-config with the real
# kubeadm, and runs the plugin against it through kubectl; then a rollout
# over three kubeadm control-plane nodes (hack/demo-rollout.sh, inside
# hack/localcluster run), which stop when that part ends.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

dir=_output/demo
export PATH="${PWD}/_output/bin:${PATH}"
echo "==> starting etcd and kube-apiserver on loopback"
KUBECONFIG="$(go run ./hack/localcluster up --dir "${dir}")"
export KUBECONFIG

step() { echo; echo "\$ $*"; "$@"; }

# Backups stay inside the demo's folder.
export KUBEADMCFG_BACKUP_DIR="${PWD}/${dir}/backups"

step kubectl plugin list
step kubectl kubeadmcfg get
step kubectl kubeadmcfg get -o jsonpath='{.networking.podSubnet}{"\n"}'
step kubectl kubeadmcfg validate

echo; echo "# back up, patch (backed up automatically), and restore"
step kubectl kubeadmcfg backup
step kubectl kubeadmcfg patch --set apiServer.extraArgs.profiling=false --set 'apiServer.certSANs[+]=lb.example.com' --diff
step kubectl kubeadmcfg patch --set apiServer.extraArgs.profiling=false
step kubectl kubeadmcfg patch --set networking.podSubnet=10.244.0.0/33 || echo "(exit $?: refused, nothing written)"
step kubectl kubeadmcfg backup list
step kubectl kubeadmcfg restore --latest

echo; echo "# an upgrade that gets stuck on the second master, is forced to failed, and is retried"
step kubectl kubeadmcfg upgrade-start --to v1.37.3
for state in downloading-images downloaded-images upgrading-networking upgraded-networking upgrading-storage \
	upgraded-storage upgrading-first-master upgraded-first-master upgrading-second-master; do
	kubectl kubeadmcfg upgrade-set "${state}" >/dev/null
done
step kubectl kubeadmcfg upgrade-host controller-1 upgrading-control-plane
step kubectl kubeadmcfg upgrade-status
step kubectl kubeadmcfg upgrade-fail --reason "kubeadm upgrade node failed on controller-1"
step kubectl kubeadmcfg upgrade-set upgraded-second-master --expect upgrading-second-master || echo "(exit $?: a late report cannot overwrite the failure)"

echo; echo "# the retry run by upgrade-run: its command fails late, and the failure is recorded; run again, it succeeds"
step kubectl kubeadmcfg upgrade-run upgrading-second-master -- sh -c \
	'echo "[upgrade] upgrading controller-1"; sleep 1; echo "[upgrade/etcd] failed to dial etcd" >&2; exit 1' ||
	echo "(exit $?: the command's own)"
step kubectl kubeadmcfg upgrade-status
step kubectl kubeadmcfg upgrade-run upgrading-second-master -- sh -c 'echo "[upgrade] upgrading controller-1"; sleep 1; echo "[upgrade] SUCCESS"'
step kubectl kubeadmcfg upgrade-status
step kubectl kubeadmcfg upgrade-plan show kubeadm --control-plane-nodes cp-0,cp-1,cp-2

echo; echo "# a rollout: three kubeadm control-plane nodes in namespaces of their own, an agent on each"
go build -o _output/bin/localcluster ./hack/localcluster
echo "\$ localcluster run --nodes 3 --dir _output/demo-ha -- hack/demo-rollout.sh _output/demo-ha"
_output/bin/localcluster run --nodes 3 --dir _output/demo-ha -- hack/demo-rollout.sh _output/demo-ha

echo; echo "# an upgrade: three kubeadm control-plane nodes at v1.36.3, whose agents upgrade them to v1.37.2;"
echo "# the second node fails late, as in the seed's story, and is resumed once its cause is fixed"
echo "\$ localcluster run --nodes 3 --etcd stacked --kubernetes-version v1.36.3 --dir _output/demo-upgrade -- hack/demo-upgrade.sh _output/demo-upgrade"
_output/bin/localcluster run --nodes 3 --etcd stacked --kubernetes-version v1.36.3 --dir _output/demo-upgrade -- hack/demo-upgrade.sh _output/demo-upgrade

cat <<EOT

The three-node control planes stopped with their parts of the demo; their
files and the agents' logs are in _output/demo-ha and _output/demo-upgrade.
The single-node one keeps running.
Point kubectl at it, and stop it, with:
  export PATH=${PWD}/_output/bin:\$PATH KUBECONFIG=${KUBECONFIG}
  make demo-down
A shell beside a three-node control plane of your own (docs/development.md):
  localcluster run --nodes 3 -- bash
EOT
