# The README's two commands: `make run` and `make test`. Both create the virtualenv and install first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: run test install bench lint check lock clean

run: $(STAMP)
	$(BIN)/claimlog up --sample

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

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

install: $(STAMP)

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

clean:
	rm -rf $(VENV) .claimlog .pytest_cache .hypothesis
