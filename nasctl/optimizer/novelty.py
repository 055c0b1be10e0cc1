"""No repeated proposals while nothing is feasible.

While no completed trial meets every objective threshold and constraint, Ax
proposes by the probability of feasibility alone. That rule can settle on one
spot and propose it again and again (8 trials in a row on one BraninCurrin
benchmark seed, each within 0.02 of the last in the unit cube), learning
nothing and scoring nothing. `RepeatGuard` notices a model-based proposal that
lands next to a trial already proposed and replaces it with the most distant
of a batch of scrambled Sobol points (maximin), so the trial explores instead.

Distance is measured in the unit cube of the tunable parameters: a range
parameter is scaled to [0, 1] (in log space when `log: true`), an ordered
choice by its position, and two different unordered choices are 1 apart.
"Next to" means a root-mean-square difference per parameter below
`REPEAT_RADIUS`.

Pure: no Ax import, deterministic for a given seed and trial index (so a
resumed run draws the same replacement an uninterrupted one would).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from nasctl.pareto import compute_front
from nasctl.spec import ChoiceParameter, ExperimentSpec, FloatParameter, IntParameter
from nasctl.types import ParamValue

REPEAT_RADIUS = 0.02
"""Root-mean-square per-parameter distance (unit cube) under which a proposal
repeats an earlier trial."""

SPREAD_POINTS = 512
"""Sobol points the replacement is chosen from."""

METHOD = "Explore"
"""The method recorded for a replacement (shown in `status` and the dashboard)."""


def _unit(p: IntParameter | FloatParameter, v: float) -> float:
    lo, hi, x = float(p.low), float(p.high), float(v)
    if p.log:
        lo, hi, x = math.log(lo), math.log(hi), math.log(x)
    return (x - lo) / (hi - lo)


def _from_unit(p: IntParameter | FloatParameter, u: float) -> float:
    lo, hi = float(p.low), float(p.high)
    if p.log:
        return math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
    return lo + u * (hi - lo)


class RepeatGuard:
    """Watches completed trials' values and checks proposals for repeats."""

    def __init__(self, spec: ExperimentSpec) -> None:
        self.spec = spec
        self.params = dict(spec.tunable)
        self._feasible = False
        self.enabled = any(o.threshold is not None for o in spec.objectives.values()) or bool(
            spec.parsed_constraints
        )

    # --- what the model has seen ----------------------------------------------
    def observe(self, index: int, values: Mapping[str, float]) -> None:
        """A trial's final (or, for an early-stopped one, optimistic) values."""
        if self._feasible or not self.enabled:
            return
        if not all(n in values and math.isfinite(values[n]) for n in self.spec.objectives):
            return
        # feasibility is per trial (thresholds and constraints; an objective
        # without a threshold admits every value), so the new trial alone decides
        front = compute_front([(index, values)], self.spec.objectives, self.spec.parsed_constraints)
        self._feasible = bool(front.feasible)

    @property
    def active(self) -> bool:
        """True while thresholds or constraints exist and no trial has met them all."""
        return self.enabled and not self._feasible

    # --- geometry ----------------------------------------------------------------
    def encode(self, points: Sequence[Mapping[str, ParamValue]]) -> tuple[np.ndarray, np.ndarray]:
        """Range and ordered-choice parameters as rows in the unit cube, and the
        unordered choices as rows of value positions (compared for equality)."""
        x = np.zeros((len(points), 0))
        c = np.zeros((len(points), 0), dtype=int)
        cols: list[list[float]] = []
        cat_cols: list[list[int]] = []
        for name, p in self.params.items():
            vals = [pt[name] for pt in points]
            if isinstance(p, ChoiceParameter):
                pos = [p.values.index(v) for v in vals]
                if p.ordered:
                    cols.append([i / (len(p.values) - 1) for i in pos])
                else:
                    cat_cols.append(pos)
            else:
                cols.append([_unit(p, float(v)) for v in vals])
        if cols:
            x = np.array(cols, dtype=float).T.reshape(len(points), len(cols))
        if cat_cols:
            c = np.array(cat_cols, dtype=int).T.reshape(len(points), len(cat_cols))
        return x, c

    def distances(
        self, points: Sequence[Mapping[str, ParamValue]], earlier: Sequence[Mapping[str, ParamValue]]
    ) -> np.ndarray:
        """Root-mean-square per-parameter differences in the unit cube, one row per point."""
        xa, ca = self.encode(points)
        xb, cb = self.encode(earlier)
        sq = ((xa[:, None, :] - xb[None, :, :]) ** 2).sum(-1) + (ca[:, None, :] != cb[None, :, :]).sum(-1)
        rms: np.ndarray = np.sqrt(sq / max(1, len(self.params)))
        return rms

    def repeats(self, params: Mapping[str, ParamValue], earlier: Sequence[Mapping[str, ParamValue]]) -> bool:
        """True when `params` lies within REPEAT_RADIUS of an earlier trial."""
        return bool(earlier) and float(self.distances([params], earlier).min()) < REPEAT_RADIUS

    def spread_point(self, earlier: Sequence[Mapping[str, ParamValue]], seed: int) -> dict[str, ParamValue]:
        """The Sobol point (of SPREAD_POINTS, scrambled with `seed`) farthest from
        every earlier trial."""
        from scipy.stats import qmc

        u = qmc.Sobol(d=len(self.params), scramble=True, seed=seed).random(SPREAD_POINTS)
        candidates = [self._from_unit_row(row) for row in u]
        if not earlier:
            return candidates[0]
        return candidates[int(np.argmax(self.distances(candidates, earlier).min(axis=1)))]

    def _from_unit_row(self, row: np.ndarray) -> dict[str, ParamValue]:
        out: dict[str, ParamValue] = {}
        for u, (name, p) in zip(row, self.params.items()):
            if isinstance(p, ChoiceParameter):
                out[name] = p.values[min(len(p.values) - 1, int(u * len(p.values)))]
            elif isinstance(p, IntParameter):
                out[name] = int(min(p.high, max(p.low, round(_from_unit(p, float(u))))))
            else:
                assert isinstance(p, FloatParameter)
                out[name] = float(min(p.high, max(p.low, _from_unit(p, float(u)))))
        return out
