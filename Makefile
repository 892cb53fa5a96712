# chatguard developer entry points. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO          ?= go
STACK_BIN   := bin/stack
STATE_DIR   := .stack
# Extra flags for the stack, e.g. make stack STACK_FLAGS="--rooms 500".
STACK_FLAGS ?=
# How long stack-up waits for every service to answer.
STACK_WAIT  ?= 3m
# TRACES=1: the stack also runs Jaeger as the local trace store and points
# the binaries at it (make stack-up TRACES=1; docs/tracing.md). Jaeger is
# built from deploy/local/jaeger, a module of its own outside go.work, so
# its requirements reach no workspace module, go.sum or govulncheck.
TRACES      ?=
JAEGER_BIN  := bin/jaeger
ifeq ($(TRACES),1)
override STACK_FLAGS += --jaeger $(JAEGER_BIN)
STACK_NEEDS := $(JAEGER_BIN)
endif
TEST_FLAGS  ?= -race -count=1 -p 2 -timeout 20m
# The tests' output as plain go test prints it, then a table of each
# package's time and tests run (TEST_SUMMARY_FLAGS=-v: every test's output);
# it fails when a package failed, as go test would.
TEST_SUMMARY_FLAGS ?=
TEST_SUMMARY = $(GO) run ./deploy/local/cmd/testsummary $(TEST_SUMMARY_FLAGS)
BINARIES    := batch worker consumer console trigger

# Every module of the workspace (go.work): the production module and
# deploy/local, each as a ./dir/... pattern. `./...` alone names only the
# root module's packages, so every target below goes through PKGS.
MODULE_DIRS := $(shell $(GO) list -m -f '{{.Dir}}' 2>/dev/null)
PKGS        := $(sort $(foreach d,$(MODULE_DIRS),$(if $(filter $(CURDIR),$(d)),./...,./$(patsubst $(CURDIR)/%,%,$(d))/...)))
ifeq ($(strip $(PKGS)),)
PKGS        := ./... ./deploy/k8s/... ./deploy/local/...
endif
# deploy/k8s's tests run from test-deploy without -race (they check files
# and an image, not concurrency, and the race build of Kustomize and the
# Kubernetes types costs minutes); build, vet and the linters cover it.
TEST_PKGS   := $(filter-out ./deploy/k8s/...,$(PKGS))

# Linters, pinned and run with `go run pkg@version` (nothing to install).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOVULNCHECK := golang.org/x/vuln/cmd/govulncheck@v1.9.0
# The Go vulnerability database, pinned too: these machines cannot reach
# vuln.go.dev, so it is built once into .cache from the OSV files of the
# golang.org/x/vulndb module (bump VULNDB_VERSION for newer entries).
# GOVULNDB=https://vuln.go.dev uses the live one where it can be reached.
VULNDB_VERSION := v0.0.0-20261105234957-e22db6528018
VULNDB_DIR     := .cache/vulndb/$(VULNDB_VERSION)
GOVULNDB       ?= file://$(CURDIR)/$(VULNDB_DIR)

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: ## install Node 22 and fauxqs into .cache (idempotent)
	@deploy/local/scripts/install-deps.sh >/dev/null

.PHONY: $(STACK_BIN)
$(STACK_BIN):
	@$(GO) build -o $(STACK_BIN) ./deploy/local/cmd/stack

.PHONY: stack
stack: deps $(STACK_BIN) $(STACK_NEEDS) ## run the local stack in the foreground (Ctrl-C stops it)
	$(STACK_BIN) up $(STACK_FLAGS)

.PHONY: stack-up
stack-up: deps $(STACK_BIN) $(STACK_NEEDS) ## start the local stack in the background and wait until it is ready (TRACES=1: with Jaeger)
	@mkdir -p $(STATE_DIR)
	@if $(STACK_BIN) status >/dev/null 2>&1; then $(STACK_BIN) status; exit 0; fi; \
	setsid $(STACK_BIN) up $(STACK_FLAGS) >$(STATE_DIR)/stack.log 2>&1 </dev/null & pid=$$!; \
	if ! $(STACK_BIN) wait --pid $$pid --timeout $(STACK_WAIT); then \
		echo "--- $(STATE_DIR)/stack.log"; cat $(STATE_DIR)/stack.log; \
		echo "--- $(STATE_DIR)/fauxqs.log"; tail -n 50 $(STATE_DIR)/fauxqs.log 2>/dev/null; \
		kill $$pid 2>/dev/null; exit 1; \
	fi

# The first build compiles Jaeger and its collector (minutes); later ones
# come from the build cache. GOWORK=off: the module is not in the workspace.
.PHONY: $(JAEGER_BIN)
$(JAEGER_BIN):
	@cd deploy/local/jaeger && GOWORK=off $(GO) build -o $(CURDIR)/$(JAEGER_BIN) github.com/jaegertracing/jaeger/cmd/jaeger

.PHONY: test-traces
test-traces: $(JAEGER_BIN) ## start Jaeger as the stack does, export a span over OTLP as the binaries do and read it back from the query API (not in make test: builds Jaeger)
	CHATGUARD_JAEGER_BIN=$(CURDIR)/$(JAEGER_BIN) $(GO) test -count=1 -tags traces -run TestJaeger ./deploy/local/stack/

.PHONY: stack-down
stack-down: $(STACK_BIN) ## stop the background stack and wait until every process is gone
	@$(STACK_BIN) down

.PHONY: stack-status
stack-status: $(STACK_BIN) ## say whether a stack is running and ready
	@$(STACK_BIN) status

.PHONY: test
test: deps $(STACK_BIN) ## run every test of every workspace module, then print each package's time and count of tests run (deploy/local/cmd/testsummary); uses the running stack, or starts one for the run and stops it after
	@if $(STACK_BIN) status >/dev/null 2>&1; then \
		$(GO) test -json $(TEST_FLAGS) $(TEST_PKGS) | $(TEST_SUMMARY); \
	else \
		$(MAKE) --no-print-directory stack-up || exit 1; \
		rc=0; $(GO) test -json $(TEST_FLAGS) $(TEST_PKGS) | $(TEST_SUMMARY) || rc=$$?; \
		$(MAKE) --no-print-directory stack-down || rc=1; \
		exit $$rc; \
	fi

.PHONY: test-integration
test-integration: ## run only the integration suite against the running stack
	$(GO) test $(TEST_FLAGS) ./internal/integration/...

.PHONY: docs
docs: ## regenerate the flag tables of docs/configuration/ (a page per binary) from every binary's and subcommand's --help=markdown
	@$(GO) run ./cmd/internal/cli/cmd/flagdocs

.PHONY: vet
vet: ## go vet every package of every workspace module
	$(GO) vet $(PKGS)

.PHONY: fmt-check
fmt-check: ## fail when a Go file needs gofmt
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: staticcheck
staticcheck: ## staticcheck (pinned) over every workspace module
	$(GO) run $(STATICCHECK) $(PKGS)

$(VULNDB_DIR)/index/db.json:
	@echo "building the Go vulnerability database $(VULNDB_VERSION) into $(VULNDB_DIR)"
	@osv=$$(cd "$$(mktemp -d)" && GOWORK=off $(GO) mod download -json golang.org/x/vulndb@$(VULNDB_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	test -d "$$osv/data/osv" || { echo "golang.org/x/vulndb@$(VULNDB_VERSION) has no data/osv"; exit 1; }; \
	rm -rf $(VULNDB_DIR).tmp && \
	$(GO) run golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION) -vulns "$$osv/data/osv" -out $(VULNDB_DIR).tmp && \
	mv $(VULNDB_DIR).tmp $(VULNDB_DIR)

.PHONY: vulncheck
vulncheck: $(if $(filter file://%,$(GOVULNDB)),$(VULNDB_DIR)/index/db.json) ## govulncheck (pinned) over every workspace module; fails on a reachable vulnerability (.ci/vulncheck-gate says which)
	set -o pipefail; $(GO) run $(GOVULNCHECK) -db $(GOVULNDB) -format json $(PKGS) | python3 .ci/vulncheck-gate Dockerfile

.PHONY: lint
lint: fmt-check vet staticcheck vulncheck ## gofmt check, go vet, staticcheck and govulncheck over every workspace module

.PHONY: build
build: ## build every package of every workspace module and the binaries into bin/
	$(GO) build $(PKGS)
	@for b in $(BINARIES); do if [ -d cmd/$$b ]; then $(GO) build -o bin/$$b ./cmd/$$b || exit 1; fi; done

.PHONY: bench
bench: ## run the benchmarks of every workspace module (no tests)
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The MySQL benchmark's size and server (the machine's MariaDB by default; it
# creates and drops its own database).
BENCH_VERDICTS ?= 1000000
BENCH_MYSQL_DSN ?= root@tcp(127.0.0.1:3306)/

.PHONY: bench-shadow
bench-shadow: ## the worker's CPU per live review and the live reviews' stage p99 at 0, 10 and 100 % shadow rate, over the LLM simulator (needs the local stack; not part of make test)
	$(GO) test -count=1 -p 1 -run '^$$' -bench BenchmarkShadowCPU -benchtime=1x ./cmd/worker/

.PHONY: bench-fleet
bench-fleet: ## 4 worker-like processes x 256 calls against a 64-sequence vLLM stand-in and a 600 req/min managed API: static vs adaptive + Redis-shared limits (needs Redis; not part of make test)
	cd deploy/local && $(GO) build -o ../../bin/fleetbench ./cmd/fleetbench
	./bin/fleetbench $(FLEETBENCH_FLAGS)

.PHONY: bench-classes
bench-classes: ## a sweep backlog on a 64-sequence vLLM stand-in: interactive TTFT, real-time latency and batch share with no classes, fleet gates, server priority, both (needs Redis; about 4 minutes; not part of make test)
	cd deploy/local && $(GO) build -o ../../bin/classbench ./cmd/classbench
	./bin/classbench $(CLASSBENCH_FLAGS)

.PHONY: eval-sample
eval-sample: ## regenerate the sample `worker eval` report in docs/eval/sample against three llmsim profiles (simulators; a few minutes)
	@$(GO) build -o bin/worker ./cmd/worker
	@$(GO) run ./deploy/local/evalsample/cmd/evalsample --worker bin/worker --out docs/eval/sample

EVAL_POWER_SEEDS ?= 500

.PHONY: eval-power
eval-power: ## the power suite of `worker eval`'s decisions: the sample lake's rooms, llmsim's seeded error model, EVAL_POWER_SEEDS (500) sets per scenario, a table with Wilson intervals; fails when a property does not hold (minutes; not part of make test)
	cd deploy/local && $(GO) run ./evalpower/cmd/evalpower --seeds $(EVAL_POWER_SEEDS)

.PHONY: eval-shadow-sample
eval-shadow-sample: ## regenerate the sample `worker eval shadow` report in docs/eval/shadow-sample: the worker on the running stack with one simulator live and one with planted mistakes as the shadow candidate (a few minutes)
	set -o pipefail; $(GO) test -tags shadowsample -run '^TestShadowSample$$' -count=1 -timeout 25m -v ./cmd/worker/ | grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS'

.PHONY: eval-labelled-sample
eval-labelled-sample: ## rebuild docs/eval/labelled-sample/manifest.json: decisions (audit items included) made through the console over MariaDB, the lake written, worker eval build-set over it (needs MariaDB; about two minutes)
	@mkdir -p docs/eval/labelled-sample
	$(GO) test -run '^TestLabelledSetFromConsoleDecisions$$' -count=1 -v ./cmd/worker/ -publish-manifest $(CURDIR)/docs/eval/labelled-sample/manifest.json | grep -e 'strata' -e '^ok' -e FAIL

.PHONY: bench-mysql
bench-mysql: ## rows and bytes per table, and the analysts' (docs/analysts.md) and review-queue queries and the purge timed, on 1,000,000 generated verdicts with their subjects and campaign marks (BENCH_ONLY=size: the sizes alone; not part of make test)
	set -o pipefail; CHATGUARD_STACK_ENV=/dev/null CHATGUARD_MYSQL_DSN='$(BENCH_MYSQL_DSN)' BENCH_VERDICTS=$(BENCH_VERDICTS) \
		$(GO) test -tags mysqlbench -run '^TestMySQLBench$$' -count=1 -timeout 60m -v ./storage/mysql/ | grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS'

.PHONY: bench-campaign-verdicts
bench-campaign-verdicts: ## simulator figures: verdicts on the campaign corpus's rooms without campaign signals or history, with signals, with both, through the stage engine and the LLM simulator (not part of make test)
	set -o pipefail; $(GO) test -tags campaignsim -run '^TestCampaignVerdictsSimulator$$' -count=1 -timeout 30m -v ./pipeline/review/ | grep '^|'

.PHONY: chaos
chaos: deps $(STACK_BIN) ## the fault suite at the issue's full sizes (kill -9, MySQL/chat API/both pools/Redis/S3 down, primary faults, duplicates) on the running stack; prints one table (make test runs a short form)
	set -o pipefail; CHATGUARD_CHAOS=full $(GO) test -run '^TestChaos$$' -count=1 -timeout 90m -v ./deploy/local/chaos/ | grep -v -e '^=== RUN' -e '^\s*{'

# The soak: SOAK_MINUTES of load under a seeded random fault schedule
# (SOAK_SEED reruns a schedule; unset, a seed is drawn and printed).
SOAK_MINUTES ?= 30
SOAK_SEED    ?=

.PHONY: soak
soak: deps $(STACK_BIN) ## SOAK_MINUTES (30) of load through the built binaries while a seeded nemesis (SOAK_SEED) cuts MySQL, Redis, the chat API, the pools and SQS and kills a worker; prints the schedule, the table and a line per fault (make test runs a one-minute form)
	set -o pipefail; CHATGUARD_SOAK=full CHATGUARD_SOAK_MINUTES=$(SOAK_MINUTES) CHATGUARD_SOAK_SEED=$(SOAK_SEED) $(GO) test -run '^TestSoak$$' -count=1 -timeout $$(( $(SOAK_MINUTES) + 30 ))m -v ./deploy/local/chaos/ | grep --line-buffered -v -e '^=== RUN' -e '^\s*{' -e '^\s*\[mysql\]'

.PHONY: bench-operator
bench-operator: ## p50/p99 of the authenticated, audited POST /v1/stop on loopback (needs make stack-up for the MySQL row)
	$(GO) test -run '^$$' -bench BenchmarkOperatorStop -benchtime 3000x -count=1 ./cmd/worker/ | grep '^|'

.PHONY: pii-scan
pii-scan: ## the contact-detail corpus through the fallback: PII per 1,000 requests/rows before and after (needs make stack-up)
	$(GO) test -run '^TestPIIScanAfterCorpusRun$$' -count=1 -v ./cmd/worker/ | grep -e '^ *privacy_e2e_test.go' -e '^--- ' | sed 's/^ *privacy_e2e_test.go:[0-9]*: //'

# The lake benchmark's load: events per second, consumer replicas, hours.
BENCH_LAKE_RATE ?= 150
BENCH_LAKE_REPLICAS ?= 2
BENCH_LAKE_HOURS ?= 24

# The campaign memory benchmark's cap, in marks, at the per-shard density of
# 1,000,000 marks; it writes a third more, so that every shard is full and
# evicting as at steady state (its keys are removed after).
BENCH_CAMPAIGN_MARKS ?= 20000

.PHONY: bench-campaign
bench-campaign: ## campaign signals on the generated corpus: recall, false positives over a threshold sweep, added latency per review and Redis memory per mark, against the machine's Redis (not part of make test)
	$(GO) test -run '^$$' -bench 'BenchmarkCampaignCorpus' -benchtime 1x -count=1 ./storage/rediscampaign/ | grep '^|'
	BENCH_CAMPAIGN_MARKS=$(BENCH_CAMPAIGN_MARKS) $(GO) test -run '^$$' -bench 'BenchmarkCampaignMemory' -benchtime 1x -count=1 -timeout 60m ./storage/rediscampaign/ | grep '^|'

.PHONY: bench-lake
bench-lake: ## objects per partition-hour and Athena-stand-in query time over a simulated day, before and after `consumer compact` (needs the running stack; not part of make test)
	set -o pipefail; BENCH_LAKE_RATE=$(BENCH_LAKE_RATE) BENCH_LAKE_REPLICAS=$(BENCH_LAKE_REPLICAS) BENCH_LAKE_HOURS=$(BENCH_LAKE_HOURS) \
		$(GO) test -tags lakebench -run '^TestLakeCompactionBench$$' -count=1 -timeout 120m -v ./cmd/consumer/ | grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS' -e '^ *{"time"'

.PHONY: clean
clean: ## remove built binaries (keeps .cache and the stack state)
	rm -rf bin

# Flags for the demo, e.g. make demo DEMO_FLAGS="--keep-stack" (bin/demo --help lists them).
DEMO_FLAGS ?=

.PHONY: demo
demo: deps $(STACK_BIN) ## run batch, two workers and the consumer over the sample window, then print a summary (starts and stops the stack unless one runs)
	@$(GO) build -o bin/demo ./deploy/local/demo/cmd/demo
	@bin/demo --stack-flags "$(STACK_FLAGS)" $(DEMO_FLAGS)

# make bench-realtime: a generated day through real time (not part of make test).
BENCH_RT_ROOMS   ?= 2000
BENCH_RT_MINUTES ?= 20
# The share of chat events announced 15 s to 2 min late (e.g. 0.01).
BENCH_RT_LATE_SHARE ?= 0

.PHONY: bench-realtime
bench-realtime: deps $(STACK_BIN) ## a generated day (BENCH_RT_ROOMS rooms, diurnal, spam bursts) compressed into BENCH_RT_MINUTES through trigger, workers and the LLM simulator; prints freshness at peak and trough beside the hourly batch's, and the trigger's and Redis's cost
	@$(GO) build -o bin/demo ./deploy/local/demo/cmd/demo
	@bin/demo --realtime --day-rooms $(BENCH_RT_ROOMS) --day-minutes $(BENCH_RT_MINUTES) --late-share $(BENCH_RT_LATE_SHARE) --database chatguard_bench_rt --timeout $$(( $(BENCH_RT_MINUTES) + 30 ))m --stack-flags "$(STACK_FLAGS)" $(DEMO_FLAGS)

.PHONY: bench-console-keys
bench-console-keys: deps $(STACK_BIN) ## the console's 50 queue items decided by keyboard and by mouse in the real browser, timed (a figure for docs/performance.md; not part of make test)
	$(GO) test -tags consolebench -run '^TestDecideFiftyItemsKeyboardVersusMouse$$' -count=1 -timeout 20m -v ./deploy/local/consoletest/ | grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS'

.PHONY: chaos-actions
chaos-actions: deps $(STACK_BIN) ## protective actions' faults on the running stack: a worker SIGKILLed between commit and publish, SQS cut 60 s, the relay SIGKILLed mid-batch; every action published at least once and applied once by key at the chat API stand-in (not part of make test)
	set -o pipefail; $(GO) test -tags chaosactions -run '^TestActionsSurviveKillsAndAnSQSCut$$' -count=1 -timeout 20m -v ./deploy/local/chaos/ | grep -v -e '^=== RUN' -e '^\s*{'

.PHONY: chaos-realtime
chaos-realtime: deps $(STACK_BIN) ## real time's fault rows (trigger SIGKILLed x5, its Redis down 60 s, its Redis keys flushed then the sweep, events x3 reordered, a flooded room, a producer clock 10 min ahead), each a real-time demo run over the sample hour; prints one table (not part of make test)
	@$(GO) build -o bin/demo ./deploy/local/demo/cmd/demo
	@bin/demo --realtime --faults all --speedup 30 --database chatguard_rtfaults --stack-flags "$(STACK_FLAGS)" $(DEMO_FLAGS)

.PHONY: demo-realtime
demo-realtime: deps $(STACK_BIN) ## real time instead of the batch: the sample hour replayed as live chats (12x) through the trigger, two workers and the consumer; prints freshness beside the hourly batch's, and what protective actions did (a demo policy with warn_counterpart and escalate on; the chat API stand-in applies them)
	@$(GO) build -o bin/demo ./deploy/local/demo/cmd/demo
	@bin/demo --realtime --stack-flags "$(STACK_FLAGS)" $(DEMO_FLAGS)

# deploy/k8s is a Go module of its own (joined by go.work) so that the
# product's go.mod gains none of Kustomize, the Kubernetes API types,
# Prometheus or go-containerregistry. Its tests need no stack: they build the
# image's binaries once and check the image, the manifests, the alerts and
# the dashboard against them. The Airflow DAG's test needs python3 only.
DEPLOY_TEST_FLAGS ?= -count=1 -p 2 -timeout 30m

.PHONY: test-deploy
test-deploy: test-airflow ## test the image, the Kubernetes manifests, alerts, dashboard and the Airflow DAG (no stack)
	cd deploy/k8s && $(GO) test $(DEPLOY_TEST_FLAGS) ./...

# The overlay deploy-verify renders (a name under deploy/k8s/overlays or a
# path), and optionally a values file in place of its values.env.
OVERLAY ?= prod
VALUES  ?=

.PHONY: deploy-verify
deploy-verify: ## render OVERLAY=<name|dir> (VALUES=<file>) and fail, naming each placeholder, unpinned image, console/worker disagreement, undocumented Secret, zero spending cap or trust beyond loopback
	@dir=$(OVERLAY); case "$$dir" in */*) dir=$$(realpath "$$dir");; *) dir=$(CURDIR)/deploy/k8s/overlays/$$dir;; esac; \
	values=$(VALUES); if [ -n "$$values" ]; then values=$$(realpath "$$values"); fi; \
	cd deploy/k8s && $(GO) run ./cmd/deploy-verify --overlay "$$dir" --docs ../README.md \
		$$( [ -n "$$values" ] && echo --values "$$values" ) $$( case "$$(basename "$$dir")" in dev*) echo --dev;; esac )

.PHONY: test-airflow
test-airflow: ## test the Airflow DAG with python3's standard library
	@command -v python3 >/dev/null || { echo "python3 is missing"; exit 1; }
	python3 -B -m unittest discover -s deploy/airflow -p 'test_*.py'

test: test-deploy

# The image without a container daemon, as an OCI layout in bin/image, its
# SBOM (CycloneDX, the Go modules of each binary) beside it in
# bin/image.cdx.json (IMAGE_FLAGS="--base REF@sha256:... --push REF" for a
# real base and a registry; see deploy/README.md, "Image").
IMAGE_VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
IMAGE_FLAGS    ?=

.PHONY: image
image: ## build the image without a daemon into bin/image (OCI layout) and its SBOM into bin/image.cdx.json
	@rm -rf bin/image bin/image.cdx.json
	cd deploy/k8s && $(GO) run ./cmd/chatguard-image --root ../.. --version $(IMAGE_VERSION) --revision $(IMAGE_REVISION) --layout ../../bin/image --sbom ../../bin/image.cdx.json --tag chatguard:$(IMAGE_VERSION) $(IMAGE_FLAGS)

# The moderators' console on the running stack, over the demo's database
# (make demo first; it leaves the stack up with `DEMO_FLAGS=--keep-stack`
# when it started it). It runs in the background, logs to
# .stack/console.log and stops with `make console-down`.
CONSOLE_ADDR ?= 127.0.0.1:8088
CONSOLE_DB   ?= chatguard_demo
# The demo's sample is Korean marketplace chat: its team works in KST.
CONSOLE_TZ   ?= Asia/Seoul

.PHONY: console
console: $(STACK_BIN) ## run the moderators' console on the running stack over the demo's verdicts and print its URL (dev login)
	@$(STACK_BIN) status >/dev/null 2>&1 || { echo "no stack is running: make stack-up (and make demo for verdicts)"; exit 1; }
	@$(GO) build -o bin/console ./cmd/console
	@$(MAKE) --no-print-directory console-down >/dev/null 2>&1 || true
	@set -a; . $(STATE_DIR)/env; set +a; \
	dsn=$$(printf '%s' "$$CHATGUARD_MYSQL_DSN" | sed 's#/[^/?]*\(?\|$$\)#/$(CONSOLE_DB)\1#'); \
	CHATGUARD_MYSQL_DSN="$$dsn" setsid bin/console --listen-addr $(CONSOLE_ADDR) --admin-addr 127.0.0.1:0 --dev-login --time-zone $(CONSOLE_TZ) \
		>$(STATE_DIR)/console.log 2>&1 </dev/null & echo $$! >$(STATE_DIR)/console.pid; \
	for i in $$(seq 1 100); do \
		url=$$(sed -n 's/.*"msg":"console: serving","url":"\([^"]*\)".*/\1/p' $(STATE_DIR)/console.log); \
		if [ -n "$$url" ]; then echo "console: $$url/ (dev login: any e-mail; log in $(STATE_DIR)/console.log; make console-down stops it)"; exit 0; fi; \
		if ! kill -0 $$(cat $(STATE_DIR)/console.pid) 2>/dev/null; then cat $(STATE_DIR)/console.log; exit 1; fi; \
		sleep 0.2; \
	done; echo "the console did not start; see $(STATE_DIR)/console.log"; exit 1

.PHONY: console-down
console-down: ## stop the console started by make console
	@if [ -f $(STATE_DIR)/console.pid ]; then kill $$(cat $(STATE_DIR)/console.pid) 2>/dev/null || true; rm -f $(STATE_DIR)/console.pid; fi

.PHONY: bench-console
bench-console: ## the console's SSE figures: idle-stream memory, delivery lag, stalled client, drain and resume (not part of make test)
	$(GO) test -tags consolebench -run '^TestConsoleBench$$' -count=1 -timeout 20m -v ./cmd/console/ | grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS'

.PHONY: bench-console-ttft
bench-console-ttft: ## only bench-console's interactive TTFT rows (batch backlog with and without the fleet reserve; needs the stack's Redis)
	$(GO) test -tags consolebench -run '^TestConsoleBenchTTFT$$' -count=1 -timeout 10m -v ./cmd/console/ | grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS'
