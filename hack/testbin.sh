#!/usr/bin/env bash
# Builds the real control-plane binaries the tests and the demo run (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubeadm) and
# etcdutl, the etcd release's offline tool (snapshot restore), from the
# versions pinned in hack/tools/go.mod; the previous release's (kubeadm 1.36,
# the newest that reads kubeadm.k8s.io/v1beta3, and the kube-apiserver,
# kube-controller-manager, kube-scheduler and etcd a cluster of 1.36 runs,
# which an upgrade starts from) from hack/tools/kubernetes-1.36/go.mod; and
# nodebox (hack/tools/nodebox), what a local node's root holds for kubeadm
# besides its files: a CRI endpoint, a static cp, pause.
# Binaries land in $TESTBIN_DIR/<version>/ and are reused when already built;
# nodebox, the project's own code, in a directory named by its source's hash.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${TESTBIN_DIR:-${root}/_output/testbin}"
cd "${root}/hack/tools"

k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
etcd_version="$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
etcdutl_version="$(go list -m -f '{{.Version}}' go.etcd.io/etcd/etcdutl/v3)"
if [[ "${etcdutl_version}" != "${etcd_version}" ]]; then
	echo "hack/tools/go.mod pins etcdutl ${etcdutl_version} and etcd ${etcd_version}: pin both to one release" >&2
	exit 1
fi
major="$(echo "${k8s_version#v}" | cut -d. -f1)"
minor="$(echo "${k8s_version#v}" | cut -d. -f2)"

ldflags="-s -w"
for kv in "gitVersion=${k8s_version}" "gitMajor=${major}" "gitMinor=${minor}" \
	"gitTreeState=clean" "buildDate=1970-01-01T00:00:00Z"; do
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X ${pkg}.${kv}"
	done
done

build() { # build NAME PACKAGE VERSION [LDFLAGS]
	local name="$1" pkg="$2" version="$3" flags="${4:-}"
	local dest="${out}/${version}/${name}"
	if [[ -x "${dest}" ]]; then
		return 0
	fi
	echo "building ${name} ${version} (first run only)" >&2
	mkdir -p "${out}/${version}"
	CGO_ENABLED=0 go build -trimpath -ldflags "${flags}" -o "${dest}.tmp" "${pkg}"
	mv "${dest}.tmp" "${dest}"
}

build etcd go.etcd.io/etcd/server/v3 "etcd-${etcd_version}" "-s -w"
build etcdutl go.etcd.io/etcd/etcdutl/v3 "etcd-${etcd_version}" "-s -w"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "kubernetes-${k8s_version}" "${ldflags}"
build kubeadm k8s.io/kubernetes/cmd/kubeadm "kubernetes-${k8s_version}" "${ldflags}"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "kubernetes-${k8s_version}" "${ldflags}"
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "kubernetes-${k8s_version}" "${ldflags}"

# The previous release: kubeadm 1.36 for the v1beta3 verdicts, and the
# control plane a local cluster of 1.36 runs. Stamped like the above.
cd "${root}/hack/tools/kubernetes-1.36"
previous_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
previous_etcd_version="$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
previous_ldflags="-s -w"
for kv in "gitVersion=${previous_version}" "gitMajor=$(echo "${previous_version#v}" | cut -d. -f1)" \
	"gitMinor=$(echo "${previous_version#v}" | cut -d. -f2)" "gitTreeState=clean" "buildDate=1970-01-01T00:00:00Z"; do
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		previous_ldflags+=" -X ${pkg}.${kv}"
	done
done
build kubeadm k8s.io/kubernetes/cmd/kubeadm "kubernetes-${previous_version}" "${previous_ldflags}"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "kubernetes-${previous_version}" "${previous_ldflags}"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "kubernetes-${previous_version}" "${previous_ldflags}"
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "kubernetes-${previous_version}" "${previous_ldflags}"
build etcd go.etcd.io/etcd/server/v3 "etcd-${previous_etcd_version}" "-s -w"

# nodebox is built from this repository's source, which changes without a
# version: its directory is named by the hash of its source and go.sum.
cd "${root}/hack/tools"
nodebox_hash="$(cat go.mod go.sum nodebox/*.go | sha256sum | cut -c1-12)"
build nodebox ./nodebox "nodebox-${nodebox_hash}" "-s -w"

# Print the paths so callers can export them.
echo "KUBERNETES_VERSION=${k8s_version}"
echo "ETCD_VERSION=${etcd_version}"
echo "ETCD_BIN=${out}/etcd-${etcd_version}/etcd"
echo "ETCDUTL_BIN=${out}/etcd-${etcd_version}/etcdutl"
echo "KUBE_APISERVER_BIN=${out}/kubernetes-${k8s_version}/kube-apiserver"
echo "KUBEADM_BIN=${out}/kubernetes-${k8s_version}/kubeadm"
echo "KUBE_CONTROLLER_MANAGER_BIN=${out}/kubernetes-${k8s_version}/kube-controller-manager"
echo "KUBE_SCHEDULER_BIN=${out}/kubernetes-${k8s_version}/kube-scheduler"
echo "KUBEADM_V1BETA3_BIN=${out}/kubernetes-${previous_version}/kubeadm"
echo "PREVIOUS_KUBERNETES_VERSION=${previous_version}"
echo "PREVIOUS_KUBEADM_BIN=${out}/kubernetes-${previous_version}/kubeadm"
echo "PREVIOUS_KUBE_APISERVER_BIN=${out}/kubernetes-${previous_version}/kube-apiserver"
echo "PREVIOUS_KUBE_CONTROLLER_MANAGER_BIN=${out}/kubernetes-${previous_version}/kube-controller-manager"
echo "PREVIOUS_KUBE_SCHEDULER_BIN=${out}/kubernetes-${previous_version}/kube-scheduler"
echo "PREVIOUS_ETCD_VERSION=${previous_etcd_version}"
echo "PREVIOUS_ETCD_BIN=${out}/etcd-${previous_etcd_version}/etcd"
echo "NODEBOX_BIN=${out}/nodebox-${nodebox_hash}/nodebox"
