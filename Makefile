# Karpless: the only entry points people need.
#   make demo   the whole loop on a laptop (local API server + AWS emulator)
#   make test   vet, unit and integration tests, cdk synth
# Everything the targets need is installed by the targets themselves.

SHELL        := /usr/bin/env bash
GO           ?= go
export GOFLAGS := -buildvcs=false
export CDK_DISABLE_CLI_TELEMETRY := true
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

KUBE_BIN     := .cache/kube/bin
# Test packages run at once, beside the four halves of the provisioning
# and disruption suites (SHARDS). With the lifecycle-parity tests in, 4
# saturated two cores (load average 15) and timing-sensitive scenarios
# failed; 3 leaves them room.
TEST_PARALLEL ?= 3
# One per folder of functions/ (their names are registered in functions/doc.go).
FUNCTIONS    := $(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go))
# The CDK CLI must read cloud-assembly schema 54 (aws-cdk-lib 2.270); npm's
# "latest" tag is an older major that cannot, so the version is pinned.
CDK_VERSION  ?= 2.1148.1
CDK_DIR      := .tools/cdk
CDK          := $(CDK_DIR)/node_modules/.bin/cdk
# The browser tests (the demo report's layout) drive Debian's chromium with
# playwright-core, pinned in .tools/playwright (no browser download: the
# tests hand it the system's chromium).
PLAYWRIGHT_DIR := .tools/playwright
PLAYWRIGHT   := $(PLAYWRIGHT_DIR)/node_modules/playwright-core/package.json

CLUSTER_NAME ?=
CDK_ARGS     ?=
# Identity of the CRDs the bootstrap embeds; a change makes CloudFormation re-run it.
CRD_HASH     := $(shell cat shared/apis/crds/*.yaml 2>/dev/null | sha256sum | cut -c1-16)

.PHONY: all cli demo test test-checks browser test-kills test-cases test-scenarios test-loaded soak-mutants conformance conformance-doc checks soak unit integration vet kube generate check-generated lambdas cdk-cli synth synth-nag deploy destroy cdk-pin bench clean

all: test

## kube: build etcd, kube-apiserver, kube-scheduler, kube-controller-manager
## and kubectl from source once (~15 min cold on 2 cores, with each phase and
## its estimate printed) into the user's cache (kubebuild.Dir:
## ~/.cache/karpless/kube/<version>), which every checkout and the installed
## CLI share; .cache/kube/bin becomes a link to it. hack/kube checks every
## binary itself (a warm run is instant), so make never trusts a stamp alone.
kube:
	$(GO) run ./hack/kube -link $(CURDIR)/$(KUBE_BIN)

## cli: build/karpless, the operator CLI, with its version and commit stamped
## (GOFLAGS has -buildvcs=false, so the build info has no commit) and without
## what it does not need: symbols and DWARF (-s -w) and file paths
## (-trimpath). docs/cli.md, "The binary", has the sizes.
CLI_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
CLI_COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
cli: FORCE
	@mkdir -p build
	$(GO) build -trimpath -ldflags '-s -w -X main.version=$(CLI_VERSION) -X main.commit=$(CLI_COMMIT)' -o build/karpless ./cmd/karpless

## demo: the whole loop on this machine, no AWS account and no Docker:
## make demo [SCENARIO=path/to/scenario.yaml]. The last line is the summary.
demo: kube
	$(GO) run ./cmd/karpless demo $(if $(SCENARIO),--scenario $(SCENARIO))

## soak: the seeded chaos soak, make soak [SEEDS=n HOURS=h FIRST_SEED=s]
## (default seeds 1-20 of 6 virtual hours each, 10-13 minutes of real time
## per seed on 2 cores); each seed gets its own control plane and emulator,
## one after the other. The last line is
## soak: seeds=<s> virtual-hours=<h> invocations=<i> kills=<k> faults=<f> violations=<v>
## `make test` runs a fixed CI subset (shared/local/soak TestSoakCI).
SEEDS ?= 20
HOURS ?= 6
FIRST_SEED ?= 1
soak: kube cli
	build/karpless soak --seeds $(SEEDS) --first-seed $(FIRST_SEED) --hours $(HOURS) $(if $(SOAK_DIR),--dir $(SOAK_DIR))

## conformance: the cases of Karpenter v1.14.1's own suites ported as the
## project's tests (conformance.Run), one line per source suite, then
## conformance: passed=P differs=D total=T. Fails when a case fails or
## docs/conformance.md's table is not this run's (conformance-doc writes it).
## The API validation suites (shared/apis/crds) need the local kube-apiserver.
## make test runs the ported cases once, with their packages' other tests,
## and checks the same table (see TEST_ECHO); the shards of the two longest
## packages, which hold no ported case, skip them.
CONFORMANCE_TESTS := Conformance
CONFORMANCE_PKGS = $(sort $(dir $(shell grep -rl --include='*_test.go' 'conformance.Run' shared infra cmd)))
conformance: kube
	@set -o pipefail; KARPLESS_REQUIRE_KUBE=1 $(GO) test $(TEST_BUILD) -count=1 -json -run '$(CONFORMANCE_TESTS)' $(addprefix ./,$(CONFORMANCE_PKGS)) | $(GO) run ./hack/conformance -doc docs/conformance.md
conformance-doc:
	@set -o pipefail; KARPLESS_REQUIRE_KUBE=1 $(GO) test $(TEST_BUILD) -count=1 -json -run '$(CONFORMANCE_TESTS)' $(addprefix ./,$(CONFORMANCE_PKGS)) | $(GO) run ./hack/conformance -doc docs/conformance.md -write

## soak-mutants: the soak's mutation check: each fault planted in the
## functions' code (shared/local/soak/mutants_test.go, built with
## go build -overlay, the source untouched) must be caught by its invariant
## within the CI seeds. CI runs it after make test.
soak-mutants: kube
	KARPLESS_SOAK_MUTANTS=1 KARPLESS_REQUIRE_KUBE=1 $(GO) test $(TEST_BUILD) -count=1 -timeout 85m -run TestMutantsCaught -v ./$(SOAK)

## generate: deepcopy and CRD manifests from shared/apis (controller-gen is
## pinned in go.mod's tool block; hack/crdvalidation adds the rules its markers
## cannot express, as Karpenter's hack/validation does), and the catalog from
## ../shared when present.
generate:
	$(GO) tool controller-gen object paths=./shared/apis/... crd output:crd:artifacts:config=shared/apis/crds
	$(GO) run ./hack/crdvalidation shared/apis/crds
	@if [ -f ../shared/catalog/ec2-instance-types.json ]; then cd shared/core/catalog && $(GO) run ./internal/gen -in ../../../../shared/catalog/ec2-instance-types.json; fi

## check-generated: fail if the committed CRDs or deepcopy are stale.
check-generated:
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(GO) tool controller-gen crd output:crd:artifacts:config=$$tmp paths=./shared/apis/... && \
	$(GO) run ./hack/crdvalidation $$tmp && \
	for f in $$tmp/*.yaml; do diff -q $$f shared/apis/crds/$$(basename $$f) >/dev/null || { echo "shared/apis/crds/$$(basename $$f) is stale: run make generate"; exit 1; }; done; \
	echo "generated CRDs are up to date"

## checks: vet, the generated-files check and cdk synth, side by side (none
## of them is timing-sensitive; alone, each held the second core idle).
checks:
	@$(MAKE) --no-print-directory -j3 vet check-generated synth conformance
# make test's own checks: the ported cases it runs with the packages' tests.
test-checks:
	@$(MAKE) --no-print-directory -j3 vet check-generated synth

vet:
	$(GO) vet ./...
	@out=$$("$$($(GO) env GOROOT)/bin/gofmt" -l functions events shared infra cmd bench hack); \
	if [ -n "$$out" ]; then echo "not gofmt-ed (run gofmt -w):"; echo "$$out"; exit 1; fi

## test-kills: the kill tests with every kill point (KARPLESS_KILLS=all):
## make test kills each enumeration at the first gap of each kind of write
## and side, within its budget; CI (.ci/run) then runs every gap here.
KILL_PKGS := ./shared/ticks/provision ./shared/ticks/disrupt ./shared/ticks/interrupt ./shared/ticks/termination ./shared/ticks/garbagecollection ./shared/ticks/bootstrap
test-kills: kube
	KARPLESS_KILLS=all KARPLESS_REQUIRE_KUBE=1 GOGC=$${GOGC:-200} $(GO) test $(TEST_BUILD) $(TEST_FLAGS) -timeout 60m -run 'Kill|Crash' $(KILL_PKGS)

## test-cases: every case of the whole-world ports of Karpenter's e2e
## suites (make test runs a sample of them: deploy.SampleCases).
test-cases: kube
	KARPLESS_CASES=all KARPLESS_REQUIRE_KUBE=1 GOGC=$${GOGC:-200} $(GO) test $(TEST_BUILD) $(TEST_FLAGS) -timeout 60m -run 'E2E' ./shared/ticks/disrupt ./shared/ticks/provision

## test-scenarios: the two whole-world scenarios make test leaves out, side
## by side: the demo's bundled scenario (shared/local/demo
## TestDefaultScenario, make demo's own run with its summary checked) and
## the soak's CI seeds with no fault planted (shared/local/soak TestSoakCI,
## the seeds soak-mutants plants its faults in). CI runs it after make test.
SCENARIO_TESTS := ^(TestDefaultScenario|TestSoakCI)$$
test-scenarios: kube browser
	@export KARPLESS_REQUIRE_KUBE=1 KARPLESS_REQUIRE_BROWSER=1 GOGC=$${GOGC:-200}; \
	$(GO) test $(TEST_BUILD) $(TEST_FLAGS) -run '$(SCENARIO_TESTS)' ./shared/local/demo ./$(SOAK)

## test-loaded: make test beside two CPU-bound processes (a busy laptop's
## share of two cores); the last line is test-loaded: passed|failed in <s> s.
test-loaded:
	hack/test-loaded.sh

## test: the whole suite (with bench/bound's checks of the bench's lower
## bound, a module of its own) but its two longest scenarios (test-scenarios:
## the demo's and the soak's CI seeds, 555 of its 2,490 CPU-seconds on
## 2026-11-28); CI then runs test-scenarios, soak-mutants, test-cases and
## test-kills. The kill tests kill at the first gap of each kind of write
## (test-kills at every gap). Integration tests need the control plane; with
## KARPLESS_REQUIRE_KUBE=1 a missing one is a failure, never a silent skip.
## The longest suites are named first: go test starts packages in the order
## given, so they no longer start last and set the wall time alone. The two
## longest packages run as several processes each (each with its own control
## plane) beside the rest: one per SHARDS entry naming the package (the tests
## its pattern matches) and one for the package's other tests, chosen so the
## parts take about as long (2026-11-29, alone: disruption 368 s, 257 s and
## 254 s of tests, provisioning 297 s and 387 s). The checks (vet, the
## generated-files check, cdk synth) run first, side by side: vet compiles
## every package, so timing-sensitive scenarios (the demo's interruption
## deadline) do not race a cold cache's compiles (beside the tests, the demo
## missed its deadline in a run that compiled). The Go processes of the run
## (compiler, test binaries, the local control planes) collect garbage half
## as often as by default (GOGC=200, unless set): two cores are short of
## CPU, not of memory. Tests that measure a heap set their own collector.
## The local control planes' processes run on one thread each
## (KARPLESS_KUBE_GOMAXPROCS=1, unless set): about nine run at once.
SLOW_TESTS := ./shared/ticks/interrupt ./shared/ticks/termination ./shared/ticks/bootstrap
SHARDS := shared/ticks/provision='^Test(Killed|Static|Buffer|E2ESchedulingLabels)' \
	shared/ticks/disrupt='^Test(Crash|Kill|Buffer|Abandon|Stale|ConsolidationInto|ConsolidationUses|PDBThatAllows|E2EBudgetOfZero)' \
	shared/ticks/disrupt='^Test(E2EDriftNodeClass|GarbageCollection|DoNotDisruptPodBlocks|MultiNodeConsolidation)'
## TESTBIN: where make test keeps its test binaries between runs (go test
## -o): the go command links a binary again only when its build ID changed,
## and linking was a fifth of a warm run's CPU (109 links, 321 CPU-seconds,
## on 2026-11-29). A binary is named after the last element of its package
## path, so each process of the run has a directory of its own, and a name
## taken twice in the main list goes to a second one.
TESTBIN := $(CURDIR)/.cache/testbin
SOAK := shared/local/soak
TEST_FLAGS := -count=1 -timeout 25m
## TEST_BUILD: how the test binaries are built. Linking them is a fifth of
## make test's CPU: 66 binaries took 378 CPU-s to link, 244 without DWARF
## (-ldflags=-w; a panic's stack trace still names files and lines, from
## the pcln table, measured 2026-11-28). go test's own vet pass is off: the
## checks run go vet on every package first (vet).
TEST_BUILD := -vet=off -ldflags=-w
## The packages of the ported Karpenter cases run once: their tests and the
## cases together, as go test -json through hack/conformance, which checks
## docs/conformance.md as make conformance does and prints the run as go
## test would (every test's output with -v in TEST_FLAGS). Run separately,
## the checks linked 23 test binaries and started 5 control planes again.
TEST_ECHO = $(if $(filter -v,$(TEST_FLAGS)),all,failures)
test: kube browser test-checks
	@export KARPLESS_REQUIRE_KUBE=1 KARPLESS_REQUIRE_BROWSER=1 CDK_VALIDATION=false GOGC=$${GOGC:-200} KARPLESS_KUBE_GOMAXPROCS=$${KARPLESS_KUBE_GOMAXPROCS:-1}; \
	logs=$$(mktemp -d); trap 'rm -rf $$logs' EXIT; pids=(); skip=(); names=(); declare -A rest; n=0; \
	for shard in $(SHARDS); do \
		pkg=$${shard%%=*}; re=$${shard#*=}; \
		$(GO) test $(TEST_BUILD) $(TEST_FLAGS) -o $(TESTBIN)/$$n/ -run "$$re" -skip '$(CONFORMANCE_TESTS)' ./$$pkg > $$logs/$$n 2>&1 & pids+=($$!); \
		names+=("$$pkg, tests matching $$re:"); rest[$$pkg]="$${rest[$$pkg]:+$${rest[$$pkg]}|}$$re"; n=$$((n+1)); \
	done; \
	for pkg in "$${!rest[@]}"; do \
		skip+=("github.com/karpless/karpless/$$pkg"); \
		$(GO) test $(TEST_BUILD) $(TEST_FLAGS) -o $(TESTBIN)/$$n/ -skip "$${rest[$$pkg]}|$(CONFORMANCE_TESTS)" ./$$pkg > $$logs/$$n 2>&1 & pids+=($$!); \
		names+=("$$pkg, the other tests:"); n=$$((n+1)); \
	done; \
	(cd bench && $(GO) test $(TEST_BUILD) $(TEST_FLAGS) -o $(TESTBIN)/bench/ ./bound) > $$logs/bench 2>&1 & pids+=($$!); \
	tested=$$($(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' $(SLOW_TESTS) ./... | grep -vxF "$${skip[@]/#/-e}" | awk '!seen[$$0]++'); \
	(set -o pipefail; ( \
		$(GO) test $(TEST_BUILD) $(TEST_FLAGS) -o $(TESTBIN)/main/ -json -skip '$(SCENARIO_TESTS)' -p $(TEST_PARALLEL) $$(echo "$$tested" | awk -F/ '!seen[$$NF]++'); rc=$$?; \
		again=$$(echo "$$tested" | awk -F/ 'seen[$$NF]++'); \
		if [ -n "$$again" ]; then $(GO) test $(TEST_BUILD) $(TEST_FLAGS) -o $(TESTBIN)/again/ -json -skip '$(SCENARIO_TESTS)' $$again || rc=1; fi; exit $$rc \
		) | $(GO) run ./hack/conformance -doc docs/conformance.md -echo $(TEST_ECHO)) & main=$$!; \
	rc=0; for pid in "$${pids[@]}"; do wait $$pid || rc=1; done; \
	wait $$main || rc=1; \
	for i in "$${!names[@]}"; do echo "$${names[$$i]}"; cat $$logs/$$i; done; \
	echo "bench/bound (the bench's lower bound, its own module):"; cat $$logs/bench; \
	exit $$rc

unit:
	$(GO) test -short ./...

## lambdas: the function binaries for provided.al2023 on arm64.
lambdas: $(foreach f,$(FUNCTIONS),build/$(f)/bootstrap)
build/%/bootstrap: FORCE
	@mkdir -p $(@D)
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o $@ ./functions/$*
FORCE:

## browser: Debian's chromium (apt-get, when missing) and the pinned
## playwright-core that drives it headless. With KARPLESS_REQUIRE_BROWSER=1
## (make test) a browser test fails when either is missing, never skips.
browser: $(PLAYWRIGHT)
	@command -v chromium >/dev/null || { sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
$(PLAYWRIGHT): $(PLAYWRIGHT_DIR)/package-lock.json
	cd $(PLAYWRIGHT_DIR) && npm ci --no-audit --no-fund
	touch $@

## cdk-cli: the pinned CDK CLI in a dot-folder Go's ./... skips.
cdk-cli: $(CDK)
$(CDK): $(CDK_DIR)/package-lock.json
	cd $(CDK_DIR) && npm ci --no-audit --no-fund
	touch $@

## synth: cdk synth into cdk.out with no AWS credentials.
synth: lambdas $(CDK)
	$(CDK) synth --no-notices --quiet -c clusterName=karpless-demo -c assetsDir=build -c crdHash=$(CRD_HASH)

## synth-nag: synth plus cdk-nag AwsSolutions checks (fails on any unsuppressed finding).
synth-nag: lambdas $(CDK)
	$(CDK) synth --no-notices --quiet -c clusterName=karpless-demo -c assetsDir=build -c crdHash=$(CRD_HASH) -c nag=true

## deploy: make deploy CLUSTER_NAME=<eks cluster> [CDK_ARGS='-c key=value ...']
deploy: lambdas $(CDK)
	@test -n "$(CLUSTER_NAME)" || { echo "usage: make deploy CLUSTER_NAME=<eks cluster> [CDK_ARGS='-c key=value ...']"; exit 2; }
	$(CDK) deploy --no-notices -c clusterName=$(CLUSTER_NAME) -c assetsDir=build -c crdHash=$(CRD_HASH) $(CDK_ARGS)

## destroy: the app is synthesized again, so it needs the built functions and the deploy's context.
destroy: lambdas $(CDK)
	@test -n "$(CLUSTER_NAME)" || { echo "usage: make destroy CLUSTER_NAME=<eks cluster> [CDK_ARGS=...]"; exit 2; }
	$(CDK) destroy --no-notices -c clusterName=$(CLUSTER_NAME) -c assetsDir=build -c crdHash=$(CRD_HASH) $(CDK_ARGS)

## cdk-pin: re-pin the CLI, e.g. make cdk-pin CDK_VERSION=2.x.y
cdk-pin:
	mkdir -p $(CDK_DIR) && cd $(CDK_DIR) && { [ -f package.json ] || echo '{"private":true}' > package.json; } \
	  && npm install --no-audit --no-fund --save-exact aws-cdk@$(CDK_VERSION)

## bench: Karpless vs Karpenter v1.14.1's scheduler in its production
## configuration (1 worker, 1-minute solve timeout), on EKS DaemonSets, two
## NodePools and four pod mixes, 3 runs per side (docs/bench.md). Karpenter
## needs 20-30 s of CPU per 1,000 pods and 7-165 s per 5,000, so the whole
## run is about 3 h of CPU (far more wall time on a busy machine); a subset:
## make bench BENCH_ARGS='-cases getting-started -mixes karpenter -sizes 1000,5000'
## (about 10 min of CPU). The last line is
## speedup-vs-karpenter=<smallest at 5,000 pods> cost-ratio=<largest>
## gap=<largest plan / LP lower bound> (bench/bound; docs/bench.md).
bench: kube
	$(GO) test ./shared/core/scheduling -run '^$$' -bench Solve -benchmem -cpu 1 -benchtime 3x
	KARPLESS_REQUIRE_KUBE=1 $(GO) test ./shared/kube/snapshot -run '^$$' -bench SnapshotAtScale -benchtime 3x
	cd bench && $(GO) run . $(BENCH_ARGS)

clean:
	rm -rf build cdk.out demo-report .cache/testbin
