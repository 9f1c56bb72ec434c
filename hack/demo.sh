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

step kubectl plugin list
step kubectl kubeadmcfg get
step kubectl kubeadmcfg get -o jsonpath='{.networking.podSubnet}{"\n"}'

cat <<EOT

The control plane keeps running. Point kubectl at it with:
  export KUBECONFIG=${KUBECONFIG}
  export PATH=${PWD}/_output/bin:\$PATH
Stop it with:
  make demo-down
EOT
