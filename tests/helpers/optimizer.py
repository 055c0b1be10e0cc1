"""Optimizer test material: specs over small spaces, cheap deterministic outcomes, a generate-complete run."""

from __future__ import annotations

import json
from typing import Any

from nasctl.optimizer.ax_optimizer import AxOptimizer
from nasctl.spec import ExperimentSpec, parse_spec

OPS = ["none", "skip", "conv1", "conv3", "pool"]


def make_spec(space: dict[str, Any], method: str = "auto", max_trials: int = 6, initial: int | None = 3) -> ExperimentSpec:
    """A two-objective spec (err, size) over `space` with the given optimizer method, seed 1."""
    data = {
        "name": "m",
        "search_space": space,
        "objectives": {"err": {"goal": "minimize", "threshold": 2.0}, "size": {"goal": "minimize", "threshold": 10.0}},
        "budget": {"max_trials": max_trials},
        "trial": {"script": "/bin/true"},
        "optimizer": {"method": method, "seed": 1, **({"initial_trials": initial} if initial else {})},
    }
    return parse_spec(json.dumps(data))


CELL = {f"op{i}": {"type": "choice", "values": OPS} for i in range(4)}
MIXED = {
    "lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
    "width": {"type": "int", "low": 8, "high": 64},
    "act": {"type": "choice", "values": ["relu", "gelu", "tanh"]},
    "depth": {"type": "choice", "values": [1, 2]},
    "width_2": {"type": "int", "low": 4, "high": 32, "when": {"depth": [2]}},
}


def outcome(p: dict[str, Any]) -> dict[str, float]:
    """A cheap deterministic two-objective function (err, size) of any space (CELL, MIXED, ...)."""
    h = sum(ord(str(v)[0]) * (i + 1) for i, v in enumerate(p.values()))
    return {"err": (h % 17) / 17.0, "size": float(h % 7) + 1.0}


def run(opt: AxOptimizer, n: int) -> list[Any]:
    """`n` candidates generated one at a time, each completed with its `outcome`."""
    out = []
    for _ in range(n):
        (c,) = opt.generate(1)
        opt.complete(c.index, outcome(c.parameters))
        out.append(c)
    return out


COMPAT_SPEC = """
name: compat
search_space:
  x0: {type: float, low: 0.0, high: 1.0}
  x1: {type: float, low: 0.0, high: 1.0}
objectives:
  f1: {goal: minimize, threshold: 2.0}
  f2: {goal: minimize, threshold: 2.0}
budget: {max_trials: 10}
trial: {script: /bin/true}
optimizer: {initial_trials: 3, seed: 0}
"""
"""Two floats, two objectives, seed 0: the spec of tests/unit/test_optimizer_compat.py."""


def compat_outcome(p: dict[str, Any]) -> dict[str, float]:
    """COMPAT_SPEC's two objectives of x0 and x1."""
    x0, x1 = float(p["x0"]), float(p["x1"])
    return {"f1": x0 + 0.1 * x1, "f2": (1 - x0) ** 2 + x1}
