# ferry's build, test and verification targets. `make help` lists them.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# kube-apiserver, etcd, kube-scheduler, kube-controller-manager, the kubelet,
# kube-proxy, kubemark and kubectl,
# the Cluster API and CAPO managers, and promtool (deploy/monitoring's rule
# tests), for the test environment, built by `make tools` into cache
# directories outside the repository.
TOOLS_DIR := $(shell hack/tools.sh --dir)
export KUBEBUILDER_ASSETS := $(TOOLS_DIR)
export FERRY_MANAGERS_DIR := $(shell hack/tools.sh --managers-dir)
export FERRY_PROMTOOL_DIR := $(shell hack/tools.sh --promtool-dir)
# golangci-lint (hack/tools/golangci-lint), which `make lint` and `make
# verify` run with .golangci.yml.
GOLANGCI_LINT := $(shell hack/tools.sh --golangci-lint-dir)/golangci-lint
# The checksum database answers 404 for this module of CAPO's graph
# (hack/tools/capi).
export GONOSUMDB := sigs.k8s.io/cluster-api/test

GO_MODULES := . hack/tools/kube-apiserver hack/tools/etcd hack/tools/capi hack/tools/prometheus hack/tools/golangci-lint
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# -count=1: the integration tests talk to servers they start, so a cached
# result would say nothing about this run. -ldflags='-s -w': no DWARF and
# no ELF symbol table in the test binaries, which go test links afresh
# every run (a panic's and the race detector's stacks come from Go's own
# function table, which stays): make test's 36 links took 2m11s instead
# of 2m47s without DWARF, and cmd/reconciler's test binary links on
# about 16 s of CPU instead of 18 without the symbol table too (two links
# each). -vet=off: go test's vet pass runs a subset of the analyzers
# that make lint's govet (in make verify, which CI runs first) runs over
# the same files, -tags openstack included; twice more (make test, make
# test-openstack) it only cost time.
TEST_FLAGS ?= -race -count=1 -timeout 20m -ldflags='-s -w' -vet=off
# The fleet sizes `make bench` migrates (hack/bench).
BENCH_PLANS ?= 100 1000
# The bench runs the reconciler as in a container of BENCH_MEMORY (its Go
# memory limit at 80% of it); empty for no limit.
BENCH_MEMORY ?= 300Mi
# How many runs with a fault `make chaos` makes (besides the undisturbed
# ones): runs 3, 6, 9, … migrate the replace scenario with a kill -9 during a
# cutover drain; runs 5, 11, 17, … migrate the adopt scenario and roll it back
# (spec.rollback.to: none) with a kill -9 of the reconciler or an executor
# replica during the undo; the others migrate the adopt scenario.
CHAOS_RUNS ?= 20
# The number of `make chaos`'s first run: run n takes the scenario and
# fault it has in a batch from 1, so a short batch can take a later run
# (run 11: a rollback, the reconciler killed during the undo).
CHAOS_FROM ?= 1
# Which migration `make demo` shows: adopt, replace, kamaji, or a rollback:
# rollback (adopt rolled back to none after each phase in turn, the world
# compared with how it was each time, once more after the last phase with
# the reconciler killed during the undo and its status compared with the
# undisturbed cycle's, then adopted again and checked),
# rollback-kamaji (kamaji rolled back to none and compared) or
# rollback-replace (replace up to the cutover, rolled back to infrastructure
# under the cutover's promises).
SCENARIO ?= adopt
# Which forge `make demo` and `make chaos` host the plans repository on:
# gitea (a real Gitea, built by `make tools`) or github (the GitHub
# stand-in, for what only GitHub does: its 502/403 rate-limit fault).
FORGE ?= gitea
# How ferry's processes run in `make demo`, `make chaos` and `make bench`:
# single (one `reconciler run` with its embedded NATS server and executors
# in process, as a newcomer runs it; chaos runs its NATS server apart and
# two executor replicas) or cluster (a three-node NATS cluster with
# replicated streams, two `reconciler run --executors=false` replicas under
# leader election and three `reconciler executor` replicas; the bench runs
# single and cluster in one invocation).
LAYOUT ?= single
# How long `make fuzz` fuzzes the plan decoder.
FUZZTIME ?= 30s

.PHONY: help
help: ## Show this list of targets.
	@echo "Usage: make <target>"
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z_-]+:.*## / { printf "  %-15s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

# Every build of a program (not of a test) is static and path-free, as
# the image's is: one configuration of the compiler for all of them, so
# that a cold cache compiles ferry's dependencies twice (this and the race
# detector's for the tests), not three times (cgo's, the image's, the race
# detector's: 5 to 10 minutes each on two cores).
GO_BUILD := CGO_ENABLED=0 go build -trimpath
GO_RUN := CGO_ENABLED=0 go run -trimpath

.PHONY: build
build: ## Build bin/reconciler (static).
	$(GO_BUILD) -ldflags "-X main.version=$(VERSION)" -o bin/reconciler ./cmd/reconciler

# The container image `make image` builds; deploy/ refers to it.
IMAGE ?= ghcr.io/ferry-dev/reconciler:dev

.PHONY: image
image: ## Build the container image into bin/reconciler-image.tar without a Docker daemon (tag: IMAGE).
	GOOS=linux $(GO_BUILD) -ldflags "-s -w -X main.version=$(VERSION)" -o bin/linux/reconciler ./cmd/reconciler
	$(GO_RUN) ./hack/image --binary bin/linux/reconciler --tag $(IMAGE) --version $(VERSION) --out bin/reconciler-image.tar

.PHONY: demo
demo: backends build ## Migrate a cluster end to end on this machine: SCENARIO=adopt (default, seed 000), replace (seed 003 + a seed 002 gateway), kamaji (seed 004), rollback (seed 000 rolled back after each phase in turn and compared with how it was, once more with the reconciler killed during the undo, then adopted again), rollback-kamaji (seed 004 adopted, rolled back, compared) or rollback-replace (seed 003 up to the cutover, rolled back to infrastructure); starts local OpenStack when needed.
	hack/demo.sh --scenario $(SCENARIO) --forge $(FORGE) --layout $(LAYOUT)

.PHONY: chaos
chaos: backends build ## Inject a fault into each of CHAOS_RUNS (default 20) migrations on the real backends: every third run a replace (seed 003) run disturbed mid-drain, runs 5, 11, 17, … a seed 000 rollback killed mid-undo, the others seed 000; compare end states with undisturbed runs'.
	hack/demo.sh --chaos $(CHAOS_RUNS) --chaos-from $(CHAOS_FROM) --forge $(FORGE) --layout $(LAYOUT)

.PHONY: test
test: tools ## Run unit and integration tests against real backends (builds tools when missing).
	go test $(TEST_FLAGS) ./...

# One package at a time (-p 1): the OpenStack services, API servers,
# managers and real nodes keep two cores busy; two packages at once took
# cmd/reconciler past its 20-minute timeout and TestGatewayOpenStack's
# waits past theirs. -timeout 30m: cmd/reconciler's three migrations take
# about 16 minutes, and a busier machine took them past 20 (each test's
# own deadline fails it with its logs first).
.PHONY: test-openstack
test-openstack: backends ## Start local OpenStack (hack/openstack-up.sh) and run the tests that need it.
	hack/openstack-up.sh
	go test $(TEST_FLAGS) -timeout 30m -p 1 -tags openstack -run OpenStack ./internal/openstack/... ./internal/observer/... ./internal/executor/... ./cmd/...

.PHONY: bench
bench: tools ## Benchmarks: a step's round trip over NATS and a status file's encoding, then the fleet benchmark with its kubectl baseline for each of BENCH_PLANS (default 100 and 1000 plans), in a container of BENCH_MEMORY (300Mi).
	hack/kubectl.sh
	go test -run '^$$' -bench . -benchtime 2000x ./internal/events/ ./internal/status/
	kubectl=$$(hack/kubectl.sh --path); \
	for n in $(BENCH_PLANS); do $(GO_RUN) ./hack/bench --plans $$n --layout $(LAYOUT) --kubectl "$$kubectl" --container-memory "$(BENCH_MEMORY)" --out bin/bench-$$n.json; done

.PHONY: fuzz
fuzz: ## Fuzz the plan decoder for FUZZTIME (default 30s).
	go test ./internal/planfile -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME)

.PHONY: generate
generate: ## Regenerate the plan JSON Schema from the Go types.
	$(GO_RUN) ./hack/schemagen

# The tools a migration runs against (the Kubernetes programs, the
# managers, Gitea), without promtool and golangci-lint, which make
# test-openstack, demo and chaos do not need.
.PHONY: backends
backends:
	@hack/tools.sh kube managers gitea

.PHONY: tools
tools: ## Build kube-apiserver, etcd, kube-scheduler, kube-controller-manager, the kubelet, kube-proxy, kubemark, kubectl, the CAPI and CAPO managers, Gitea and promtool for the test environment, and golangci-lint (idempotent).
	hack/tools.sh

.PHONY: lint
# golangci-lint type-checks from the export data that `go list -export`
# compiles: in the programs' configuration (GO_BUILD's), it reuses what
# make build and the tools compiled instead of compiling every dependency
# once more for itself.
lint: ## Run golangci-lint with .golangci.yml, -tags openstack included (builds only it when missing).
	hack/tools.sh golangci-lint
	CGO_ENABLED=0 GOFLAGS=-trimpath $(GOLANGCI_LINT) run ./...

# verify regenerates first, so that a schema that is out of date with the
# Go types shows up as a dirty tree.
.PHONY: verify
# No `go vet ./...`: golangci-lint's govet runs go vet's analyzers (its
# default set is cmd/vet's), on the openstack-tagged files too, and a
# separate go vet cost 7m18s from an empty build cache.
verify: generate ## Check formatting, golangci-lint (go vet's analyzers among its linters), tidy go.mod files, the Kubernetes programs' versions of what they share with ferry (hack/tools.sh check-shared), shell scripts, generated files, and a clean tree.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [[ -n $$unformatted ]]; then echo "gofmt: run 'gofmt -w' on:"; echo "$$unformatted"; exit 1; fi
	@$(MAKE) --no-print-directory lint
	@for m in $(GO_MODULES); do (cd $$m && go mod tidy); done
	@hack/tools.sh check-shared
	@command -v shellcheck >/dev/null || { echo "shellcheck not found: apt-get install shellcheck"; exit 1; }
	shellcheck hack/*.sh .ci/run
	@dirty=$$(git status --porcelain); \
	if [[ -n $$dirty ]]; then echo "the tree is dirty (uncommitted changes, go mod tidy changed a go.mod, or make generate changed a generated file):"; echo "$$dirty"; git diff --stat; exit 1; fi

.PHONY: clean
clean: ## Remove build output (keeps the tools cache: see hack/tools.sh --dir).
	rm -rf bin
