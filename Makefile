# Two set-up commands: `make demo` (seed the demo study on SQLite and start the review app) and
# `make test` (the whole test suite). Each installs what it needs into the same virtual environment:
# the demo only medrev's own dependencies (`pip install -e .`: no torch, no browser driver, no test
# tools), the tests the development extras too (`.[dev]`: torch and transformers for the local-model
# scorer, Playwright, the provider SDKs, pytest, ruff). `bench/install_size.py` prints both sizes.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
APP_STAMP := $(VENV)/.installed-app
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(APP_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $(APP_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP) $(APP_STAMP)

demo: $(APP_STAMP)
	$(BIN)/medrev demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/runner_throughput.py

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache
