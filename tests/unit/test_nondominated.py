"""The Pareto mask used to prune qLogNEHVI's baseline
(nasctl/orchestration/nondominated.py) gives BoTorch's answers."""

from __future__ import annotations

import pytest
import torch
from botorch.utils.multi_objective import pareto

from nasctl.orchestration import nondominated


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


def test_the_baseline_pruning_uses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed by the optimizer, `prune_inferior_points_multi_objective` calls it."""
    import json

    from botorch.acquisition.multi_objective import utils

    from nasctl.orchestration.optimizer import AxOptimizer
    from nasctl.spec import parse_spec

    monkeypatch.setattr(utils, "is_non_dominated", pareto.is_non_dominated)
    spec = parse_spec(json.dumps({
        "name": "p", "search_space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
        "objectives": {k: {"goal": "minimize", "threshold": 2.0} for k in "fg"},
        "budget": {"max_trials": 8}, "trial": {"script": "/bin/true"},
        "optimizer": {"method": "botorch", "seed": 0, "initial_trials": 5},
    }))
    opt = AxOptimizer(spec)
    assert utils.is_non_dominated is nondominated.is_non_dominated
    calls = []
    real = nondominated.is_non_dominated
    monkeypatch.setattr(utils, "is_non_dominated", lambda *a, **k: calls.append(a[0].shape) or real(*a, **k))
    for _ in range(6):
        (c,) = opt.generate(1)
        x = float(c.parameters["x"])
        opt.complete(c.index, {"f": x, "g": (1.0 - x) ** 2})
    assert c.method == "MBM" and calls and calls[-1][0] == 2048  # one mask per posterior sample
