"""Experiments for tests: a tiny real one for `nasctl run`, synthetic ones written through the Store."""

from __future__ import annotations

import random
from pathlib import Path

from nasctl.spec import parse_spec, spec_to_dict
from nasctl.store import Store
from nasctl.types import ExperimentRecord, Observation, TrialStatus

TINY_SCRIPT = Path(__file__).resolve().parent.parent / "web" / "scripts" / "tiny_trial.py"

TINY_SPEC = """
name: tiny
search_space:
  width: {{type: int, low: 4, high: 64}}
  lr: {{type: float, low: 0.001, high: 0.01, log: true}}
  act: {{type: choice, values: [relu, gelu]}}
objectives:
  val_acc: {{goal: maximize, threshold: 0.2}}
  num_params: {{goal: minimize, threshold: 4000}}
constraints: ["latency_ms <= 5.5"]
budget: {{max_trials: 10, parallelism: 2}}
trial: {{script: {script}}}
optimizer: {{method: sobol, seed: 3}}
"""
"""A 10-trial spec of TINY_SCRIPT's trials (one fails); format it with `script=TINY_SCRIPT`."""

SYNTH_SPEC = """
name: {name}
search_space:
  x: {{type: float, low: 0, high: 1}}
  act: {{type: choice, values: {choices}}}
objectives:
  acc: {{goal: maximize, threshold: 0.05}}
  size: {{goal: minimize}}
constraints: ["lat <= 8"]
budget: {{max_trials: {budget}}}
trial: {{script: train.py}}
"""


def add_synthetic(
    store: Store,
    name: str,
    n: int,
    *,
    seed: int = 0,
    choices: tuple[str, ...] = ("relu", "gelu"),
    finish: bool = True,
    work_dir: str | None = None,
) -> ExperimentRecord:
    """An experiment of `n` trials written through the Store's public methods (no jobs).

    Every 7th trial fails; the others complete with acc, size and lat values.
    """
    spec = parse_spec(SYNTH_SPEC.format(name=name, choices=list(choices), budget=max(n, 1)))
    exp = store.create_experiment(name, spec_to_dict(spec), work_dir or f"/nonexistent/{name}")
    rng = random.Random(seed)
    for i in range(n):
        x = rng.random()
        t = store.add_trial(exp.id, i, {"x": x, "act": rng.choice(choices)}, "Sobol", f"{name}-{i}", "")
        t = store.mark_trial_running(t.id, f"local_cwd://synthetic/{name}-{i}", "local_cwd", {})
        store.add_observations(t.id, [Observation("acc", s, x * s / 3) for s in range(1, 4)])
        if not finish:
            continue
        if i % 7 == 3:
            store.finish_trial(t.id, TrialStatus.FAILED, failure_reason="synthetic failure")
        else:
            store.finish_trial(
                t.id, TrialStatus.COMPLETED, {"acc": x, "size": 10 + 100 * x * x + rng.random(), "lat": 10 * rng.random()}
            )
    return exp
