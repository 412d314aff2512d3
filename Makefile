# The README's two commands: `make run` and `make test`. Both create the virtualenv and install first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
# The Node.js tools tests/contract checks the published documents with (AsyncAPI's parser, Redocly's linter).
CONTRACT_NODE := tests/contract/node
CONTRACT_TOOLS := $(CONTRACT_NODE)/node_modules/.package-lock.json
CLIENT_GENERATOR := $(VENV)/client-generator/.installed

.PHONY: run test install bench lint check lock vectors clean

run: $(STAMP)
	$(BIN)/claimlog up --sample

# Most tests wait on servers and processes rather than compute: TEST_WORKERS pytest-xdist workers share the
# machine, each test file on one worker (its module fixtures made once); TEST_WORKERS=0 runs in this process.
TEST_WORKERS ?= 2
test: $(STAMP) $(CONTRACT_TOOLS) $(CLIENT_GENERATOR)
	$(BIN)/python -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)

bench: $(BENCH_STAMP)
	$(BIN)/python bench/latency.py
	$(BIN)/python bench/backlog.py
	$(BIN)/python bench/fold.py
	$(BIN)/python bench/bulk.py
	$(BIN)/python bench/commands.py
	$(BIN)/python bench/read_api.py
	$(BIN)/python bench/replay.py
	$(BIN)/python bench/live.py
	$(BIN)/python bench/past_search.py
	$(BIN)/python bench/fuzz_log.py
	$(BIN)/python bench/transparency.py
	$(BIN)/python bench/results.py --write

# The benchmarks' peers (the eventsourcing library, for bench/replay.py) on top of the test install.
$(BENCH_STAMP): $(STAMP) requirements/bench.lock
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/bench.lock
	touch $(BENCH_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

# The fast loop while editing: lint and the pure unit tests (no servers), about a minute.
check: lint
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit

install: $(STAMP) $(CONTRACT_TOOLS) $(CLIENT_GENERATOR)

# openapi-python-client in an environment of its own (its pins of typer and httpx are not claimlog's).
$(CLIENT_GENERATOR): requirements/client-generator.lock
	test -x $(VENV)/client-generator/bin/python || $(PYTHON) -m venv $(VENV)/client-generator
	$(VENV)/client-generator/bin/python -m pip install --quiet --require-hashes -r requirements/client-generator.lock
	touch $(CLIENT_GENERATOR)

# Locked like the Python packages: `npm ci` installs exactly what package-lock.json holds.
$(CONTRACT_TOOLS): $(CONTRACT_NODE)/package.json $(CONTRACT_NODE)/package-lock.json
	cd $(CONTRACT_NODE) && npm ci --no-audit --no-fund

# Installs are locked: every package at the version and hash in requirements/test.lock (made by
# `make lock`), then claimlog itself without resolving anything again.
$(STAMP): pyproject.toml requirements/test.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "claimlog needs Python 3.11 or newer; set PYTHON=python3.11 (or newer)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/test.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# Refresh the locks after a change of pyproject.toml's dependencies (or to take newer releases: add
# LOCK_ARGS=--upgrade). One lock serves x86_64 and aarch64 (--universal); uv is used only here.
lock: $(STAMP)
	$(BIN)/python -m pip install --quiet 'uv>=0.9'
	for lock in runtime:'' test:'--extra test' bench:'--extra test --extra bench'; do \
	  $(BIN)/uv pip compile pyproject.toml --quiet --universal --python-version 3.11 --generate-hashes \
	    $(LOCK_ARGS) $${lock#*:} -o requirements/$${lock%%:*}.lock || exit 1; \
	done
	$(BIN)/uv pip compile --quiet --universal --python-version 3.11 --generate-hashes $(LOCK_ARGS) \
	  --group pyproject.toml:client-generator -o requirements/client-generator.lock

# The transparency log's interoperability vectors (tests/interop/): claimlog writes what it makes, Go's
# golang.org/x/mod/sumdb (Debian: golang-go, golang-golang-x-mod-dev) verifies it and writes its own,
# which tests/unit/test_tlog_interop.py checks claimlog against. Commit both JSON files.
GOPATH_DEBIAN ?= /usr/share/gocode
vectors: $(STAMP)
	$(BIN)/python -m tests.interop.make_claimlog_vectors
	cd tests/interop && GO111MODULE=off GOPATH=$(GOPATH_DEBIAN) GOCACHE=$${GOCACHE:-/tmp/claimlog-gocache} go run main.go

clean:
	rm -rf $(VENV) .claimlog .pytest_cache .hypothesis
