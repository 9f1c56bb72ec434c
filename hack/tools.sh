#!/usr/bin/env bash
# Builds a development tool pinned in hack/tools/* into _output/tools, once
# per version, and prints its path.
#   hack/tools.sh golangci-lint | validate-krew-manifest | goreleaser | krew
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${root}/_output/tools"

case "${1:-}" in
golangci-lint) dir=lint module=github.com/golangci/golangci-lint/v2 pkg=github.com/golangci/golangci-lint/v2/cmd/golangci-lint ;;
validate-krew-manifest) dir=release module=sigs.k8s.io/krew pkg=sigs.k8s.io/krew/cmd/validate-krew-manifest ;;
krew) dir=release module=sigs.k8s.io/krew pkg=sigs.k8s.io/krew/cmd/krew ;;
goreleaser) dir=release module=github.com/goreleaser/goreleaser/v2 pkg=github.com/goreleaser/goreleaser/v2 ;;
*)
	echo "usage: $0 golangci-lint|validate-krew-manifest|krew|goreleaser" >&2
	exit 2
	;;
esac

cd "${root}/hack/tools/${dir}"
version="$(go list -m -f '{{.Version}}' "${module}")"
bin="${out}/$1-${version}"
if [[ ! -x "${bin}" ]]; then
	echo "building $1 ${version} (first run only)" >&2
	mkdir -p "${out}"
	CGO_ENABLED=0 go build -trimpath -o "${bin}.tmp" "${pkg}"
	mv "${bin}.tmp" "${bin}"
fi
echo "${bin}"
