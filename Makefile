# Quickstart: `make demo`, `make test`. Every target installs what it needs on a fresh clone.
SHELL := /bin/bash
.DEFAULT_GOAL := help
export NPM_CONFIG_UPDATE_NOTIFIER := false
export NPM_CONFIG_FUND := false
export NPM_CONFIG_AUDIT := false

STAMP := node_modules/.install-stamp

.PHONY: help install temporal temporal-server promtool cli api test test-package test-unit test-integration test-node24 test-ui test-stack lint typecheck demo dev dev-down stack stack-down bench build

help:
	@echo "make demo        dev stack, a worker and a scripted scenario of real sagas; runs until Ctrl-C"
	@echo "                 (make demo ARGS=--once: run the scenario, stop, exit 0 only if all went as expected)"
	@echo "make test        lint, typecheck, unit and integration tests (real Temporal, Redis, PostgreSQL; the alerts in promtool)"
	@echo "make test-node24 the unit and integration tests on Node 24 (installed from the npm registry's node@24 when missing)"
	@echo "make test-package the packed package installed outside the checkout: the example apps' and a scaffold's tests"
	@echo "make test-ui     the Temporal UI in headless Chromium, checked after a demo run on a dev server of its own"
	@echo "make dev         start the Temporal dev server (UI on :8233), migrate the database"
	@echo "make dev-down    stop what make dev started"
	@echo "make stack       a real Temporal server on PostgreSQL (UI on :8333), a Redis Cluster, two workers (first run builds the server)"
	@echo "make stack-down  stop what make stack started"
	@echo "make test-stack  the saga integration tests and the demo against make stack's stack"
	@echo "make cli         compile src/ into .build/ for bin/saga (only when a source changed)"
	@echo "make lint        eslint (with the workflow sandbox rule)"
	@echo "make api         the package's public surface against the checked-in reports in api/"
	@echo "make bench       benchmarks"

$(STAMP): package.json package-lock.json
	@# npm ci cannot be used: this registry lacks the other platforms' optional binaries (e.g. @swc/core-darwin-*),
	@# so npm ci reports the lock out of sync. npm install --no-save installs the locked tree and writes nothing.
	npm install --no-save --no-audit --no-fund --loglevel=error
	@touch $@

install: $(STAMP)

temporal:
	@scripts/ensure-temporal >/dev/null

# Prometheus's promtool, which checks and unit-tests the alerting rules (first run builds it with Go).
promtool:
	@scripts/ensure-promtool >/dev/null

# The compiled CLI that bin/saga runs (.build/, git-ignored); rebuilt only when a source changed.
cli: install
	@scripts/build-cli

lint: install
	npx eslint . --max-warnings 0

typecheck: install
	npx tsc --noEmit -p tsconfig.json

# The package's public surface against the api-extractor reports in api/ (scripts/check-api --update rewrites them).
api: install
	@scripts/check-api

test-unit: install
	npx vitest run --project unit

test-integration: install temporal promtool cli
	npx vitest run --project integration

test: install temporal promtool cli lint typecheck api
	npx vitest run

# The unit and integration suites again on Node 24, what users run (the machine's node may be older):
# a Node 24 binary from scripts/ensure-node (the npm registry's node@24), first on PATH for the
# processes the tests start too; its report is test-results/vitest-node24.json.
test-node24: install temporal promtool cli
	@node24=$$(scripts/ensure-node 24) && PATH="$$(dirname "$$node24"):$$PATH" TEST_REPORT_JSON=test-results/vitest-node24.json npx vitest run

build: install
	npm run --silent build

# The package as its users get it: npm pack, installed outside the checkout; each example app's tests
# and a scaffold's (saga init) on a dev server of its own; ends with `N passed, N failed`.
test-package: install temporal
	@scripts/test-package

dev: install temporal cli
	@scripts/dev-up

dev-down:
	@scripts/dev-down

# The Temporal server, its SQL tool and the UI server, built once from their Go modules into .tools/bin.
temporal-server:
	@scripts/ensure-temporal-server >/dev/null

# A production-shaped stack beside the dev server: see scripts/stack-up and docs/operations.md.
stack: install temporal temporal-server cli
	@scripts/stack-up

stack-down:
	@scripts/stack-down

# Brings the stack up when it is down (and stops it again after); ends with `N passed, N failed`.
test-stack: install temporal temporal-server cli
	@scripts/test-stack

# The demo starts the dev stack itself (scripts/dev-up), so that Ctrl-C stops only what it started.
# Plain node (not npx): Ctrl-C then reaches the demo directly and it can stop its worker and server.
demo: install temporal cli
	@node --import tsx scripts/demo.ts $(ARGS)

# Installs Debian's chromium when missing; the dev server, database and key prefix are its own.
test-ui: install temporal cli
	@scripts/test-ui $(ARGS)

bench: install temporal cli
	npx tsx bench/run.ts $(ARGS)
