# Batchwork. `make demo` and `make test` work on a fresh machine with Go and
# Python 3: everything else (the moto emulator in .venv) is installed here.
SHELL := /bin/bash
GO ?= go
PYTHON ?= python3
VENV := .venv
MOTO := $(VENV)/bin/moto_server
FUNCTIONS := $(notdir $(wildcard functions/*))

.PHONY: all venv test unit integration bench build demo emulator docs fuzz vet clean

all: build

# The emulator: moto server, pinned, in a git-ignored virtualenv.
venv: $(MOTO)
$(MOTO): integration/emulator/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r integration/emulator/requirements.txt
	touch $@

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

# All unit and integration tests; the integration tests start moto on a
# free loopback port (BATCHWORK_EMULATOR=localstack or AWS_ENDPOINT_URL
# choose another emulator) and fail if it cannot start.
test: venv vet
	$(GO) test -count=1 -timeout 12m ./...

unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /integration)

integration: venv
	$(GO) test -count=1 -timeout 12m ./integration/...

fuzz:
	$(GO) test ./shared/spec -run XXX -fuzz FuzzParse -fuzztime 60s

bench: venv
	$(GO) run ./cmd/bench

# Lambda binaries: linux/arm64 for provided.al2023, each named bootstrap.
build:
	@for f in $(FUNCTIONS); do \
	  echo "build bin/$$f/bootstrap"; \
	  GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o bin/$$f/bootstrap ./functions/$$f || exit 1; \
	done

# Word count end to end on the emulator; INPUT=<dir> counts your own files.
demo: venv
	$(GO) run ./cmd/demo $(if $(INPUT),-input $(INPUT))

# An emulator for manual use: prints AWS_ENDPOINT_URL=... and runs until ^C.
emulator: venv
	$(GO) run ./cmd/emulator

# Regenerate docs/lifecycles.md from the statemachine tables.
docs:
	$(GO) test ./statemachine -run TestDiagramUpToDate -update

clean:
	rm -rf bin $(VENV)
