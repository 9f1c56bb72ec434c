# Targets stay short; anything longer lives in hack/*.sh.
BIN      := _output/bin/kubectl-kubeadmcfg
PREFIX   ?= $(HOME)/.local/bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/version.Version=$(VERSION)

# Every target compiles as the release does (no cgo, no local paths in the
# binaries): one compile of a package serves vet, lint, the budgets, the
# tests and the binaries the tests build, and test binaries link with Go's
# own linker rather than the system's.
export CGO_ENABLED := 0
export GOFLAGS := -trimpath $(GOFLAGS)

.PHONY: build install test test-unit testbin demo demo-down bench lint verify docs generate dist fuzz difffuzz clean

build: ## Build the plugin binary into _output/bin
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kubectl-kubeadmcfg

install: build ## Put the plugin and its completion helper where kubectl finds them (PREFIX, default ~/.local/bin)
	install -d $(PREFIX) && install -m 0755 $(BIN) kubectl_complete-kubeadmcfg $(PREFIX)/

testbin: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubeadm of 1.37 and of 1.36 (v1beta3, upgrades), and nodebox, for the tests (first run only)
	hack/testbin.sh

test: testbin ## Unit and e2e tests against the real control plane
	hack/test.sh

test-unit: ## Unit tests only (no control plane)
	go test -short ./...

demo: build testbin ## Run the plugin against a local control plane (left running), then a rollout over three nodes and an upgrade of three by their agents (stopped)
	hack/demo.sh

demo-down: ## Stop the control plane the demo leaves running
	go run ./hack/localcluster down --dir _output/demo

bench: testbin ## Contention, speed, rollout and upgrade benchmarks on a real control plane (prints tables)
	go run ./hack/bench contention
	go run ./hack/bench speed
	go run ./hack/bench rollout
	go run ./hack/bench upgrade

lint: ## golangci-lint (version pinned in hack/tools/lint)
	$$(hack/tools.sh golangci-lint) run ./...

verify: ## gofmt, vet, lint, tidy go.mod files, generated code, plugin dependencies, krew manifest, command reference
	hack/verify.sh

docs: ## Regenerate the command reference in docs/commands
	rm -rf docs/commands && cd hack/tools/docs && go run . ../../../docs/commands

generate: ## Regenerate the component config mirrors from the k8s.io/kubelet and k8s.io/kube-proxy types in go.mod
	go run ./hack/gen-componentconfig

dist: ## Release archives for every platform and the agent's image (OCI tarball), offline snapshot (goreleaser, ko pinned in hack/tools/release)
	hack/dist.sh

fuzz: ## Run every fuzz target for FUZZTIME each (default 30s); not part of make test
	hack/fuzz.sh

difffuzz: testbin ## Mutate corpus files and compare validate's verdict with the real kubeadm's (N cases, SEED); not part of make test
	go run ./hack/difffuzz -n $(or $(N),400) -seed $(or $(SEED),1)

clean: demo-down ## Remove build output (keeps the built control-plane binaries)
	rm -rf _output/bin _output/demo _output/demo-ha _output/demo-upgrade dist
