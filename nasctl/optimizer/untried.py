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


def untried_candidates(
    dims: int,
    discrete_choices: Mapping[int, Sequence[float]],
    fixed_features: Mapping[int, float] | None,
    tried: Sequence[torch.Tensor | None],
    dtype: torch.dtype = torch.double,
    limit: int | None = None,
) -> torch.Tensor | None:
    """Every configuration of the free features not in `tried`, with the fixed features set.

    Args:
        dims: the number of features (columns).
        discrete_choices: the values each discrete feature takes (by column).
        fixed_features: columns held at a value (the fidelity at its top rung).
        tried: points already observed or pending (rows of `dims` columns, or None).
        limit: most configurations to list (default `MAX_ENUMERATED`; 0 lists none).

    Returns:
        The candidates (rows), or None where this does not apply: no feature is held
        fixed (Ax's own discrete optimiser already avoids observed points), a free
        feature is continuous, or there are more than `limit` configurations.
    """
    fixed = dict(fixed_features or {})
    if not fixed:
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


__all__ = ["MAX_ENUMERATED", "untried_candidates"]
