#!/usr/bin/env bash
# The checks a change must pass besides the tests: formatting, vet, lint,
# tidy go.mod files, a krew manifest krew's own validator accepts, and a
# command reference that matches the commands.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { echo "==> $*" >&2; }

step gofmt
unformatted="$(gofmt -l cmd pkg internal hack)"
if [[ -n "${unformatted}" ]]; then
	echo "not gofmt-formatted:" >&2
	echo "${unformatted}" >&2
	exit 1
fi

step go vet
go vet ./...

step golangci-lint
"$(hack/tools.sh golangci-lint)" run ./...

step "go mod tidy leaves no diff"
for mod in . hack/tools hack/tools/kubeadm-1.36 hack/tools/lint hack/tools/release hack/tools/docs; do
	(cd "${mod}" && go mod tidy -diff) || {
		echo "run 'go mod tidy' in ${mod}" >&2
		exit 1
	}
done

step "krew manifest"
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
go run ./hack/krew-render -tag v0.1.0 .krew.yaml >"${tmp}/kubeadmcfg.yaml"
"$(hack/tools.sh validate-krew-manifest)" -manifest "${tmp}/kubeadmcfg.yaml" -skip-install

step "command reference is current"
(cd hack/tools/docs && go run . "${tmp}/docs")
if ! diff -r "${tmp}/docs" docs/commands >/dev/null; then
	echo "docs/commands is stale: run 'make docs'" >&2
	diff -r "${tmp}/docs" docs/commands >&2 || true
	exit 1
fi
echo "verify: all checks passed" >&2
