#!/usr/bin/env bash
# The checks a change must pass besides the tests: formatting, vet, lint,
# tidy go.mod files, verb packages that import no sibling, child processes
# started by internal/proc alone, current generated code, a plugin that
# links no component packages and stays within its budgets
# (hack/budgets), a krew manifest krew's own validator accepts, a
# command reference that matches the commands, and an agent unit that
# systemd scores as sandboxed.
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

# The modules beside the plugin's that hold code of their own (the command
# reference, the release image, nodebox in hack/tools, the alerting rules'
# test) are held to the same checks.
lint="$(hack/tools.sh golangci-lint)"
for mod in . hack/tools hack/tools/docs hack/tools/release hack/tools/promrules; do
	step "go vet (${mod})"
	(cd "${mod}" && go vet ./...)
	step "golangci-lint (${mod})"
	(cd "${mod}" && "${lint}" run ./...)
done

step "go mod tidy leaves no diff"
for mod in . hack/tools hack/tools/kubernetes-1.36 hack/tools/lint hack/tools/release hack/tools/docs hack/tools/promrules; do
	(cd "${mod}" && go mod tidy -diff) || {
		echo "run 'go mod tidy' in ${mod}" >&2
		exit 1
	}
done

# One package per verb family under pkg/cmd, as kubectl does: what two
# verbs share goes to pkg/cmd/cmdutil, a domain decision to its domain
# package, so no verb reaches into another.
step "pkg/cmd verb packages import no sibling verb package"
cmdpkg="$(go list ./pkg/cmd)"
siblings="$(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./pkg/cmd/... | awk -v root="${cmdpkg}" '
	$1 == root { next }
	{
		for (i = 2; i <= NF; i++) {
			if ($i == root || (index($i, root "/") == 1 && $i != root "/cmdutil")) {
				print $1 " imports " $i
			}
		}
	}')"
if [[ -n "${siblings}" ]]; then
	echo "a package under pkg/cmd imports a verb package; share through pkg/cmd/cmdutil or a domain package instead:" >&2
	echo "${siblings}" >&2
	exit 1
fi

# Child processes are started by internal/proc alone, which gives each a
# process group of its own, the parent-death signal, a bounded tail of its
# output and one error type: no other package the plugin ships (pkg/,
# cmd/) imports os/exec, on any platform it is built for. Tests, hack/ and
# internal/testcluster are developer harness and may.
step "only internal/proc starts child processes (no os/exec in pkg/ or cmd/)"
pkg_imports="$(for goos in linux darwin windows; do
	GOOS="${goos}" go list -f '{{.ImportPath}} {{join .Imports " "}}' ./pkg/... ./cmd/... || exit 1
done)"
exec_users="$(awk '/ os\/exec( |$)/ { print $1 }' <<<"${pkg_imports}" | sort -u)"
if [[ -n "${exec_users}" ]]; then
	echo "these packages import os/exec; start child processes with internal/proc instead:" >&2
	echo "${exec_users}" >&2
	exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

step "generated code is current"
go run ./hack/gen-componentconfig -o "${tmp}/componentconfig.go"
if ! diff -u pkg/clusterconfig/internal/componentconfig/types_generated.go "${tmp}/componentconfig.go" >&2; then
	echo "the component config mirrors are stale: run 'make generate'" >&2
	exit 1
fi

# The component configs are decoded into generated mirrors so that the plugin
# does not pay the package initialisation of these (prometheus' client
# included). The agent's metrics are encoded with prometheus/common's expfmt
# and client_model alone (pkg/agent/metrics.go): client_golang's registry and
# procfs do work at init that every command would pay.
step "the plugin links no component packages"
linked="$(go list -deps ./cmd/kubectl-kubeadmcfg | grep -E '^(k8s\.io/(kubelet|kube-proxy|component-base)|github\.com/prometheus/(client_golang|procfs))(/|$)' || true)"
if [[ -n "${linked}" ]]; then
	echo "the plugin links packages it must not (see pkg/clusterconfig/internal/componentconfig and pkg/agent/metrics.go):" >&2
	echo "${linked}" >&2
	exit 1
fi

# Every command pays for what the binary links: hack/budgets bounds the
# release binary's size and the packages it links, so that growth is a
# commit that says why.
step "budgets (hack/budgets)"
budget() { awk -v n="$1" '$1 == n { print $2 }' hack/budgets; }
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "${tmp}/kubectl-kubeadmcfg" ./cmd/kubectl-kubeadmcfg
size="$(wc -c <"${tmp}/kubectl-kubeadmcfg")"
packages="$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./cmd/kubectl-kubeadmcfg | wc -l)"
over=""
for check in "binary-bytes ${size}" "linked-packages ${packages}"; do
	read -r name figure <<<"${check}"
	limit="$(budget "${name}")"
	if [[ -z "${limit}" ]]; then
		echo "hack/budgets has no budget ${name}" >&2
		exit 1
	fi
	echo "${name}: ${figure} (budget ${limit})" >&2
	if ((figure > limit)); then
		over+="${name} is ${figure}, over its budget of ${limit}; "
	fi
done
if [[ -n "${over}" ]]; then
	echo "${over}raise the budget in hack/budgets in a commit that says why, or link less" >&2
	exit 1
fi

step "krew manifest"
go run ./hack/krew-render -tag v0.1.0 .krew.yaml >"${tmp}/kubeadmcfg.yaml"
"$(hack/tools.sh validate-krew-manifest)" -manifest "${tmp}/kubeadmcfg.yaml" -skip-install

step "command reference is current"
(cd hack/tools/docs && go run . "${tmp}/docs")
if ! diff -r "${tmp}/docs" docs/commands >/dev/null; then
	echo "docs/commands is stale: run 'make docs'" >&2
	diff -r "${tmp}/docs" docs/commands >&2 || true
	exit 1
fi

# The agent's unit sandboxes it (ProtectSystem=strict, only what a turn
# needs of /etc/kubernetes, no new privileges, ...): systemd's own score of
# it must stay at most 2.0 ("OK"), alone and with the drop-in of agents that
# run upgrades. --offline needs no running systemd, and reads the drop-ins
# of NAME.service.d beside the unit it is given: each is scored from a
# directory of its own, the unit alone and the unit with its drop-in. (The
# score weighs capabilities, system calls and namespaces, not which paths
# are writable: hack/imagecheck checks those.)
step "systemd-analyze security of the agent's unit, alone and with its drop-in for upgrades"
command -v systemd-analyze >/dev/null || {
	echo "systemd-analyze (Debian's systemd package) is needed to score deploy/kubeadmcfg-agent.service" >&2
	exit 1
}
mkdir -p "${tmp}/unit" "${tmp}/upgrades/kubeadmcfg-agent.service.d"
cp deploy/kubeadmcfg-agent.service "${tmp}/unit/"
cp deploy/kubeadmcfg-agent.service "${tmp}/upgrades/"
cp deploy/kubeadmcfg-agent.service.d/upgrades.conf "${tmp}/upgrades/kubeadmcfg-agent.service.d/"
for unit in unit upgrades; do
	if ! systemd-analyze security --offline=yes --threshold=20 "${tmp}/${unit}/kubeadmcfg-agent.service" >"${tmp}/security" 2>&1; then
		cat "${tmp}/security" >&2
		echo "deploy/kubeadmcfg-agent.service (${unit}) is more exposed than 2.0: harden it back" >&2
		exit 1
	fi
done

step "relative links in README.md, docs/ and deploy/ resolve, and so do the guides the sources cite"
go run ./hack/checklinks

echo "verify: all checks passed" >&2
