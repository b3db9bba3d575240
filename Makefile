# ferry's build, test and verification targets. `make help` lists them.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# kube-apiserver and etcd for the test environment, built by `make tools`
# into a cache directory outside the repository.
TOOLS_DIR := $(shell hack/tools.sh --dir)
export KUBEBUILDER_ASSETS := $(TOOLS_DIR)

GO_MODULES := . hack/tools/kube-apiserver hack/tools/etcd
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# -count=1: the integration tests talk to servers they start, so a cached
# result would say nothing about this run.
TEST_FLAGS ?= -race -count=1 -timeout 20m

.PHONY: help
help: ## Show this list of targets.
	@echo "Usage: make <target>"
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z_-]+:.*## / { printf "  %-8s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/reconciler.
	go build -ldflags "-X main.version=$(VERSION)" -o bin/reconciler ./cmd/reconciler

.PHONY: test
test: tools ## Run unit and integration tests against real backends (builds tools when missing).
	go test $(TEST_FLAGS) ./...

.PHONY: tools
tools: ## Build kube-apiserver and etcd for the test environment (idempotent).
	hack/tools.sh

.PHONY: verify
verify: ## Check formatting, go vet, tidy go.mod files, shell scripts, and a clean tree.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [[ -n $$unformatted ]]; then echo "gofmt: run 'gofmt -w' on:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	@for m in $(GO_MODULES); do (cd $$m && go mod tidy); done
	@command -v shellcheck >/dev/null || { echo "shellcheck not found: apt-get install shellcheck"; exit 1; }
	shellcheck hack/*.sh .ci/run
	@dirty=$$(git status --porcelain); \
	if [[ -n $$dirty ]]; then echo "the tree is dirty (uncommitted changes, or go mod tidy changed a go.mod):"; echo "$$dirty"; git diff --stat; exit 1; fi

.PHONY: clean
clean: ## Remove build output (keeps the tools cache: see hack/tools.sh --dir).
	rm -rf bin
