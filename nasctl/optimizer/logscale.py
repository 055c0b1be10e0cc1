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

The log scale is for the model only. The hypervolume a user is after is
measured on the objectives' own scale, and Ax's `LogY` also moves the
objective thresholds (the reference point) to the log scale, so BoTorch's
hypervolume improvement would be measured in log units: a gain near an
objective's floor (a loss going from 1e-4 to 5e-5) would weigh as much as
one near its threshold (1e-2 to 5e-3). nasctl's Ax `Acquisition` subclass
(`acquisition.NasctlAcquisition`, chosen in the generation step) measures it
on the raw scale: for each objective on the log scale, the model's posterior
samples and the threshold are mapped back with `raw_units` before the
hypervolume is computed (`raw_scale_plan`, `RawScaleObjective`). The mapping is monotone, so
which trials are Pareto-optimal does not change, only how much each gain is
worth.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from ax.adapter.transforms.log_y import LogY
from ax.exceptions.model import ModelError
from botorch.acquisition.multi_objective.objective import MCMultiOutputObjective

from nasctl.optimizer import compat

SPAN = 10.0
"""Ratio of the upper to the lower quartile of the observed values at which an
objective is modelled on the log scale: its middle half spans a decade."""

RAW_SCALE = True
"""Measure hypervolume improvements on the objectives' own scale (False: on
the model's log scale, as Ax does; for `benchmarks/ablation.py`)."""

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


class WideLogY(LogY):
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
        opt = compat.adapter_optimization_config(adapter)
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
        proposal = _PROPOSAL.get()
        if proposal is not None and adapter is not None:
            proposal.adapter = adapter  # the adapter whose transforms the acquisition will see


# --- the hypervolume improvement on the raw scale ------------------------------------------
#
# Between the adapter (which knows the transforms) and the acquisition (which knows model
# outputs only), the adapter of the proposal being made travels in a context variable: the
# optimizer opens a `proposal()` around each call to Ax, `WideLogY` records the adapter it
# belongs to, and the acquisition reads the log-scale metrics' standard deviations from that
# adapter's transforms. Outside a `proposal()` (Ax used elsewhere in the process) nothing is
# recorded and the acquisition is Ax's.


@dataclass
class _Proposal:
    adapter: Any = None


_PROPOSAL: contextvars.ContextVar[_Proposal | None] = contextvars.ContextVar("nasctl_proposal", default=None)


@contextmanager
def proposal() -> Iterator[None]:
    """Measure the hypervolume improvements of the proposals Ax makes inside the
    `with` block on the raw scale (see the module docstring)."""
    token = _PROPOSAL.set(_Proposal())
    try:
        yield
    finally:
        _PROPOSAL.reset(token)


def proposal_adapter() -> Any:
    """The adapter of the proposal being made (inside `proposal()`, once Ax has fitted it), else None."""
    current = _PROPOSAL.get()
    return current.adapter if current is not None else None


def standardized_sds(adapter: Any) -> dict[str, float]:
    """The standard deviation Ax's `StandardizeY` divided each metric by, for a fitted adapter."""
    standardize = adapter.transforms.get("StandardizeY") if adapter is not None else None
    sds = getattr(standardize, "Ystd", None) or {}
    return {str(k): float(v) for k, v in sds.items()}


def logged_sds(adapter: Any) -> dict[str, float]:
    """The log-scale standard deviation (Ax's `StandardizeY` after `WideLogY`) of
    each metric a fitted adapter models on the log scale."""
    logged: dict[str, float] = {}
    log_transform = adapter.transforms.get(WideLogY.__name__) if adapter is not None else None
    standardize = adapter.transforms.get("StandardizeY") if adapter is not None else None
    if isinstance(log_transform, WideLogY) and standardize is not None:
        for name in log_transform.metric_signatures:
            sd = getattr(standardize, "Ystd", {}).get(name)
            if sd is not None and math.isfinite(sd) and sd > 0:
                logged[name] = float(sd)
    return logged


def raw_units(z: Any, sd: Any) -> Any:
    """A standardised log value `z` (Ax's `StandardizeY` after `LogY`: log y =
    mean + sd * z) as the raw value y, measured from the geometric mean
    exp(mean) in units of exp(mean) * sd: expm1(sd * z) / sd.

    Any increasing affine map of y gives the same Pareto front and the same
    ranking of hypervolume improvements; this one keeps the values near the
    geometric mean on the scale of `z` (its slope there is 1), so BoTorch's
    smoothing temperatures, which are absolute (1e-2, 1e-6) and tuned for
    standardised outcomes, act as they would on a model of the raw values."""
    return torch.expm1(sd * z) / sd


def _hypervolume_classes() -> tuple[type, ...]:
    from botorch.acquisition.multi_objective.logei import (
        qLogExpectedHypervolumeImprovement,
        qLogNoisyExpectedHypervolumeImprovement,
    )
    from botorch.acquisition.multi_objective.monte_carlo import (
        qExpectedHypervolumeImprovement,
        qNoisyExpectedHypervolumeImprovement,
    )

    return (
        qLogExpectedHypervolumeImprovement,
        qLogNoisyExpectedHypervolumeImprovement,
        qExpectedHypervolumeImprovement,
        qNoisyExpectedHypervolumeImprovement,
    )


class RawScaleObjective(MCMultiOutputObjective):
    """`inner` (Ax's objective, or none) applied to posterior samples whose
    log-scale columns are mapped back to the raw scale (`raw_units`)."""

    columns: torch.Tensor
    sds: torch.Tensor

    def __init__(self, inner: Any, columns: list[int], sds: list[float]) -> None:
        super().__init__()
        self.inner = inner
        self.register_buffer("columns", torch.tensor(columns, dtype=torch.long))
        self.register_buffer("sds", torch.tensor(sds, dtype=torch.float64))

    def forward(self, samples: torch.Tensor, X: torch.Tensor | None = None) -> torch.Tensor:
        columns = self.columns.to(samples.device)
        raw = raw_units(samples.index_select(-1, columns), self.sds.to(samples))
        samples = samples.index_copy(-1, columns, raw)
        return self.inner(samples, X=X) if self.inner is not None else samples


def _model_columns(acquisition: Any, logged: Mapping[str, float]) -> tuple[list[int], list[float]]:
    """The model-output columns of `acquisition` that are logged metrics, with their sds."""
    try:
        outcomes = list(acquisition.surrogate.outcomes)
    except ModelError:  # a surrogate not fitted yet
        outcomes = []
    subset = compat.acquisition_subset_indices(acquisition)
    names = [outcomes[int(i)] for i in subset] if subset is not None else outcomes
    columns = [j for j, name in enumerate(names) if name in logged]
    return columns, [float(logged[names[j]]) for j in columns]


def _objective_columns(weights: torch.Tensor) -> list[tuple[int, float]] | None:
    """(model-output column, weight) of each objective, in the objectives' order, from
    Ax's objective weights (one row per objective, one column per model output). None
    when they are not such a matrix or an objective mixes several outputs: the
    acquisition is then left as Ax builds it."""
    if weights.ndim != 2:
        return None
    out = []
    for row in weights:
        nonzero = torch.nonzero(row).reshape(-1)
        if nonzero.numel() != 1:
            return None
        j = int(nonzero[0])
        out.append((j, float(row[j])))
    return out


def raw_scale_plan(acquisition: Any, botorch_acqf_class: type) -> tuple[list[int], list[float], torch.Tensor] | None:
    """For a hypervolume-improvement acquisition (an Ax `Acquisition`) while objectives
    are on the log scale: the model-output columns to map back, their log-scale sds, and
    the reference point mapped the same way. None where Ax's own acquisition applies."""
    current = _PROPOSAL.get()
    if not RAW_SCALE or current is None:
        return None
    logged = logged_sds(current.adapter)
    thresholds = acquisition.objective_thresholds  # maximisation-aligned, one per objective
    if not logged or thresholds is None or not issubclass(botorch_acqf_class, _hypervolume_classes()):
        return None
    columns, sds = _model_columns(acquisition, logged)
    found = _objective_columns(compat.acquisition_objective_weights(acquisition))
    if not columns or found is None or len(found) != thresholds.shape[-1]:
        return None
    mapped = thresholds.clone()
    for i, (j, w) in enumerate(found):
        if j in columns:
            sd = torch.tensor(sds[columns.index(j)], dtype=thresholds.dtype, device=thresholds.device)
            mapped[i] = w * raw_units(thresholds[i] / w, sd)
    return columns, sds, mapped
