#!/usr/bin/env bash
# Starts a real local control plane, seeds kubeadm-config with the real
# kubeadm, and runs the plugin against it through kubectl.
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

cat <<EOT

The control plane keeps running. Point kubectl at it with:
  export KUBECONFIG=${KUBECONFIG}
  export PATH=${PWD}/_output/bin:\$PATH
Stop it with:
  make demo-down
EOT
