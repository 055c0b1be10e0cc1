"""Local search of a large discrete space that also starts next to the front.

A fully discrete space with more combinations than BoTorch scores whole
(`MAX_CHOICES_ENUMERATE`, 10,000: NAS-Bench-201's 15,625 cells, HPOLib's
62,208 configurations) has its acquisition optimised by BoTorch's local
search: from the best few of some random points (`strategies.LOCAL_SEARCH_BUDGET`),
each start moves to its best neighbour (one value changed) until none is
better. Random starts reach the region the front is in only by chance; the
climb from there may end at a local optimum several changes short of the
cells next to the front, which is where an improvement of the front is most
often found (SMAC's local search starts from its incumbents for the same
reason).

`neighbour_starts` adds starts there: the untried neighbours of the
acquisition's baseline (the trials BoTorch keeps because they may be on the
front: qLogNEHVI's and qLogNEI's pruned `X_baseline`), the `FRONT_STARTS`
best by the acquisition. The random starts stay, and the local search keeps
whichever climb ends best, so the acquisition still decides between a step
next to the front and a region far from it.

Off by default (`FRONT_STARTS = 0`; `benchmarks/ablation.py` variant
`front-starts-K` sets K): on NAS-Bench-201's time-to-front runs it ended
lower on every seed measured, as the better-optimised acquisition stayed next
to the front (docs/benchmarks.md, "Tried and not kept").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

FRONT_STARTS = 0
"""How many neighbours of the front start the local search besides its random starts (0: none, Ax's own search)."""

MAX_BASELINE = 64
"""At most this many baseline trials have their neighbours scored (the last ones)."""


def neighbours(points: torch.Tensor, choices: Mapping[int, Sequence[float]]) -> torch.Tensor:
    """Every point one value away from a row of `points` (n x d): each listed
    dimension of `choices` set to each of its other values, in turn."""
    out = []
    for dim, values in choices.items():
        for v in values:
            moved = points[points[:, dim] != v].clone()
            moved[:, dim] = v
            out.append(moved)
    if not out:
        return points[:0]
    unique: torch.Tensor = torch.unique(torch.cat(out), dim=0)
    return unique


def without(points: torch.Tensor, avoid: torch.Tensor | None) -> torch.Tensor:
    """The rows of `points` that are not rows of `avoid`."""
    if avoid is None or avoid.shape[0] == 0 or points.shape[0] == 0:
        return points
    same = (points.unsqueeze(1) == avoid.unsqueeze(0).to(points)).all(dim=-1).any(dim=-1)
    return points[~same]


def neighbour_starts(acqf: Any, choices: Mapping[int, Sequence[float]], fixed: Mapping[int, float] | None,
                     avoid: torch.Tensor | None, k: int | None = None) -> torch.Tensor | None:
    """The `k` (default `FRONT_STARTS`) untried neighbours of `acqf`'s baseline with
    the highest acquisition values, as local-search starts (k x 1 x d), or None
    where there are none (no baseline: qLogProbabilityOfFeasibility while nothing
    is feasible; everything next to it tried).

    `choices` are the values of every dimension not held fixed, `fixed` the
    values of those held (set in every start), `avoid` the tried and pending points."""
    k = FRONT_STARTS if k is None else k
    inner = getattr(acqf, "inner", acqf)  # `costaware.CostWeighted` wraps the acquisition
    baseline = getattr(inner, "X_baseline", None)
    if k <= 0 or baseline is None or baseline.shape[0] == 0:
        return None
    base = baseline[-MAX_BASELINE:].detach().clone()
    for dim, value in (fixed or {}).items():
        base[:, dim] = value
    near = without(neighbours(base, choices), avoid)
    if near.shape[0] == 0:
        return None
    with torch.no_grad():
        values = torch.cat([acqf(near[i:i + 2048].unsqueeze(1)) for i in range(0, near.shape[0], 2048)])
    best = values.topk(min(k, near.shape[0])).indices
    return near[best].unsqueeze(1)
