"""Which model proposes the candidates: `optimizer.method` and the `auto` rule.

Methods (the spec's `optimizer.method`):

- `botorch`: a GP per metric (Matern-5/2 with learned lengthscales) and
  qLogNEHVI (qLogNEI for one objective); unordered choices are one-hot encoded.
- `categorical`: a GP whose kernel treats unordered choices as categories
  (BoTorch's MixedSingleTaskGP: categorical kernel on them, Matern on the
  rest; nasctl adds a prior on the categorical length scales, see `catgp`)
  and an acquisition optimizer that stays on valid choices (enumeration
  for up to 10,000 combinations, otherwise local search over neighbouring
  choices from many starting points). One-hot encoding makes the GP see
  "conv3x3 vs none" as a distance in a 5-dimensional box and lets the
  acquisition optimizer wander between corners; a categorical kernel does not.
- `saasbo`: a fully Bayesian GP with the sparse axis-aligned subspace prior
  (SAAS), sampled with NUTS, for spaces with many parameters of which few
  matter. Each proposal costs seconds to tens of seconds.
- `sobol`: quasi-random search (no model).
- `auto` (default): chosen from the space by `resolve_method`.

This module imports neither Ax nor BoTorch, so the rule can be shown
(`nasctl` status, events) without loading them.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from nasctl.spec import ChoiceParameter, ExperimentSpec

METHODS = ("auto", "botorch", "categorical", "saasbo", "sobol")

SAASBO_MIN_DIMS = 20
"""Tunable parameters from which `auto` picks SAASBO."""

SAASBO_MAX_TRIALS = 200
"""Above this budget `auto` keeps the plain GP: SAAS/NUTS cost grows as n^3 per
posterior sample and a large data set identifies the relevant dimensions anyway."""


SAASBO_INSTALL_HINT = "pip install 'nasctl[saasbo]' (JAX and NumPyro, about 600 MB)"


def saasbo_available() -> bool:
    """BoTorch samples the SAAS model with NumPyro on JAX: optional packages."""
    return all(importlib.util.find_spec(m) is not None for m in ("jax", "numpyro"))


@dataclass(frozen=True)
class MethodChoice:
    method: str
    reason: str

    def __str__(self) -> str:
        return f"{self.method} ({self.reason})"


def categorical_parameters(spec: ExperimentSpec) -> list[str]:
    """Unordered choice parameters with three or more values (binary choices
    are handled well by one-hot encoding, a single 0/1 dimension)."""
    return [n for n, p in spec.tunable.items()
            if isinstance(p, ChoiceParameter) and not p.ordered and len(p.values) >= 3]


def resolve_method(spec: ExperimentSpec) -> MethodChoice:
    """The method the optimizer uses, and why (for `auto`: the rule that fired).

    The `auto` rule, in order:
    1. at least half of the tunable parameters are unordered choices with 3+
       values (cell-based NAS spaces) -> `categorical`;
    2. 20 or more tunable parameters and a budget of at most 200 trials -> `saasbo`
       (`botorch` when JAX/NumPyro are not installed; the reason says so);
    3. otherwise -> `botorch`.
    """
    method = spec.optimizer.method
    if method != "auto":
        return MethodChoice(method, "set in the spec")
    dims = len(spec.tunable)
    cats = categorical_parameters(spec)
    if cats and 2 * len(cats) >= dims:
        return MethodChoice("categorical", f"auto: {len(cats)} of {dims} parameters are unordered choices")
    if dims >= SAASBO_MIN_DIMS and spec.budget.max_trials <= SAASBO_MAX_TRIALS:
        if not saasbo_available():
            return MethodChoice("botorch", f"auto: {dims} tunable parameters would use saasbo, "
                                           f"which is not installed: {SAASBO_INSTALL_HINT}")
        return MethodChoice("saasbo", f"auto: {dims} tunable parameters (>= {SAASBO_MIN_DIMS})")
    return MethodChoice("botorch", f"auto: {dims} tunable parameters, {len(cats)} categorical")
