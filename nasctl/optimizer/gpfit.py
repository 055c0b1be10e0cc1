"""Fitting the GP's hyperparameters: warm starts between proposals.

Ax builds a new GP for every proposal and fits its hyperparameters (length
scales, output scale, noise, mean) from their initial values with L-BFGS-B.
A proposal follows one new observation, so the previous proposal's optimum is
a far better starting point: measured on HPOLib (6 parameters, 46 trials),
a cold fit took 395 likelihood evaluations, 1.9 s of a 3.5 s proposal.

`FitCache` keeps the fitted parameters of one optimizer's models. While a
cache is active (`FitCache.active`, entered around each proposal), every GP
that Ax fits starts from the parameters the same model had at the previous
proposal. To keep a warm start from holding on to an optimum the data has
outgrown, a fit starts cold again whenever the training set has grown by
`COLD_GROWTH` since the last cold start, and every fit on fewer than
`WARM_FROM` points is cold. Outside an active cache (Ax used
elsewhere in the process) fits are Ax's own.

The cache is per optimizer and in memory: a resumed run starts cold once.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

COLD_GROWTH = 1.25
"""A fit starts cold when the training set is this many times its size at the
last cold start (at 40-50 trials: about one proposal in five)."""

WARM_FROM = 20
"""A fit starts warm only from this many training points on; smaller sets are
fitted cold (cheap, and their optimum the least settled). With 16 trials at
once, 30-trial runs fit every model on at most 14 results, and warm starts from
fits on 5-13 of them cost BraninCurrin HV@30 0.509 -> 0.363 (10 seeds, worse on
8); with fits below 20 points cold the other runs measured stayed level and the
proposals cost the same (docs/benchmarks.md, "Warm-started GP fits").
`benchmarks/ablation.py` variant `warm-from-N` sets it (0: warm from the first
fit)."""

WARM_MAXITER = 40
"""L-BFGS-B iterations of a warm-started fit."""

CATEGORICAL_MAXITER = 100
"""L-BFGS-B iterations for fitting the categorical GP's hyperparameters. The
mixed kernel's many lengthscales made BoTorch's fit (no limit) take ~1,000
likelihood evaluations; the optimum moves little after the first hundred."""


@dataclass
class _Entry:
    shapes: tuple[tuple[str, tuple[int, ...]], ...]
    values: dict[str, Any]
    cold_size: int


@dataclass
class FitCache:
    """Fitted GP parameters of one optimizer, by the order in which Ax fits its models."""

    entries: dict[tuple[str, int], _Entry] = field(default_factory=dict)
    fits: int = 0  # fits done while active
    warm_fits: int = 0
    _ordinal: int = 0

    @contextmanager
    def active(self) -> Iterator[FitCache]:
        """Use this cache for the fits Ax does inside the `with` block (one proposal)."""
        self._ordinal = 0
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)

    def fit(self, model: Any, mll: Any, optimizer_kwargs: dict[str, Any] | None) -> None:
        import torch
        from botorch.fit import fit_gpytorch_mll

        key = (type(model).__name__, self._ordinal)
        self._ordinal += 1
        params = dict(model.named_parameters())
        shapes = tuple((n, tuple(p.shape)) for n, p in params.items())
        size = int(model.train_inputs[0].shape[-2])
        entry = self.entries.get(key)
        warm = entry is not None and entry.shapes == shapes and size < COLD_GROWTH * entry.cold_size \
            and size >= WARM_FROM
        if warm:
            assert entry is not None
            with torch.no_grad():
                for n, p in params.items():
                    p.copy_(entry.values[n])
            # from a near-optimum the likelihood is flat in the directions the data
            # does not pin down (long length scales), where L-BFGS-B would creep on
            options = {**(optimizer_kwargs or {}).get("options", {}), "maxiter": WARM_MAXITER}
            optimizer_kwargs = {**(optimizer_kwargs or {}), "options": options}
        fit_gpytorch_mll(mll, optimizer_kwargs=optimizer_kwargs)
        self.fits += 1
        self.warm_fits += int(warm)
        self.entries[key] = _Entry(
            shapes,
            {n: p.detach().clone() for n, p in model.named_parameters()},
            entry.cold_size if warm and entry is not None else size,
        )


_CURRENT: contextvars.ContextVar[FitCache | None] = contextvars.ContextVar("nasctl_fit_cache", default=None)


def _fit(model: Any, mll_class: Any, mll_options: dict[str, Any] | None, optimizer_kwargs: dict[str, Any] | None) -> None:
    from botorch.fit import fit_gpytorch_mll

    mll = mll_class(likelihood=model.likelihood, model=model, **(mll_options or {}))
    cache = _CURRENT.get()
    if cache is None:
        fit_gpytorch_mll(mll, optimizer_kwargs=optimizer_kwargs)
    else:
        cache.fit(model, mll, optimizer_kwargs)


def register() -> None:
    """Route Ax's fits of single-task GPs and of the categorical method's GP
    through `_fit` (once per process), with the registration hook of Ax's
    `fit_botorch_model` dispatcher (Ax's documented way to fit a model class
    its own way). Outside an active `FitCache` a SingleTaskGP's fit is Ax's
    (`fit_gpytorch_mll` with its defaults)."""
    if getattr(register, "done", False):
        return
    from ax.generators.torch.botorch_modular.utils import fit_botorch_model
    from botorch.models.gp_regression import SingleTaskGP

    from nasctl.optimizer import catgp

    def _fit_single(model: Any, mll_class: Any, mll_options: dict[str, Any] | None = None) -> None:
        _fit(model, mll_class, mll_options, None)

    def _fit_mixed(model: Any, mll_class: Any, mll_options: dict[str, Any] | None = None) -> None:
        _fit(model, mll_class, mll_options, {"options": {"maxiter": CATEGORICAL_MAXITER}})

    # the dispatcher's `register(cls)` is a decorator (untyped: a multipledispatch
    # `Dispatcher`), applied here as a call
    fit_botorch_model.register(SingleTaskGP)(_fit_single)
    fit_botorch_model.register(catgp.model_class())(_fit_mixed)

    register.done = True  # type: ignore[attr-defined]
