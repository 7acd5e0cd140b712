# Batchwork. `make demo` and `make test` work on a fresh machine with Go,
# Python 3, Java 17 and Maven: everything else (the moto emulator in .venv,
# DynamoDB Local in .dynamodb-local; for make test, Debian's Chromium through
# apt-get) is installed here.
SHELL := /bin/bash
GO ?= go
PYTHON ?= python3
MVN ?= mvn
VENV := .venv
MOTO := $(VENV)/bin/moto_server
# DynamoDB Local's jars and native libraries; the version is pinned in
# internal/emulator/pom.xml.
DYNAMODB_LOCAL := .dynamodb-local/lib/.installed
FUNCTIONS := $(notdir $(wildcard functions/*))

.PHONY: all venv dynamodb-local chromium test test-emulator race unit integration bench chaos build demo emulator docs fuzz vet clean cdk-cli synth deploy-local

all: build

# The emulator: moto server, pinned, in a git-ignored virtualenv.
venv: $(MOTO)
# --no-compile: Python compiles the modules moto imports as it first
# imports them, not all of them at install (25 of pip's 60 seconds here).
$(MOTO): internal/emulator/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-compile -r internal/emulator/requirements.txt
	touch $@

# DynamoDB Local (the emulator's DynamoDB; moto serves the rest), pinned,
# in a git-ignored folder. Copied into a fresh folder and moved in place
# only when complete, so a failed or interrupted download never leaves a
# half install that looks done.
dynamodb-local: $(DYNAMODB_LOCAL)
$(DYNAMODB_LOCAL): internal/emulator/pom.xml
	@command -v $(MVN) >/dev/null || { echo "dynamodb-local: Maven ($(MVN)) not found; install Maven and Java 17"; exit 1; }
	rm -rf .dynamodb-local.tmp
	$(MVN) -q -B -f internal/emulator/pom.xml dependency:copy-dependencies -Dstyle.color=never -DoutputDirectory=$(CURDIR)/.dynamodb-local.tmp/lib
	@ls .dynamodb-local.tmp/lib/DynamoDBLocal-*.jar .dynamodb-local.tmp/lib/libsqlite4java-* >/dev/null || { echo "dynamodb-local: Maven did not copy DynamoDBLocal and its sqlite4java library"; exit 1; }
	rm -rf .dynamodb-local
	mv .dynamodb-local.tmp .dynamodb-local
	touch $@

# Debian's Chromium and ChromeDriver, for the web console's browser test
# (integration/console_test.go), installed when either is missing: as root,
# else with sudo.
CHROMIUM := /usr/bin/chromium
CHROMEDRIVER := /usr/bin/chromedriver
chromium:
	@if [ ! -x $(CHROMIUM) ] || [ ! -x $(CHROMEDRIVER) ]; then \
	  command -v apt-get >/dev/null || { echo "chromium: $(CHROMIUM) or $(CHROMEDRIVER) is missing and there is no apt-get: install Chromium and ChromeDriver (Debian packages chromium, chromium-driver)"; exit 1; }; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; \
	  elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "chromium: installing the Debian packages chromium and chromium-driver needs root, and sudo is not available"; exit 1; fi; \
	  echo "chromium: installing Debian's chromium and chromium-driver"; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends chromium chromium-driver || exit 1; \
	fi
	@test -x $(CHROMIUM) && test -x $(CHROMEDRIVER) || { echo "chromium: still missing $(CHROMIUM) or $(CHROMEDRIVER) after installing"; exit 1; }

vet:
	$(GO) vet ./...
	$(GO) vet -tags faults ./internal/faultenv ./cmd/batchwork-local ./cmd/batchwork-executor
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

# All unit and integration tests; the integration tests start moto and
# DynamoDB Local on free loopback ports (BATCHWORK_DYNAMODB=moto,
# BATCHWORK_EMULATOR=localstack or AWS_ENDPOINT_URL choose otherwise; see
# internal/emulator) and fail if they cannot start. The unit packages run
# under the race detector only; the packages whose tests start the
# emulators run without it (it would multiply their time on 2 cores), at
# the same time as the race run: the integration tests wait on timers
# about half their time and take longest, so they start first, and the
# rest fill the cores they leave. Four tests at a time: the integration
# tests spend most of their time waiting (two at a time kept 2 cores
# under half busy), and no test's outcome may depend on the machine's
# pace. The timeout stops a hung run; a slow one is not a hang.
EMULATOR_MATCH = -e /integration -e /internal/emulator -e /functions/ -e /infra -e /cmd/
RACE_PKGS = $$($(GO) list ./... | grep -v $(EMULATOR_MATCH))
EMULATOR_PKGS = $$($(GO) list ./... | grep -e /integration) $$($(GO) list ./... | grep $(EMULATOR_MATCH) | grep -v /integration)
# The race run needs no emulator and vet none either, so they start at
# once, beside the emulators' installs (a fresh virtualenv is a minute of
# pip) and the Lambda build.
test:
	@$(MAKE) --no-print-directory -j4 -Oline test-emulator race vet

test-emulator: venv dynamodb-local chromium cdk-cli build
	$(GO) test -count=1 -parallel 4 -timeout 18m $(EMULATOR_PKGS)

race:
	$(GO) test -race -count=1 $(RACE_PKGS)

# The unit tier: every package's tests under -short, which start no
# emulator, no Java or Node.js process and no CDK synth (internal/testtier).
unit:
	$(GO) test -short -count=1 ./...

integration: venv dynamodb-local chromium cdk-cli build
	$(GO) test -count=1 -parallel 4 -timeout 18m ./integration/...

fuzz:
	$(GO) test ./shared/spec -run XXX -fuzz FuzzParse -fuzztime 60s

# The bench (cmd/bench): throughput against the emulator floor, requests
# and cost per task (no-op, one output, word count with 64 reducers), the
# load model of a 100,000-task job, and schedule firing bursts.
# BENCH_FLAGS passes flags, e.g. BENCH_FLAGS='-load 10000 -schedules 0'.
bench: venv dynamodb-local
	$(GO) run ./cmd/bench $(BENCH_FLAGS)

# A chaos run (cmd/chaos): 100 jobs under injected AWS faults with an
# executor process SIGKILLed every second and a few jobs cancelled, then
# an independent checker compares everything with a fault-free run.
# make test runs a 10-job version (cmd/chaos TestChaos).
chaos: venv dynamodb-local
	$(GO) run ./cmd/chaos

# Lambda binaries: linux/arm64 for provided.al2023, each named bootstrap.
build:
	@for f in $(FUNCTIONS); do \
	  echo "build bin/$$f/bootstrap"; \
	  GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o bin/$$f/bootstrap ./functions/$$f || exit 1; \
	done

# Word count end to end on the emulator; INPUT=<dir> counts your own files,
# SERVE=1 keeps its runner up on 127.0.0.1:8080 for the batchwork CLI.
# Built, then run (not through go run, which exits 1 on Ctrl-C even when
# the program stops cleanly).
demo: venv dynamodb-local
	$(GO) build -o bin/demo ./cmd/demo
	bin/demo $(if $(INPUT),-input $(INPUT)) $(if $(SERVE),-serve)

# An emulator for manual use: prints AWS_ENDPOINT_URL=... (and
# AWS_ENDPOINT_URL_DYNAMODB=... for DynamoDB Local) and runs until ^C.
emulator: venv dynamodb-local
	$(GO) build -o bin/emulator ./cmd/emulator
	bin/emulator

# Regenerate docs/lifecycles.md from the statemachine tables.
docs:
	$(GO) test ./statemachine -run TestDiagramUpToDate -update

# The AWS CDK CLI, pinned in package.json/package-lock.json. The go.mod
# written into node_modules makes it a module of its own, so ./... does not
# walk into the Go init templates the CLI ships.
CDK := node_modules/.bin/cdk
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
cdk-cli: node_modules/go.mod
node_modules/go.mod: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	printf 'module ignored/node_modules\n' > $@

# Synthesize the stack into cdk.out and refresh the checked-in template
# (infra/template), which the local runner deploys.
synth: cdk-cli build
	$(GO) test -count=1 ./infra -run TestTemplateUpToDate -update
	$(CDK) synth --quiet --no-notices

# Deploy the whole stack into a running emulator (`make emulator`, then
# export the AWS_ENDPOINT_URL it prints) with the pinned CLI, then run word
# count against the deployed resources with the handlers hosted locally.
STACK ?= Batchwork
deploy-local: cdk-cli build
	@test -n "$$AWS_ENDPOINT_URL" || { echo "deploy-local: start an emulator (make emulator) and export the AWS_ENDPOINT_URL lines it prints"; exit 2; }
	AWS_ACCESS_KEY_ID=$${AWS_ACCESS_KEY_ID:-test} AWS_SECRET_ACCESS_KEY=$${AWS_SECRET_ACCESS_KEY:-test} AWS_REGION=$${AWS_REGION:-us-east-1} \
	  AWS_ENDPOINT_URL_S3_FOR_CLOUDFORMATION=$$(echo $$AWS_ENDPOINT_URL | sed 's/127\.0\.0\.1/localhost/') CDK_DISABLE_CLI_TELEMETRY=true CDK_DISABLE_VERSION_CHECK=true \
	  sh -c '$(CDK) bootstrap --no-notices -c stackName=$(STACK) && $(CDK) deploy --no-notices --require-approval never -c stackName=$(STACK)'
	$(GO) run ./cmd/demo -stack $(STACK)

clean:
	rm -rf bin $(VENV) node_modules cdk.out .dynamodb-local .dynamodb-local.tmp
