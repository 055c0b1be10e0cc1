"""Log-scale modelling for objectives whose values span orders of magnitude.

The GP's stationary kernel assumes one length scale of change everywhere. A
loss that falls from 1e-2 to 1e-4 over the search space breaks that on the
raw scale: the region of good (small) values is a flat floor under a few
large values, and the model cannot tell the best configurations apart, which
is where the Pareto front is. On the log scale the same metric changes evenly.
Rank-based methods (TPE) are immune to this; a GP must be told.

`WideLogY` is an Ax transform (a `LogY` that picks its own metrics): at every
fit, it models log(y) for each unconstrained objective whose observed values,
after Ax's winsorisation, are positive and spread multiplicatively: the middle
half of them spans a decade or more (`wide_metrics`). Objectives that vary
within a decade (accuracies, error rates of trained models, sizes, latencies)
are left as they are, so a space without such a metric gets exactly Ax's own
transforms. The choice is made again at every proposal from the data so far,
like Ax's winsorisation cutoffs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from ax.adapter.transforms.log_y import LogY

SPAN = 10.0
"""Ratio of the upper to the lower quartile of the observed values at which an
objective is modelled on the log scale: its middle half spans a decade."""

FLOOR = 1e-6
"""An objective whose smallest observed value is below this fraction of its
largest reaches zero (to rounding: DTLZ2's first objective takes values of
1e-16 at its edge) and is left on its own scale: its log would be dominated
by how close to zero those values happen to be."""


def wide_metrics(values: Mapping[str, Iterable[float]], bounds: Mapping[str, Iterable[float]]) -> list[str]:
    """The metrics of `values` (observed values by metric) to model on the log scale.

    A metric qualifies when its finite values (at least four) are all
    positive, its upper quartile is at least `SPAN` times its lower quartile,
    its smallest value is at least `FLOOR` times its largest, and every bound
    in `bounds` for it (objective thresholds) is positive, so that the bound
    has a logarithm too. Quartiles, not the extremes, measure the spread: a
    few outlying values do not make a metric multiplicative."""
    chosen = []
    for name, raw in values.items():
        finite = sorted(float(v) for v in raw if math.isfinite(v))
        if len(finite) < 4 or finite[0] <= 0 or finite[0] < FLOOR * finite[-1]:
            continue
        if any(b <= 0 for b in bounds.get(name, ())):
            continue
        lower, upper = np.percentile(finite, [25, 75])
        if upper >= SPAN * lower:
            chosen.append(name)
    return chosen


def with_wide_log(transforms: list[type]) -> list[type]:
    """`transforms` (an Ax adapter's list) with `WideLogY` right after the
    winsorisation, which bounds the span by the thresholds first."""
    from ax.adapter.transforms.winsorize import Winsorize

    at = transforms.index(Winsorize) + 1
    return [*transforms[:at], WideLogY, *transforms[at:]]


def logged_metrics(adapter: Any) -> set[str]:
    """The (Ax) metrics that a fitted Ax adapter's `WideLogY` put on the log scale."""
    transform = adapter.transforms.get(WideLogY.__name__) if adapter is not None else None
    return set(transform.metric_signatures) if isinstance(transform, WideLogY) else set()


class WideLogY(LogY):  # type: ignore[misc]
    """Ax's `LogY`, applied to the objectives that `wide_metrics` picks from the
    data it is fitted to (after the transforms before it, e.g. winsorisation)."""

    def __init__(
        self,
        search_space: Any = None,
        experiment_data: Any = None,
        adapter: Any = None,
        config: Any = None,
    ) -> None:
        metrics: list[str] = []
        opt = getattr(adapter, "_optimization_config", None)
        if experiment_data is not None and opt is not None and not experiment_data.observation_data.empty:
            means = experiment_data.observation_data["mean"]
            # a constrained metric is left to BilogY, which reads its bound untransformed
            constrained = {sig for c in opt.outcome_constraints for sig in c.metric_signatures}
            objectives = {m for m in opt.objective.metric_signatures if m in means.columns} - constrained
            bounds: dict[str, list[float]] = {}
            for c in getattr(opt, "objective_thresholds", []):
                for sig in c.metric_signatures:
                    bounds.setdefault(sig, []).append(-1.0 if c.relative else float(c.bound))
            metrics = wide_metrics({m: means[m].tolist() for m in sorted(objectives)}, bounds)
        super().__init__(
            search_space=search_space,
            experiment_data=experiment_data,
            adapter=adapter,
            config={**(config or {}), "metrics": metrics},
        )
