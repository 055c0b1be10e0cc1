"""Proposals among the configurations not tried yet, where they can be listed.

With `optimizer.fidelity` the fidelity parameter is one more (range) input of
the model, held at the top rung while new configurations are chosen
(nasctl/optimizer/multifidelity.py). That makes Ax optimise the acquisition
over a mixed space, where it does not avoid configurations already observed,
and the model, scoring at the top rung, keeps proposing configurations it has
seen only at low rungs. Each such repeat used to be replaced by a quasi-random
point (`novelty`), so in a discrete NAS space most new configurations of a long
multi-fidelity run were chosen without the model.

Where every parameter that is not held fixed is discrete and their product is
small enough to list (`MAX_ENUMERATED`), `untried_candidates` lists every
configuration whose free part no trial has (observed at any fidelity, or
pending), with the fixed features at their values: Ax's `Acquisition.optimize`
then picks the best of them by the acquisition function itself
(`candidate_set`), as it does in a fully discrete space (BoTorch's
`optimize_acqf_discrete` with the observed points avoided).

Pure torch; the acquisition subclass (`acquisition.NasctlAcquisition`) calls it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

MAX_ENUMERATED = 20_000
"""Most configurations listed; a larger discrete space keeps Ax's own optimiser."""

CONTINUE_PAUSED = False
"""Whether configurations observed only below the fixed features (trained to a
lower rung and not promoted: paused) are candidates too (`at_fixed`); the
optimizer then continues such a configuration from its checkpoint instead of
starting a new one (`multifidelity`). Off: only configurations no trial has.
Off by default: on the time-to-front tables it was not better on enough seeds
(docs/multifidelity.md, "Continuing paused configurations");
`benchmarks/ablation.py` variant `continue-paused` turns it on."""

UNFIXED = False
"""Whether every space with no feature held fixed is listed (every parameter
discrete, at most `MAX_ENUMERATED` configurations), whatever its size. Ax
scores such a space whole itself up to BoTorch's `MAX_CHOICES_ENUMERATE`
(10,000); a larger one (NAS-Bench-201's 15,625 cells) the acquisition lists
anyway where it screens the list (`unfixed`; `screen.SCREEN`, off by default),
else Ax searches it locally from a few starts (`strategies.LOCAL_SEARCH_BUDGET`). Off
(`benchmarks/ablation.py` variant `list-unfixed` turns it on, with the screen
off: every untried configuration scored by the exact acquisition)."""

PENDING_AT_FIXED = False
"""Whether configurations in flight at any rung are pending points at the fixed
features (`pending_at_fixed`); off keeps Ax's rule (only those already there).
Off by default for the same reason as `CONTINUE_PAUSED` (variant `pending-at-top`)."""


def untried_candidates(
    dims: int,
    discrete_choices: Mapping[int, Sequence[float]],
    fixed_features: Mapping[int, float] | None,
    tried: Sequence[torch.Tensor | None],
    dtype: torch.dtype = torch.double,
    limit: int | None = None,
    unfixed: bool = False,
) -> torch.Tensor | None:
    """Every configuration of the free features not in `tried`, with the fixed features set.

    Args:
        dims: the number of features (columns).
        discrete_choices: the values each discrete feature takes (by column).
        fixed_features: columns held at a value (the fidelity at its top rung).
        tried: points already observed or pending (rows of `dims` columns, or None).
        limit: most configurations to list (default `MAX_ENUMERATED`; 0 lists none).
        unfixed: list a space with no feature held fixed too (as `UNFIXED` does); the
            acquisition asks for it where it screens a long list (`screen`).

    Returns:
        The candidates (rows), or None where this does not apply: no feature is held
        fixed and neither `unfixed` nor `UNFIXED` is set (Ax's own discrete optimiser already avoids observed points), a free
        feature is continuous, or there are more than `limit` configurations.
    """
    fixed = dict(fixed_features or {})
    if not fixed and not (unfixed or UNFIXED):
        return None
    free = [i for i in range(dims) if i not in fixed]
    if not free or any(i not in discrete_choices for i in free):
        return None
    sizes = [len(discrete_choices[i]) for i in free]
    if math.prod(sizes) > (MAX_ENUMERATED if limit is None else limit):
        return None
    grids = [torch.as_tensor(list(discrete_choices[i]), dtype=dtype) for i in free]
    combos = torch.cartesian_prod(*grids).reshape(-1, len(free))
    seen = {tuple(round(float(v), 6) for v in row[free].tolist())
            for block in tried if block is not None for row in block.reshape(-1, dims)}
    keep = [k for k, row in enumerate(combos.tolist()) if tuple(round(v, 6) for v in row) not in seen]
    out = torch.zeros(len(keep), dims, dtype=dtype)
    if keep:
        out[:, free] = combos[keep]
    for i, value in fixed.items():
        out[:, i] = float(value)
    return out


def at_fixed(block: torch.Tensor | None, fixed_features: Mapping[int, float] | None) -> torch.Tensor | None:
    """The rows of `block` whose fixed features hold their fixed values (all rows where none is fixed)."""
    if block is None or not fixed_features:
        return block
    rows = block.reshape(-1, block.shape[-1])
    keep = torch.ones(rows.shape[0], dtype=torch.bool, device=rows.device)
    for i, value in fixed_features.items():
        keep &= torch.isclose(rows[:, i], torch.as_tensor(float(value), dtype=rows.dtype, device=rows.device))
    return rows[keep]


def pending_at_fixed(
    pending: Sequence[torch.Tensor | None] | None,
    fixed_features: Mapping[int, float] | None,
) -> list[torch.Tensor | None] | None:
    """Pending points with their fixed features set to the fixed values (one row per point).

    Ax keeps as pending (`X_pending`) only the pending points that already sit
    at the fixed features, so with the fidelity held at its top rung every new
    configuration in flight at a lower rung (most of them) was invisible to the
    acquisition: several slots freeing at once could be given near-identical
    configurations. Seen at the top rung, where the acquisition scores, each
    configuration in flight counts as the pending point it is, whatever rung it
    trains to now.

    Args:
        pending: Ax's pending observations (one tensor of rows per outcome, or None).
        fixed_features: columns held at a value during generation.

    Returns:
        `pending` itself where nothing is held fixed; else each outcome's rows with
        the fixed columns set, duplicates dropped (a configuration counts once).
    """
    if not pending or not fixed_features:
        return None if pending is None else list(pending)
    out: list[torch.Tensor | None] = []
    for block in pending:
        if block is None or block.numel() == 0:
            out.append(block)
            continue
        moved = block.clone()
        for i, value in fixed_features.items():
            moved[..., i] = float(value)
        out.append(torch.unique(moved.reshape(-1, moved.shape[-1]), dim=0))
    return out


__all__ = ["CONTINUE_PAUSED", "MAX_ENUMERATED", "PENDING_AT_FIXED", "UNFIXED", "at_fixed", "pending_at_fixed",
           "untried_candidates"]
