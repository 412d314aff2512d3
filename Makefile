# The README's two commands: `make run` and `make test`. Both create the virtualenv and install first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: run test install bench lint clean

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
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "claimlog needs Python 3.11 or newer; set PYTHON=python3.11 (or newer)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

clean:
	rm -rf $(VENV) .claimlog .pytest_cache .hypothesis
