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
# The e2e suite's tests with control planes of their own wait on component
# restarts far more than they compute: three run at a time (-parallel 3),
# two while the tests on the shared cluster run (internal/e2e/netns_test.go).
# The suite took 13 to 14 minutes on a 2-core machine (2026-12-03); the
# timeout is three times that, so that a slow machine fails on a test's own
# bounds first.
go test -count=1 -timeout 45m -parallel 3 ./... "$@"
# The alerting rules, with Prometheus's own rule parser and evaluation: a
# module of its own (hack/tools/promrules), apart from the plugin's go.mod.
(cd hack/tools/promrules && go test -count=1 -timeout 10m ./...)
