#!/usr/bin/env bash
# Runs every test: unit tests and the e2e suite, which starts a real etcd and
# kube-apiserver on loopback and drives the built plugin through kubectl.
# The e2e suite never skips: a missing kubectl or control plane fails it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export KUBEADMCFG_E2E=required
go test -count=1 -timeout 30m ./... "$@"
