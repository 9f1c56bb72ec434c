#!/usr/bin/env bash
# Builds the release archives for every platform into dist/ as an offline
# snapshot, renders the krew manifest against their checksums, and checks it
# with krew's validator, then installs the linux/amd64 archive with the real
# krew into a scratch KREW_ROOT and runs it through kubectl. Last, it builds
# the agent's container image from the linux binaries and checks it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

goreleaser="$(hack/tools.sh goreleaser)"
"${goreleaser}" release --snapshot --clean --skip=publish,announce,sign

tag="v$(sed -n 's/.*"version":"\([^"]*\)".*/\1/p' dist/metadata.json | head -1)"
go run ./hack/krew-render -tag "${tag}" -checksums dist/checksums.txt .krew.yaml >dist/kubeadmcfg.yaml
"$(hack/tools.sh validate-krew-manifest)" -manifest dist/kubeadmcfg.yaml -skip-install

krew="$(hack/tools.sh krew)"
scratch="$(mktemp -d)"
trap 'rm -rf "${scratch}"' EXIT
KREW_ROOT="${scratch}" "${krew}" install --manifest=dist/kubeadmcfg.yaml \
	--archive=dist/kubectl-kubeadmcfg_linux_amd64.tar.gz
PATH="${scratch}/bin:${PATH}" kubectl kubeadmcfg version

# The image: ko's builder on an empty base, no Docker engine, no registry
# (hack/tools/release/image), one OCI layout tarball for linux/amd64 and
# linux/arm64 holding goreleaser's binaries; then the check, with the
# standard library, against deploy/agent-daemonset.yaml.
image="${PWD}/dist/kubectl-kubeadmcfg_image.oci.tar"
go run -C hack/tools/release ./image -dist "${PWD}/dist" -o "${image}" \
	-revision "$(git rev-parse HEAD)" -created "$(git log -1 --format=%ct)" "${PWD}"
KUBEADMCFG_IMAGE="${image}" go test -count=1 ./hack/imagecheck
echo "dist: archives, checksums, krew manifest and the agent's image in dist/" >&2
