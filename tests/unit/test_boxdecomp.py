"""The NumPy box-decomposition steps give BoTorch's numbers, bit for bit."""

from __future__ import annotations

import pytest
import torch
from botorch.utils.multi_objective.box_decompositions import utils as botorch_steps
from botorch.utils.multi_objective.box_decompositions.non_dominated import FastNondominatedPartitioning

from nasctl.optimizer import boxdecomp

CASES = [(m, n, seed) for m in (3, 4, 5) for n in (1, 2, 7, 30) for seed in range(4)]


def front(m: int, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    y = torch.rand(n, m, generator=g, dtype=torch.float64)
    if seed % 2:
        y = (y * 4).round() / 4  # ties in every coordinate
    return y


def start(m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """BoTorch's initial local upper bound (the reference point, here 1) and its defining points."""
    u = torch.ones(1, m, dtype=torch.float64)
    z = torch.zeros(1, m, m, dtype=torch.float64)
    for j in range(m):
        z[0, j] = float("-inf")
        z[0, j, j] = u[0, j]
    return u, z


@pytest.mark.parametrize(("m", "n", "seed"), CASES)
def test_steps_match_botorch(m: int, n: int, seed: int) -> None:
    y = front(m, n, seed)
    u0, z0 = start(m)
    want_u, want_z = botorch_steps.update_local_upper_bounds_incremental(new_pareto_Y=y, U=u0, Z=z0)
    got_u, got_z = boxdecomp.update_local_upper_bounds_incremental(new_pareto_Y=y, U=u0, Z=z0)
    assert got_u.dtype == want_u.dtype and got_z.dtype == want_z.dtype
    assert torch.equal(got_u, want_u) and torch.equal(got_z, want_z)  # same rows, same order
    ref = torch.ones(m, dtype=torch.float64)
    assert torch.equal(boxdecomp.get_partition_bounds(got_z, got_u, ref),
                       botorch_steps.get_partition_bounds(want_z, want_u, ref))


def partitionings(m: int, n: int, seed: int, cls: type) -> torch.Tensor:
    y = -front(m, n, seed)  # BoTorch partitions for maximisation
    ref = torch.full((m,), -0.9, dtype=torch.float64)  # some points fall outside
    return cls(ref_point=ref, Y=y).hypercell_bounds


@pytest.mark.parametrize(("m", "n", "seed"), CASES)
def test_partitioning_matches_botorchs(m: int, n: int, seed: int) -> None:
    want = partitionings(m, n, seed, FastNondominatedPartitioning)
    got = partitionings(m, n, seed, boxdecomp.NumpyNondominatedPartitioning)
    assert torch.equal(got, want)


def test_the_acquisition_uses_it_with_three_objectives(monkeypatch: pytest.MonkeyPatch) -> None:
    """nasctl's qLogNEHVI decomposes each sample's front with the NumPy partitioning
    (3+ objectives) and gives BoTorch's values, bit for bit."""
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
    from botorch.models import SingleTaskGP
    from botorch.sampling.normal import SobolQMCNormalSampler

    from nasctl.optimizer import acquisition

    monkeypatch.setattr(acquisition, "SPEEDUPS", frozenset({"numpy-boxes"}))
    g = torch.Generator().manual_seed(0)
    x = torch.rand(25, 3, generator=g, dtype=torch.float64)
    y = torch.stack([x[:, 0], 1 - x[:, 0] * x[:, 1], (1 - x[:, 2]) ** 2 + x[:, 1]], -1)
    model = SingleTaskGP(x, y)
    acqfs = [cls(model=model, ref_point=[-0.1] * 3, X_baseline=x, prune_baseline=True,
                 sampler=SobolQMCNormalSampler(torch.Size([16]), seed=1))
             for cls in (qLogNoisyExpectedHypervolumeImprovement, acquisition.HypervolumeImprovement)]
    assert isinstance(acqfs[1].partitioning.box_decompositions[0], boxdecomp.NumpyNondominatedPartitioning)
    assert not isinstance(acqfs[0].partitioning.box_decompositions[0], boxdecomp.NumpyNondominatedPartitioning)
    assert torch.equal(acqfs[0].cell_lower_bounds, acqfs[1].cell_lower_bounds)
    assert torch.equal(acqfs[0].cell_upper_bounds, acqfs[1].cell_upper_bounds)
    X = torch.rand(32, 1, 3, generator=g, dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(acqfs[0](X), acqfs[1](X))
