"""The Pareto mask used to prune qLogNEHVI's baseline
(nasctl/optimizer/nondominated.py) gives BoTorch's answers."""

from __future__ import annotations

import pytest
import torch
from botorch.utils.multi_objective import pareto

from nasctl.optimizer import nondominated


def _outcomes(batch: tuple[int, ...], n: int, m: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    # values on a coarse grid, so that ties and duplicate points are common
    Y = torch.randint(0, 4, (*batch, n, m), generator=g).to(torch.float64)
    flat = Y.reshape(-1, n, m)
    flat[0, 0] = float("nan")  # a point with no values
    flat[-1, 1, 0] = float("nan")  # and one with some
    flat[-1, 2] = flat[-1, 3]  # an exact duplicate
    return Y


@pytest.mark.parametrize("maximize", [True, False])
@pytest.mark.parametrize(("batch", "n", "m"), [((), 9, 2), ((5,), 12, 3), ((2048,), 46, 3), ((300, 2), 20, 4)])
def test_same_mask_as_botorch(batch: tuple[int, ...], n: int, m: int, maximize: bool) -> None:
    Y = _outcomes(batch, n, m, seed=n * m)
    # BoTorch's all-pairs path (its loop, taken for large inputs, treats a point with no
    # values as dominating every other: `test_botorchs_loop_without_missing_values`)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pareto, "MAX_BYTES", float("inf"))
        want = pareto.is_non_dominated(Y, maximize=maximize, deduplicate=False)
    got = nondominated.is_non_dominated(Y, maximize=maximize, deduplicate=False)
    assert got.shape == want.shape and torch.equal(got, want)
    # every chunk size gives the same mask as one chunk
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(nondominated, "MAX_BYTES", float(n * n * 3))
        assert torch.equal(nondominated.is_non_dominated(Y, maximize=maximize, deduplicate=False), want)


def test_botorchs_loop_without_missing_values() -> None:
    """What the optimizer prunes with (2,048 posterior samples of 46 trials, no
    missing values) went through BoTorch's loop: the same mask."""
    Y = _outcomes((2048,), 46, 3, seed=5)
    Y = torch.nan_to_num(Y, nan=1.5)
    want = pareto.is_non_dominated(Y, deduplicate=False)  # 46 x 46 x 2,048 pairs: BoTorch's loop
    assert torch.equal(nondominated.is_non_dominated(Y, deduplicate=False), want)
    assert torch.equal(nondominated.is_non_dominated(-Y, maximize=False, deduplicate=False), want)


def test_deduplication_is_left_to_botorch() -> None:
    Y = _outcomes((4,), 10, 2, seed=1)
    assert torch.equal(nondominated.is_non_dominated(Y), pareto.is_non_dominated(Y))


@pytest.mark.parametrize(("n", "m", "constrained"), [(25, 2, False), (40, 3, False), (30, 3, True)])
def test_pruning_matches_botorchs(n: int, m: int, constrained: bool) -> None:
    """`prune_inferior_points` keeps the baseline points BoTorch's pruning keeps,
    and nasctl's qLogNEHVI, pruning with it, gives BoTorch's values."""
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
    from botorch.acquisition.multi_objective.objective import IdentityMCMultiOutputObjective
    from botorch.acquisition.multi_objective.utils import prune_inferior_points_multi_objective
    from botorch.models import SingleTaskGP
    from botorch.sampling.normal import SobolQMCNormalSampler

    from nasctl.optimizer import acquisition

    g = torch.Generator().manual_seed(n)
    x = torch.rand(n, 3, generator=g, dtype=torch.float64)
    y = torch.stack([torch.sin(3 * x[:, 0] + k) - x[:, 1] * k + x[:, 2] ** 2 for k in range(m + constrained)], -1)
    model = SingleTaskGP(x, y)
    ref = torch.full((m,), -1.5, dtype=torch.float64)
    kwargs: dict = {}
    if constrained:
        kwargs = {"objective": IdentityMCMultiOutputObjective(outcomes=list(range(m))),
                  "constraints": [lambda Z: Z[..., -1] - 0.3]}
    torch.manual_seed(0)
    want = prune_inferior_points_multi_objective(model=model, X=x, ref_point=ref, **kwargs)
    torch.manual_seed(0)
    got = nondominated.prune_inferior_points(model=model, X=x, ref_point=ref, **kwargs)
    assert 0 < got.shape[0] < n and torch.equal(got, want)
    values = []
    for cls in (qLogNoisyExpectedHypervolumeImprovement, acquisition.HypervolumeImprovement):
        torch.manual_seed(0)  # the pruning draws its posterior samples from torch's generator
        acqf = cls(model=model, ref_point=ref, X_baseline=x, prune_baseline=True,
                   sampler=SobolQMCNormalSampler(torch.Size([16]), seed=1), **kwargs)
        with torch.no_grad():
            values.append(acqf(torch.rand(16, 1, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)))
    assert torch.equal(values[0], values[1])
