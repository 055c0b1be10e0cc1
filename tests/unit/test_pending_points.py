"""Trials still running are pending points of the acquisition, not only excluded.

At parallelism > 1 the model proposes while other trials run. Ax hands the
running trials to the acquisition as pending points (qLogNEHVI integrates over
their predicted outcomes), and several candidates asked for in one request are
chosen one after the other, each with the earlier ones pending. Without that, a
model that has learnt nothing new would propose the same point again: the
acquisition optimisation is seeded, and nothing else changed between the two.
"""

from __future__ import annotations

import math

from nasctl.optimizer.ax_optimizer import AxOptimizer
from nasctl.spec import parse_spec

SPEC = """
name: pending
search_space:
  x0: {type: float, low: 0.0, high: 1.0}
  x1: {type: float, low: 0.0, high: 1.0}
objectives:
  f0: {goal: minimize, threshold: 1.5}
  f1: {goal: minimize, threshold: 1.5}
budget: {max_trials: 20, parallelism: 4}
trial: {script: /bin/true}
optimizer: {initial_trials: 5, seed: 7}
"""


def _values(p: dict[str, float]) -> dict[str, float]:
    """A smooth two-objective trade-off (a front along x0 + x1 = 1)."""
    x0, x1 = float(p["x0"]), float(p["x1"])
    return {"f0": x0 ** 2 + 0.5 * (x1 - 0.2) ** 2, "f1": (1 - x0) ** 2 + 0.5 * (x1 - 0.8) ** 2}


def _distance(a: dict[str, float], b: dict[str, float]) -> float:
    return math.dist((float(a["x0"]), float(a["x1"])), (float(b["x0"]), float(b["x1"])))


def _started() -> AxOptimizer:
    opt = AxOptimizer(parse_spec(SPEC))
    for c in opt.generate(5):
        opt.complete(c.index, _values(c.parameters))
    return opt


def test_a_proposal_made_while_a_trial_runs_avoids_that_trial() -> None:
    opt = _started()
    (first,) = opt.generate(1)  # the model's first proposal, then running
    (second,) = opt.generate(1)  # same data, the first one pending
    assert first.method == second.method == "MBM"
    assert _distance(first.parameters, second.parameters) > 0.02, (first, second)
    # the same model without the pending trial proposes the first point again
    fresh = _started()
    (again,) = fresh.generate(1)
    assert _distance(again.parameters, first.parameters) < 1e-6


def test_candidates_asked_for_together_are_different_points() -> None:
    opt = _started()
    batch = opt.generate(3)
    assert [c.method for c in batch] == ["MBM"] * 3
    for i, a in enumerate(batch):
        for b in batch[i + 1:]:
            assert _distance(a.parameters, b.parameters) > 0.02, batch
