"""A long list of candidates screened by a cheap hypervolume improvement before the exact one.

Where a discrete space has more configurations than BoTorch scores one by one
(`MAX_CHOICES_ENUMERATE`, 10,000), Ax searches the acquisition locally from a
few random starts (`strategies.LOCAL_SEARCH_BUDGET`), and on NAS-Bench-201's
15,625 cells nasctl's worst seeds stopped within two changed operations of the
best cells (docs/benchmarks.md, "Why is nasctl behind TPE on NAS-Bench-201").
Scoring every untried cell by the exact acquisition found them, but took 8-11 s
a proposal.

`shortlist` keeps the `KEEP` (256) candidates with the highest screened improvement;
the exact acquisition (nasctl's qLogNEHVI, with the pending trials) then picks
among them (`acquisition.NasctlAcquisition.optimize`). The screened improvement
is the acquisition's own hypervolume improvement with two shortcuts: each
candidate's outputs are drawn from its marginal posterior (mean and variance,
one batched posterior call for the whole list, no joint posterior with the
baseline), and `SAMPLES` draws (the same standard normals for every candidate,
so the ranking compares like with like) are measured against the boxes of as
many of the acquisition's own baseline samples (`cell_lower_bounds`,
`cell_upper_bounds`: the front of the observed and pending trials, per sample).
The acquisition's objective (signs, the raw scale of log-modelled objectives)
and its outcome constraints (a draw that breaks one improves nothing) apply to
the draws as they do in the exact acquisition.

Off by default (`SCREEN`). Pure torch; applies to BoTorch's qLogNEHVI and its
subclasses (`applies`).
"""

from __future__ import annotations

from typing import Any

import torch
from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
from botorch.optim.optimize_mixed import MAX_CHOICES_ENUMERATE

SCREEN = False
"""Whether lists longer than `ABOVE` are screened (and spaces with nothing held
fixed listed where Ax would search locally). Off by default: on NAS-Bench-201
(10 seeds) it was level at the end of the budget and behind at a quarter, and
doubled the proposal time (docs/benchmarks.md, "Why is nasctl behind TPE on
NAS-Bench-201"); `benchmarks/ablation.py` variant `screen` turns it on."""

ABOVE = MAX_CHOICES_ENUMERATE
"""Lists at most this long are scored whole by the exact acquisition (BoTorch's own limit)."""

KEEP = 256
"""Candidates the exact acquisition scores after the screen."""

MAX_CELL_COORDINATES = 256
"""Most boxes x objectives of the acquisition's front for the screen to apply. Both the
screen and the exact acquisition cost in proportion to them: with four objectives and
50 trials (230 boxes) the exact acquisition took 13 ms a candidate and the screen of
15,625 cells 3 s (2-core machine), where Ax's local search costs less; with two
objectives and 60 trials (18 boxes) the screen took 0.6-0.75 s and 512 exact candidates 0.25-0.5 s."""

SAMPLES = 8
"""Posterior draws per candidate in the screen."""

_POSTERIOR_ROWS = 256
"""Candidates per posterior call (its cost: their joint covariance, and a fixed part per call)."""

_CHUNK_ELEMENTS = 1 << 23
"""Most elements of one draws x candidates x cells x objectives block (64 MiB of doubles)."""


def applies(acqf: Any) -> bool:
    """Whether `acqf` can be screened: a (log) noisy hypervolume improvement with one set of
    boxes per sample, not more of them than `MAX_CELL_COORDINATES` allows."""
    bounds = getattr(acqf, "cell_lower_bounds", None)
    return bool(SCREEN and isinstance(acqf, qLogNoisyExpectedHypervolumeImprovement)
                and isinstance(bounds, torch.Tensor) and bounds.ndim == 3
                and bounds.shape[-2] * bounds.shape[-1] <= MAX_CELL_COORDINATES)


def screened_improvement(acqf: Any, candidates: torch.Tensor,
                         samples: int = SAMPLES) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean hypervolume improvement of each candidate (rows) over `samples` marginal draws,
    and the sum of its outputs' posterior standard deviations (which breaks ties). `acqf` is
    a qLogNEHVI (`applies`), typed `Any`: torch types a module's buffers loosely."""
    lower, upper = acqf.cell_lower_bounds, acqf.cell_upper_bounds  # mc x cells x m
    pick = torch.linspace(0, lower.shape[0] - 1, min(samples, lower.shape[0])).round().long()
    lower, upper = lower[pick], upper[pick]
    s, cells, m = lower.shape
    scores, spread = [], []
    normals: torch.Tensor | None = None
    chunk = max(1, _CHUNK_ELEMENTS // max(1, s * cells * m))
    with torch.no_grad():
        for block in torch.split(candidates, chunk):
            # marginal means and variances from joint posteriors of a few hundred candidates
            # each: a batch of one-point posteriors costs two to three times as much
            parts = [acqf.model.posterior(part) for part in torch.split(block, _POSTERIOR_ROWS)]
            mean = torch.cat([p.mean for p in parts], dim=-2).unsqueeze(-2)  # n x 1 x outputs
            sd = torch.cat([p.variance for p in parts], dim=-2).clamp_min(0).sqrt().unsqueeze(-2)
            if normals is None:
                gen = torch.Generator(device="cpu").manual_seed(0)
                normals = torch.randn(s, 1, 1, mean.shape[-1], generator=gen, dtype=mean.dtype).to(mean.device)
            draws = mean.unsqueeze(0) + sd.unsqueeze(0) * normals  # s x n x 1 x outputs
            obj = acqf.objective(draws, X=block.unsqueeze(-2))  # s x n x 1 x m
            edges = (torch.minimum(obj, upper.unsqueeze(1)) - lower.unsqueeze(1)).clamp_min(0)  # s x n x cells x m
            hvi = edges.prod(dim=-1).sum(dim=-1)  # s x n
            if acqf.constraints:
                feasible = torch.stack([c(draws) <= 0 for c in acqf.constraints]).all(dim=0)  # s x n x 1
                hvi = hvi * feasible.squeeze(-1)
            scores.append(hvi.mean(dim=0))
            spread.append(sd.sum(dim=(-2, -1)))
    return torch.cat(scores), torch.cat(spread)


def shortlist(acqf: Any, candidates: torch.Tensor, n: int = 1, keep: int = KEEP) -> torch.Tensor:
    """The `max(keep, 4 n)` candidates with the highest screened improvement (all of them
    where there are no more, or `acqf` cannot be screened), in the list's order; among
    equal improvements (none, often) the less certain candidates are kept."""
    size = max(keep, 4 * n)
    if candidates.shape[0] <= size or not applies(acqf):
        return candidates
    scores, spread = screened_improvement(acqf, candidates)
    by_spread = torch.sort(spread, descending=True, stable=True).indices
    order = by_spread[torch.sort(scores[by_spread], descending=True, stable=True).indices[:size]]
    return candidates[torch.sort(order).values]


__all__ = ["ABOVE", "KEEP", "MAX_CELL_COORDINATES", "SAMPLES", "SCREEN", "applies", "screened_improvement", "shortlist"]
