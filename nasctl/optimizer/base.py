"""What the scheduler loop needs of an optimizer: the `Optimizer` protocol and
the plain values that cross between them.

The loop and the candidate generator (`nasctl.orchestration.generator`) depend
on this module only, never on a concrete adapter: `AxOptimizer`
(`ax_optimizer`) and `MultiFidelityOptimizer` (`multifidelity`) implement the
protocol, and so do the loop tests' scripted optimizers. It imports neither
Ax, BoTorch nor torch, so importing it costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from nasctl.types import ParamValue


@dataclass(frozen=True)
class Candidate:
    """A proposed trial: the optimizer has already recorded it (pending) under `index`."""

    index: int
    parameters: dict[str, ParamValue]
    method: str  # the generation method recorded with the trial ("Sobol", "MBM", "Explore", ...)
    promoted_from: int | None = None  # a multi-fidelity promotion of this trial (see `multifidelity`)


@dataclass(frozen=True)
class RestoredTrial:
    """What the optimizer needs of a stored trial to rebuild its state on resume."""

    index: int
    parameters: Mapping[str, ParamValue]
    status: str  # a `nasctl.types.TrialStatus` value
    method: str
    values: Mapping[str, float]
    stopped_values: Mapping[str, float] | None = None  # what the optimizer was told for an EARLY_STOPPED trial
    promoted_from: int | None = None  # the trial a multi-fidelity promotion continues
    cost: float | None = None  # what a COMPLETED trial cost (see `Optimizer.complete`)


class Optimizer(Protocol):
    """Proposes trials and learns their outcomes; driven by one thread only.

    Trial indices are the store's: the n-th trial the optimizer records (by
    `generate` or `attach`) has index n, counting from 0. Every method may
    raise any exception; the candidate generator reports it to the loop
    (`GeneratorFailed`) and stops serving an optimizer that failed while
    learning. None of the methods is idempotent: each outcome is told once.
    """

    log_scale: tuple[str, ...] | None
    """The objectives the model of the last proposal had on the log scale; None before a model."""

    def complete(self, index: int, values: Mapping[str, float], cost: float | None = None) -> None:
        """Trial `index` completed with `values` (by our metric name; missing or
        non-finite values are left out). `cost`: what its training cost
        (device-seconds where it held devices, else running seconds; None where
        not measured), for cost-aware proposals."""

    def fail(self, index: int, reason: str | None = None) -> None:
        """Trial `index` failed; the model learns nothing from it."""

    def abandon(self, index: int) -> None:
        """Trial `index` will never report; it is no longer pending."""

    def early_stop(self, index: int, values: Mapping[str, float] | None) -> None:
        """Trial `index` was stopped early; `values` are the optimistic final
        values it was judged by (None when there were none)."""

    def attach(self, parameters: Mapping[str, ParamValue]) -> int:
        """Record a trial proposed elsewhere (pending until told); returns its index."""

    def generate(self, n: int) -> list[Candidate]:
        """Up to `n` new candidates, each already recorded as a pending trial
        (fewer, possibly none, when the strategy cannot propose more now)."""

    def restore(self, trials: Sequence[RestoredTrial]) -> None:
        """Rebuild from the store's trials, in index order, before anything else (a
        resume): finished ones with their outcomes, CANDIDATE and RUNNING ones pending."""
