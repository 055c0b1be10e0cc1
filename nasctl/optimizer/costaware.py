"""Cost-aware proposals: hypervolume improvement per unit of training cost, cooled.

Users pay for a search in GPU-hours, and in a NAS space one configuration's
training can cost several times another's (batch size, width, depth, the
cell's operations). qLogNEHVI alone ranks candidates by expected improvement
of the front, whatever each costs. With `optimizer.cost_aware` the model also
learns the log of each trial's cost (its device-seconds where it held devices,
else its running seconds, told by the loop with the trial's outcome) as one
more output, and new configurations are ranked by

    log EHVI(x) - alpha * log cost(x),

the log of the improvement per unit of cost raised to `alpha` (Snoek et al.'s
"expected improvement per second", with the cost cooling of Lee et al.'s
CArBO): alpha falls from 1 to 0 as the budget is spent (`cooling`: the share of
`budget.max_gpu_hours` or of `budget.max_trials` used so far), so the search
first prefers cheap candidates among those of similar promise and ends by
choosing on improvement alone, where the expensive members of the front are.
The cost model is a GP output like the objectives (Ax fits tracking metrics),
so it is exact where costs were observed and smooth between them.

Only log-valued improvement acquisitions are weighted (qLogNEHVI, nasctl's
`HypervolumeImprovement`, qLogNEI); while nothing is feasible (Ax's
probability of feasibility) the acquisition is left as Ax builds it.

The weighting travels from the optimizer to the acquisition in a context
variable, as the log-scale plan does (`logscale`): `AxOptimizer.generate` opens
`weighting(alpha)` around each call to Ax; outside it (Ax used elsewhere in
the process) nothing changes. Pure BoTorch on top of Ax's public acquisition
hooks; `benchmarks/ablation.py` variant `cost-aware` turns it on by default.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from botorch.acquisition.acquisition import AcquisitionFunction

COST_AWARE = False
"""Whether proposals weigh cost when the spec does not say (`optimizer.cost_aware`).
Off: docs/benchmarks.md ("Cost-aware proposals") has the measurement."""

COST_METRIC = "nasctl_log_cost"
"""The Ax tracking metric that holds log(cost) of each completed trial."""


def cooling(trials_share: float, gpu_share: float | None = None) -> float:
    """The weight alpha of the cost in the acquisition: 1 at the start, 0 once
    the budget is spent; the larger of the shares used (trials recorded of
    `budget.max_trials`, device-hours of `budget.max_gpu_hours`) decides."""
    used = max(trials_share, gpu_share if gpu_share is not None else 0.0)
    return min(1.0, max(0.0, 1.0 - used))


_ALPHA: contextvars.ContextVar[float | None] = contextvars.ContextVar("nasctl_cost_alpha", default=None)


@contextmanager
def weighting(alpha: float | None) -> Iterator[None]:
    """Weigh the cost by `alpha` in the proposals Ax makes inside the block (None or 0: not at all)."""
    token = _ALPHA.set(alpha)
    try:
        yield
    finally:
        _ALPHA.reset(token)


def current_alpha() -> float | None:
    """The weight of the proposal being made, None outside `weighting` or where it is 0."""
    alpha = _ALPHA.get()
    return alpha if alpha is not None and alpha > 0 else None


class CostWeighted(AcquisitionFunction):
    """`inner` (a log-valued acquisition) minus `scale` times the cost model's
    posterior mean at each candidate, summed over the candidates of a batch.

    `model` is the surrogate with every output; `column` its cost output, whose
    posterior mean is log(cost) standardised by Ax (`StandardizeY`: log cost =
    mean + sd * z), so `scale` = alpha * sd makes the penalty alpha * log(cost)
    up to a constant that no ranking sees. Pending points and everything else
    are the inner acquisition's.
    """

    _log = True  # read by Ax's `Acquisition` where it compares acquisition values

    def __init__(self, inner: AcquisitionFunction, model: Any, column: int, scale: float) -> None:
        super().__init__(model=inner.model)
        self.inner = inner
        self.cost_model = model
        self.column = column
        self.scale = float(scale)
        pending = getattr(inner, "X_pending", None)
        if pending is not None:
            super().set_X_pending(pending)

    def log_cost(self, X: torch.Tensor) -> torch.Tensor:
        """The cost model's standardised log cost of each candidate of `X` (batch x q x d), summed over q."""
        mean = torch.as_tensor(self.cost_model.posterior(X).mean)  # batch x q x outputs
        return mean[..., self.column].sum(dim=-1)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return self.inner(X) - self.scale * self.log_cost(X)  # type: ignore[no-any-return]

    def set_X_pending(self, X_pending: torch.Tensor | None = None) -> None:
        self.inner.set_X_pending(X_pending)
        super().set_X_pending(X_pending)  # BoTorch's greedy batch selection reads them here


def cost_column(outcomes: list[str]) -> int | None:
    """The model output that holds the cost (Ax's tracking metric), None where it is not modelled."""
    return outcomes.index(COST_METRIC) if COST_METRIC in outcomes else None


def cost_sd(standardized: Mapping[str, float]) -> float | None:
    """The standard deviation Ax's `StandardizeY` divided log(cost) by, None where unknown."""
    sd = standardized.get(COST_METRIC)
    return float(sd) if sd is not None and math.isfinite(sd) and sd > 0 else None
