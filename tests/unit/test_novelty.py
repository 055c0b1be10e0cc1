"""No repeated proposals while nothing is feasible: the unit-cube geometry, the
guard's state, and the guard inside the real optimizer."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import torch
from botorch.test_functions.multi_objective import BraninCurrin

from nasctl.optimizer.novelty import METHOD, REPEAT_RADIUS, RepeatGuard
from nasctl.optimizer.ax_optimizer import AxOptimizer, RestoredTrial
from nasctl.spec import ExperimentSpec, parse_spec

MIXED = {
    "lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
    "width": {"type": "int", "low": 16, "high": 272},
    "depth": {"type": "choice", "values": [1, 2, 3, 4, 5], "ordered": True},
    "act": {"type": "choice", "values": ["relu", "gelu", "tanh"]},
}


def spec_for(space: dict[str, Any], objectives: dict[str, Any], seed: int = 0, **extra: Any) -> ExperimentSpec:
    data = {
        "name": "n",
        "search_space": space,
        "objectives": objectives,
        "budget": {"max_trials": 40},
        "trial": {"script": "/bin/true"},
        "optimizer": {"seed": seed},
        **extra,
    }
    return parse_spec(json.dumps(data))


def test_distance_is_per_parameter_rms_in_the_unit_cube() -> None:
    g = RepeatGuard(spec_for(MIXED, {"loss": {"goal": "minimize", "threshold": 1.0}}))
    a = {"lr": 1e-3, "width": 16, "depth": 1, "act": "relu"}
    assert g.distances([a], [a])[0, 0] == 0.0
    # a log-scale parameter moves by its share of the log range: 1e-3 -> 1e-2 is 1/3
    assert g.distances([{**a, "lr": 1e-2}], [a])[0, 0] == pytest.approx(math.sqrt((1 / 3) ** 2 / 4))
    assert g.distances([{**a, "width": 272}], [a])[0, 0] == pytest.approx(math.sqrt(1 / 4))
    assert g.distances([{**a, "depth": 2}], [a])[0, 0] == pytest.approx(math.sqrt(0.25**2 / 4))
    # two different unordered choices are 1 apart, whichever they are
    assert g.distances([{**a, "act": "gelu"}], [a])[0, 0] == g.distances([{**a, "act": "tanh"}], [a])[0, 0] == 0.5
    near = {**a, "width": 18}  # 2/256 of the range
    assert g.repeats(near, [a]) and not g.repeats({**a, "width": 40}, [a]) and not g.repeats(a, [])


def test_the_replacement_is_the_valid_sobol_point_farthest_from_every_trial() -> None:
    g = RepeatGuard(spec_for(MIXED, {"loss": {"goal": "minimize", "threshold": 1.0}}))
    earlier = [{"lr": 1e-3, "width": 16, "depth": 1, "act": "relu"}, {"lr": 0.05, "width": 250, "depth": 5, "act": "gelu"}]
    p = g.spread_point(earlier, seed=7)
    assert p == g.spread_point(earlier, seed=7)  # deterministic for a seed
    assert 1e-4 <= p["lr"] <= 1e-1 and isinstance(p["width"], int) and 16 <= p["width"] <= 272
    assert p["depth"] in [1, 2, 3, 4, 5] and p["act"] in ["relu", "gelu", "tanh"]
    others = [g.spread_point([], seed=s) for s in range(20)]  # the first point of other scrambles
    gap = g.distances([p], earlier).min()
    assert gap >= max(g.distances([o], earlier).min() for o in others)


def test_the_guard_watches_until_a_trial_meets_every_threshold_and_constraint() -> None:
    objectives = {"err": {"goal": "minimize", "threshold": 0.5}, "acc": {"goal": "maximize", "threshold": 0.8}}
    g = RepeatGuard(spec_for({"x": {"type": "float", "low": 0, "high": 1}}, objectives, constraints=["size <= 10"]))
    assert g.active
    g.observe(0, {"err": 0.1})  # not every objective known: ignored
    g.observe(1, {"err": 0.4, "acc": 0.7, "size": 5})  # misses the acc threshold
    g.observe(2, {"err": 0.4, "acc": 0.9, "size": 50})  # violates the constraint
    assert g.active
    g.observe(3, {"err": 0.4, "acc": 0.9, "size": 5})
    assert not g.active
    # nothing to meet: the model's own rule (qLogNEHVI) never stalls this way
    free = RepeatGuard(spec_for({"x": {"type": "float", "low": 0, "high": 1}}, {"err": {"goal": "minimize"}}))
    assert not free.active


def _branin_currin(p: dict[str, Any]) -> dict[str, float]:
    y = BraninCurrin()(torch.tensor([[float(p["x0"]), float(p["x1"])]], dtype=torch.float64))[0]
    return {"f0": float(y[0]), "f1": float(y[1])}


BC_SPACE = {f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(2)}
BC_OBJECTIVES = {"f0": {"goal": "minimize", "threshold": 18.0}, "f1": {"goal": "minimize", "threshold": 6.0}}


def test_no_repeated_proposals_while_nothing_is_feasible() -> None:
    """BraninCurrin, seed 3: after the quasi-random start, Ax's probability-of-
    feasibility rule proposed x = (1, 0.57 +- 0.01) for 8 trials in a row. With
    the guard, a proposal next to an earlier trial becomes an exploring one."""
    opt = AxOptimizer(spec_for(BC_SPACE, BC_OBJECTIVES, seed=3))
    seen: list[dict[str, Any]] = []
    methods = []
    for _ in range(12):
        (c,) = opt.generate(1)
        if c.method in ("MBM", METHOD) and opt.guard.active and seen:
            assert opt.guard.distances([c.parameters], seen).min() >= REPEAT_RADIUS, (c, seen)
        seen.append(c.parameters)
        methods.append(c.method)
        opt.complete(c.index, _branin_currin(c.parameters))
    assert METHOD in methods and methods.count("MBM") >= 5


def test_explored_trials_survive_a_resume(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exploring trial is an ordinary trial to Ax: indices stay equal to the
    store's, and a rebuilt optimizer replays it and proposes on."""
    spec = spec_for(BC_SPACE, BC_OBJECTIVES, seed=1, optimizer={"seed": 1, "initial_trials": 3})
    monkeypatch.setattr(RepeatGuard, "repeats", lambda self, params, earlier: True)  # every MBM proposal
    opt = AxOptimizer(spec)
    done = []
    for _ in range(5):
        (c,) = opt.generate(1)
        values = {"f0": 100.0, "f1": 100.0}  # never feasible
        opt.complete(c.index, values)
        done.append(RestoredTrial(c.index, c.parameters, "COMPLETED", c.method, values))
    assert [t.method for t in done] == ["CenterOfSearchSpace", "Sobol", "Sobol", METHOD, METHOD]
    assert [t.index for t in done] == [0, 1, 2, 3, 4]
    monkeypatch.undo()
    again = AxOptimizer(spec)
    again.restore(done)
    (c,) = again.generate(1)
    assert c.index == 5 and c.method in ("MBM", METHOD)
