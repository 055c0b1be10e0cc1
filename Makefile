# Two entry points (see README): `make demo` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.nasctl-installed
TEST_STAMP := $(VENV)/.nasctl-test-installed
DOCS_STAMP := $(VENV)/.nasctl-docs-installed

.PHONY: demo test install install-test clean-demo services gpu-check docs

# The runtime only: what `nasctl run` needs (no test, docs or SAASBO tools).
install: $(STAMP)

# torch first, from the exact pinned version: anything that pulls torch
# transitively would otherwise fetch a multi-GB CUDA build.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e .
	touch $(STAMP)

# What the suite needs on top: the test tools, the MLflow client (the export's
# tests log to a local store), the docs site builder (the suite builds the site
# strictly) and SAASBO (its tests run the method). SAASBO's JAX and NumPyro go
# into $(VENV)/saasbo, not into the virtualenv: BoTorch imports JAX whenever it
# can (about a second of every orchestrator's start, hundreds in the suite), and
# only the tests marked `saasbo` need it; scripts/test-suite.sh puts the folder
# on their PYTHONPATH.
install-test: $(TEST_STAMP)

$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[test,mlflow,docs]"
	$(PY) scripts/install_extra_beside.py saasbo $(VENV)/saasbo
	touch $(TEST_STAMP)

# The tutorial's NAS: 48 trials of a Lightning MLP on digits, 2 at a time, on the
# embedded SQLite database ./nasctl.db. If that database already holds the demo,
# show its result instead of starting it again.
demo: install
	@if $(VENV)/bin/nasctl status demo >/dev/null 2>&1; then \
		echo "nasctl.db already holds experiment 'demo' (run 'make clean-demo' to start over):"; \
		$(VENV)/bin/nasctl pareto demo; \
	else \
		$(VENV)/bin/nasctl run examples/digits_mlp.yaml --name demo $(DEMO_ARGS); \
	fi
	@echo
	@echo "nasctl is installed in $(VENV). To use it in this shell:  . $(VENV)/bin/activate"
	@echo "then, for example:  nasctl pareto demo   nasctl trials demo   nasctl web"

clean-demo:
	rm -rf nasctl.db nasctl.db-wal nasctl.db-shm nasctl_runs/demo

# What the suite talks to besides PostgreSQL and MariaDB (which must be running):
# Debian's Chromium for the browser tests and a local Slurm cluster (root; both
# idempotent, seconds when already there).
services:
	@[ -x /usr/bin/chromium ] || { apt-get update -qq && apt-get install -y -qq chromium; }
	scripts/slurm-local.sh up

# The structure first (import layers, types: seconds), then the tests
# (scripts/test-suite.sh): two pytest-xdist workers (most tests wait on trial
# processes, not the CPU) with the local Slurm cluster's tests (marked
# `cluster`) in a process beside them, then the tests marked `serial`, which
# restart the PostgreSQL server every other test uses.
test: install-test services
	$(VENV)/bin/lint-imports
	$(PY) -m mypy nasctl
	PY=$(PY) scripts/test-suite.sh

# On a machine with NVIDIA GPUs: the GPU tests (skipped elsewhere), then a small
# real NAS per precision with a table of latency, accuracy, memory and throughput.
gpu-check: install-test
	$(PY) -m pytest -m gpu tests/gpu -p no:cacheprovider
	$(PY) scripts/gpu_check.py

# The documentation site (docs/, mkdocs.yml) into ./site; the suite builds it
# strictly too (tests/unit/test_docs.py).
docs: $(DOCS_STAMP)
	$(PY) -m mkdocs build --strict

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)
