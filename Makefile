# Two set-up commands: `make demo` (seed the demo study on SQLite and start the review app) and
# `make test` (the whole test suite). Each installs what it needs into the same virtual environment:
# the demo only medrev's own dependencies (`pip install -e .`: no torch, no browser driver, no test
# tools), the tests the development extras too (`.[dev]`: torch and transformers for the local-model
# scorer, Playwright, the provider SDKs, pytest, ruff). `bench/install_size.py` prints both sizes.
#
# PYTHON: the newest python3.X (3.11 or later) on PATH unless given (`make demo PYTHON=/path/to/python3`).
PYTHON ?= $(shell for v in 20 19 18 17 16 15 14 13 12 11; do python3.$$v -c "import venv" >/dev/null 2>&1 && { echo python3.$$v; break; }; done)
# DEMO_ARGS: extra options for `medrev demo` (`make demo DEMO_ARGS="--port 8502"`).
DEMO_ARGS ?=
VENV ?= .venv
BIN := $(VENV)/bin
APP_STAMP := $(VENV)/.installed-app
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(BIN)/python:
	@if [ -z "$(PYTHON)" ]; then echo "medrev needs Python 3.11 or later: install python3.11 (or newer) with its venv module, or pass PYTHON=/path/to/python3."; exit 1; fi
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { echo "$(PYTHON) is not Python 3.11 or later: install python3.11 (or newer), or pass PYTHON=/path/to/python3."; exit 1; }
	@echo "Creating $(VENV) with $(PYTHON) ($$($(PYTHON) -c 'import sys; print(sys.version.split()[0])'))"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(APP_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $(APP_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP) $(APP_STAMP)

demo: $(APP_STAMP)
	$(BIN)/medrev demo $(DEMO_ARGS)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/runner_throughput.py

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache
