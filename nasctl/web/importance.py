"""Parameter importance per objective: main effects of a random-forest surrogate.

Method (the quantity fANOVA reports as a parameter's individual importance):
for each objective, a scikit-learn random forest is fitted on the completed
trials' parameters; the main effect of parameter j is its partial dependence
f_j(x_j) = E[f(x_j, X_-j)], averaged over the observed trials, and its
importance is the share of the forest's prediction variance that the main
effect explains, Var(f_j) / Var(f) (a first-order Sobol index of the surrogate
under the trials' own distribution). `share` rescales the importances to sum
to one, as optuna-dashboard shows them.

Why a forest and not the optimizer's GP: the dashboard is a separate process
from the optimizer and has no fitted model to read; refitting the GP takes
seconds to minutes at thousands of trials, its lengthscales are only
comparable for continuous parameters in the unit cube, and it models whatever
transform the optimizer chose. A forest fits in under a second on 2,000
trials, handles choice parameters (one code per value: trees split on sets of
codes) and conditional parameters (missing values, which scikit-learn's trees
route natively) and is invariant to monotone transforms such as log scales.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nasctl.spec import ChoiceParameter, ExperimentSpec, FixedParameter, FloatParameter, IntParameter

#: Trees per forest, rows the partial dependence averages over, grid points per numeric parameter.
TREES = 64
BACKGROUND = 200
GRID = 16
CONTOUR_GRID = 24


@dataclass
class Encoding:
    """How one parameter becomes a column of the forest's input."""

    name: str
    kind: str  # "numeric" or "choice"
    log: bool = False
    categories: list[Any] = field(default_factory=list)

    def encode(self, v: Any) -> float:
        if v is None:
            return math.nan
        if self.kind == "choice":
            try:
                return float(self.categories.index(v))
            except ValueError:
                return math.nan
        try:
            f = float(v)
        except (TypeError, ValueError):
            return math.nan
        if self.log:
            return math.log10(f) if f > 0 else math.nan
        return f

    def decode(self, x: float) -> Any:
        if self.kind == "choice":
            return self.categories[int(x)]
        return 10**x if self.log else x


@dataclass
class ImportanceModel:
    """The forests of one experiment state and the importances derived from them."""

    cursor: int
    trials_used: int
    total_completed: int
    encodings: list[Encoding]
    X: np.ndarray
    forests: dict[str, Any]  # objective -> fitted RandomForestRegressor (absent: too few values)
    importance: dict[str, dict[str, float]]  # objective -> parameter -> Var(main effect) / Var(f)
    share: dict[str, dict[str, float]]  # the same, normalised to sum to one
    contours: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)


def encodings(spec: ExperimentSpec) -> list[Encoding]:
    out = []
    for name, p in spec.search_space.items():
        if isinstance(p, FixedParameter):
            continue
        if isinstance(p, ChoiceParameter):
            out.append(Encoding(name, "choice", categories=list(p.values)))
        elif isinstance(p, (IntParameter, FloatParameter)):
            out.append(Encoding(name, "numeric", log=p.log))
    return out


def _grid(col: np.ndarray, enc: Encoding, n: int) -> np.ndarray:
    col = col[~np.isnan(col)]
    if enc.kind == "choice":
        return np.unique(col)
    if not len(col):
        return np.zeros(0)
    return np.unique(np.quantile(col, np.linspace(0, 1, n)))


def _background(X: np.ndarray) -> np.ndarray:
    if len(X) <= BACKGROUND:
        return X
    picked: np.ndarray = X[np.linspace(0, len(X) - 1, BACKGROUND).astype(int)]
    return picked


def _main_effect(forest: Any, X: np.ndarray, j: int, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Partial dependence of the forest on column j at `grid`, and each grid point's weight."""
    B = _background(X)
    rows = np.repeat(B, len(grid), axis=0)
    rows[:, j] = np.tile(grid, len(B))
    pd = forest.predict(rows).reshape(len(B), len(grid)).mean(axis=0)
    col = X[:, j]
    if len(grid) and np.array_equal(grid, np.unique(col[~np.isnan(col)])):
        weights = np.array([(col == g).sum() for g in grid], dtype=float)  # choice: by frequency
    else:
        weights = np.ones(len(grid))  # quantile grid: equal mass
    return pd, weights / max(weights.sum(), 1.0)


def fit_importance(
    spec: ExperimentSpec,
    params: Sequence[Mapping[str, Any]],
    values: Mapping[str, Sequence[float | None]],
    cursor: int,
    total_completed: int,
) -> ImportanceModel:
    """Fit one forest per objective on the trials' parameters and derive the importances.

    An objective with fewer than 4 values (or no variation) gets no forest and
    every importance 0.
    """
    from sklearn.ensemble import RandomForestRegressor

    encs = encodings(spec)
    X = np.array([[e.encode(p.get(e.name)) for e in encs] for p in params], dtype=float).reshape(len(params), len(encs))
    forests: dict[str, Any] = {}
    importance: dict[str, dict[str, float]] = {}
    share: dict[str, dict[str, float]] = {}
    for name in spec.objectives:
        y = np.array([np.nan if v is None else v for v in values.get(name, [])], dtype=float)
        ok = ~np.isnan(y)
        imp = {e.name: 0.0 for e in encs}
        if ok.sum() >= 4 and np.ptp(y[ok]) > 0 and encs:
            forest = RandomForestRegressor(n_estimators=TREES, min_samples_leaf=2, random_state=0, n_jobs=1)
            forest.fit(X[ok], y[ok])
            forests[name] = forest
            total = float(np.var(forest.predict(X[ok])))
            for j, e in enumerate(encs):
                grid = _grid(X[ok][:, j], e, GRID)
                if len(grid) < 2 or total <= 0:
                    continue
                pd, w = _main_effect(forest, X[ok], j, grid)
                mean = float((pd * w).sum())
                imp[e.name] = min(1.0, float((w * (pd - mean) ** 2).sum()) / total)
        s = sum(imp.values())
        importance[name] = imp
        share[name] = {k: (v / s if s > 0 else 0.0) for k, v in imp.items()}
    return ImportanceModel(cursor, len(params), total_completed, encs, X, forests, importance, share)


def contour(model: ImportanceModel, x: str, y: str, objective: str) -> dict[str, Any]:
    """The forest's two-parameter partial dependence of `objective` on a grid.

    Raises:
        KeyError: an unknown parameter or an objective without a forest.
    """
    key = (x, y, objective)
    hit = model.contours.get(key)
    if hit is not None:
        return hit
    names = [e.name for e in model.encodings]
    i, j = names.index(x), names.index(y)
    forest = model.forests[objective]
    ex, ey = model.encodings[i], model.encodings[j]
    gx = _axis(model.X[:, i], ex)
    gy = _axis(model.X[:, j], ey)
    B = _background(model.X)[: BACKGROUND // 2]
    rows = np.repeat(B, len(gx) * len(gy), axis=0)
    xx, yy = np.meshgrid(gx, gy)  # z[row=y][col=x]
    rows[:, i] = np.tile(xx.ravel(), len(B))
    rows[:, j] = np.tile(yy.ravel(), len(B))
    z = forest.predict(rows).reshape(len(B), len(gy), len(gx)).mean(axis=0)
    result = {
        "x": {"name": x, "kind": ex.kind, "log": ex.log, "values": [ex.decode(v) for v in gx]},
        "y": {"name": y, "kind": ey.kind, "log": ey.log, "values": [ey.decode(v) for v in gy]},
        "objective": objective,
        "z": [[float(v) for v in row] for row in z],
    }
    model.contours[key] = result
    return result


def _axis(col: np.ndarray, enc: Encoding) -> np.ndarray:
    col = col[~np.isnan(col)]
    if enc.kind == "choice":
        return np.unique(col)
    if not len(col):
        return np.zeros(1)
    lo, hi = float(col.min()), float(col.max())
    return np.linspace(lo, hi, CONTOUR_GRID) if hi > lo else np.array([lo])
