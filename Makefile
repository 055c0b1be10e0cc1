# Two entry points (see README): `make demo` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.nasctl-installed

.PHONY: demo test install clean-demo services gpu-check

install: $(STAMP)

# torch first, from the exact pinned version: anything that pulls torch
# transitively would otherwise fetch a multi-GB CUDA build.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

# The tutorial's NAS: 48 trials of a Lightning MLP on digits, 2 at a time, on the
# embedded SQLite database ./nasctl.db. If that database already holds the demo,
# show its result instead of starting it again.
demo: install
	@if $(VENV)/bin/nasctl status demo >/dev/null 2>&1; then \
		echo "nasctl.db already holds experiment 'demo' (run 'make clean-demo' to start over):"; \
		$(VENV)/bin/nasctl pareto demo; \
	else \
		$(VENV)/bin/nasctl run examples/digits_mlp.yaml --name demo; \
	fi

clean-demo:
	rm -rf nasctl.db nasctl.db-wal nasctl.db-shm nasctl_runs/demo

# What the suite talks to besides PostgreSQL and MariaDB (which must be running):
# Debian's Chromium for the browser tests and a local Slurm cluster (root; both
# idempotent, seconds when already there).
services:
	@[ -x /usr/bin/chromium ] || { apt-get update -qq && apt-get install -y -qq chromium; }
	scripts/slurm-local.sh up

test: install services
	$(PY) -m pytest

# On a machine with NVIDIA GPUs: the GPU tests (skipped elsewhere), then a small
# real NAS per precision with a table of latency, accuracy, memory and throughput.
gpu-check: install
	$(PY) -m pytest -m gpu tests/gpu -p no:cacheprovider
	$(PY) scripts/gpu_check.py
