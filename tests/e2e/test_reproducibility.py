"""Reproducibility as docs/benchmarks.md states it, through the `nasctl` CLI with the
model-based optimizer: one trial at a time, a seed repeats its trials; on the simulated
clock (`runner.scheduler: simulated`), it does at parallelism 4 too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nasctl.store import Store
from tests.conftest import run_cli

FUNCS = '''
import math

def two_objectives(p):
    x, y, w = p["x"], p["y"], float(p["width"])
    return {"f0": (x - 0.3) ** 2 + 0.5 * (y - 0.6) ** 2 + 0.01 * w,
            "f1": (x - 0.8) ** 2 + (y - 0.2) ** 2 + 0.1 * math.sin(3 * x) + 1.0 / w}
'''

SPEC = """
name: {name}
search_space:
  x: {{type: float, low: 0, high: 1}}
  y: {{type: float, low: 0, high: 1}}
  width: {{type: choice, values: [1, 2, 4, 8], ordered: true}}
objectives:
  f0: {{goal: minimize, threshold: 1.5}}
  f1: {{goal: minimize, threshold: 2.0}}
budget: {{max_trials: {n}, parallelism: {k}, max_failures: 0}}
trial: {{function: "repro_funcs:two_objectives"}}
runner: {runner}
optimizer: {{seed: 7}}
"""


def _run(tmp_path: Path, name: str, n: int, k: int, runner: str) -> list[dict[str, Any]]:
    """`nasctl run` a spec, then `nasctl trials --json`, with each trial's runner metadata from the store."""
    (tmp_path / "repro_funcs.py").write_text(FUNCS)
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(SPEC.format(name=name, n=n, k=k, runner=runner))
    db = f"sqlite:///{tmp_path / (name + '.db')}"
    r = run_cli("run", str(spec), "--db", db, "--workdir", str(tmp_path / "runs"), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr + r.stdout
    r = run_cli("trials", name, "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    trials: list[dict[str, Any]] = json.loads(r.stdout)
    assert len(trials) == n and all(t["status"] == "COMPLETED" for t in trials)
    store = Store(db)
    meta = {t.index: t.runner_metadata for t in store.list_trials(store.get_experiment(name).id)}
    return sorted(({**t, "runner_metadata": meta[t["index"]]} for t in trials), key=lambda t: t["index"])


def _what(trials: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    return [(t["index"], json.dumps(t["parameters"], sort_keys=True), t["generation_method"]) for t in trials]


@pytest.mark.e2e
def test_parallelism_1_repeats_its_trials_for_a_seed(tmp_path: Path) -> None:
    runner = "{scheduler: inprocess}"
    a = _run(tmp_path, "repro-a", 8, 1, runner)
    b = _run(tmp_path, "repro-b", 8, 1, runner)
    assert _what(a) == _what(b)
    assert [t["generation_method"] for t in a][-1] == "MBM"  # the model's proposals repeat, not only the start


@pytest.mark.e2e
def test_the_simulated_clock_repeats_its_trials_at_parallelism_4(tmp_path: Path) -> None:
    runner = "{scheduler: simulated, cfg: {seed: 3, median_seconds: 60, sigma: 0.5}}"
    a = _run(tmp_path, "sim-a", 12, 4, runner)
    b = _run(tmp_path, "sim-b", 12, 4, runner)
    assert _what(a) == _what(b)
    assert sum(t["generation_method"] == "MBM" for t in a) >= 4
    meta = [(t["runner_metadata"]["simulated_start"], t["runner_metadata"]["simulated_end"]) for t in a]
    assert meta == [(t["runner_metadata"]["simulated_start"], t["runner_metadata"]["simulated_end"]) for t in b]
    # asynchronous: some trial started while others ran (at 0, four at once)
    assert sum(1 for s, _ in meta if s == 0.0) == 4
