# The two set-up commands of the README. Each creates the virtualenv on first use; the end-to-end tests
# build etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, helm and kwok into
# ~/.cache/berth on first use
# (e2e/build-controlplane.sh, about 7 minutes cold on 2 cores, then reused).
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: demo try test lint unit e2e tools bench bench-quick
demo: $(VENV)/.installed
	$(BIN)/berth simulate --cluster examples/cluster.yaml --pod examples/pods/web.yaml --seed 1 --detail

# berth on a real local cluster, as local processes (no Docker): a control plane built from the Go module
# proxy (about 7 minutes the first time, then reused), kwok's nodes in three zones, berth's chart, berth
# serve, berth operator and berth-scheduler. Runs until Ctrl-C, then stops everything (e2e/try_cluster.py).
try: tools $(VENV)/.installed
	$(BIN)/python e2e/try_cluster.py

# Everything CI runs: lint, unit and property tests, end-to-end tests on a real control plane.
test: lint tools $(VENV)/.installed
	$(BIN)/pytest

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

unit: $(VENV)/.installed
	$(BIN)/pytest tests

e2e: tools $(VENV)/.installed
	$(BIN)/pytest e2e

# Benchmarks (bench/RESULTS.md): every figure at every size, about 15 minutes on 2 cores; or all of them
# at a small size in under a minute. Both print the Markdown tables RESULTS.md holds.
bench: $(VENV)/.installed
	$(BIN)/python -m bench

bench-quick: $(VENV)/.installed
	$(BIN)/python -m bench --quick

# The operator guide's commands use jq; the end-to-end suite runs them as written.
tools:
	@command -v jq >/dev/null || { echo "installing jq (Debian package)"; \
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null; }

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# setuptools says an editable install is one (a warning on every install): not news to a reader
	PYTHONWARNINGS="ignore::UserWarning:setuptools.command.editable_wheel" $(BIN)/pip install --quiet -e '.[dev]'
	touch $@
