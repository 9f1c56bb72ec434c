#!/usr/bin/env bash
# Builds the release archives for every platform into dist/ as an offline
# snapshot, renders the krew manifest against their checksums, and checks it
# with krew's validator, then installs the linux/amd64 archive with the real
# krew into a scratch KREW_ROOT and runs it through kubectl.
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
echo "dist: archives, checksums and krew manifest in dist/" >&2
