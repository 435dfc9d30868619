# The two set-up commands of the README. Each creates the virtualenv on first use.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: demo test lint unit
demo: $(VENV)/.installed
	$(BIN)/berth simulate --cluster examples/cluster.yaml --pod examples/pods/web.yaml --seed 1 --detail

test: lint unit

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

unit: $(VENV)/.installed
	$(BIN)/pytest

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@
