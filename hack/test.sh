#!/usr/bin/env bash
# Runs every test: unit tests and the e2e suite, which starts a real etcd and
# kube-apiserver on loopback and drives the built plugin through kubectl.
# The e2e suite never skips: a missing kubectl or control plane fails it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export KUBEADMCFG_E2E=required
# An etcd snapshot keeps a tenth of its filesystem free; the tests must not
# depend on how full this machine's disk is (docs/development.md).
export KUBEADMCFG_TEST_DISK_RESERVE_PERCENT=0
# The e2e suite took 24 to 32 minutes on a 2-core machine (its tests in
# namespaces of their own run two at a time); the timeout is twice that and
# more, so that a slow machine fails on a test's own bounds first.
go test -count=1 -timeout 65m ./... "$@"
# The alerting rules, with Prometheus's own rule parser and evaluation: a
# module of its own (hack/tools/promrules), apart from the plugin's go.mod.
(cd hack/tools/promrules && go test -count=1 -timeout 10m ./...)
