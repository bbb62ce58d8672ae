# The two commands a fresh machine needs: `make demo` and `make test`.
# Each creates .venv when it is missing and (re)installs the package when pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.zoo-installed

.PHONY: demo test lint bench clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --upgrade -q pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/zoo demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist worksteal -q --durations=15

lint: $(STAMP)
	$(BIN)/ruff check zoo tests benchmarks

clean-venv:
	rm -rf $(VENV)
