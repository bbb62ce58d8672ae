# The two commands a fresh machine needs: `make demo` and `make test`.
# Each creates .venv when it is missing and (re)installs the package when pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.zoo-installed

.PHONY: demo test test-floors lint bench clean-venv

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

# The suite on the lowest release of each dependency that pyproject.toml admits (.ci/floors.txt), in a venv
# of its own. uv resolves it (pip's resolver gives up on these pins) and downloads torch 2.7.0 (~3 GB).
FLOORS_VENV := .venv-floors
test-floors:
	$(PYTHON) -m venv $(FLOORS_VENV)
	$(FLOORS_VENV)/bin/python -m pip install -q uv
	$(FLOORS_VENV)/bin/uv pip install -q --python $(FLOORS_VENV)/bin/python -c .ci/floors.txt -e '.[dev,hdf5]'
	$(FLOORS_VENV)/bin/python -m pytest -n 2 --dist worksteal -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check zoo tests benchmarks

# `make bench` lists the benchmark scripts, `make bench NAME=hsi_indian_pines ARGS=--smoke` runs one (`zoo bench`;
# a run writes benchmarks/results/NAME.json). A phony target without a rule would say "Nothing to be done" and pass.
bench: $(STAMP)
	$(BIN)/zoo bench $(NAME) $(ARGS)

clean-venv:
	rm -rf $(VENV)
