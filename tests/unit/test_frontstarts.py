"""The local search of a large discrete space also starts next to the front
(nasctl/optimizer/frontstarts.py): real Ax surrogates, nasctl's qLogNEHVI and
BoTorch's local search."""

from __future__ import annotations

import itertools

import pytest
import torch

from nasctl.optimizer import frontstarts

LEVELS = [0.0, 0.25, 0.5, 0.75, 1.0]
DIMS = 6
CHOICES = {i: LEVELS for i in range(DIMS)}  # 15,625 configurations: more than BoTorch lists (10,000)
OPTIONS = {"num_restarts": 4, "raw_samples": 128}


def _objectives(x: torch.Tensor) -> torch.Tensor:
    """Two conflicting objectives (both minimised) whose front needs every feature
    near a narrow optimum: error is lowest only around one cell."""
    target = torch.tensor([1.0, 0.75, 0.25, 0.5, 1.0, 0.0], dtype=x.dtype)
    err = ((x - target) ** 2).sum(-1)
    size = x[:, 0] + x[:, 1] + 0.5 * x[:, 4]
    return torch.stack([err, size], -1)


def _acquisition(observed: torch.Tensor):  # type: ignore[no-untyped-def]
    from ax.core.search_space import SearchSpaceDigest
    from ax.generators.torch.botorch_modular.surrogate import Surrogate
    from ax.generators.torch_base import TorchOptConfig
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
    from botorch.utils.datasets import SupervisedDataset

    from nasctl.optimizer.acquisition import NasctlAcquisition

    names = [f"x{i}" for i in range(DIMS)]
    ssd = SearchSpaceDigest(feature_names=names, bounds=[(0.0, 1.0)] * DIMS,
                            ordinal_features=list(range(DIMS)), discrete_choices=CHOICES)
    y = _objectives(observed)
    surrogate = Surrogate()
    surrogate.fit(datasets=[SupervisedDataset(X=observed, Y=y[:, i:i + 1], feature_names=names,
                                              outcome_names=[name]) for i, name in enumerate(("err", "size"))],
                  search_space_digest=ssd)
    config = TorchOptConfig(objective_weights=-torch.eye(2, dtype=torch.double),
                            objective_thresholds=torch.tensor([-2.0, -3.0], dtype=torch.double))
    acq = NasctlAcquisition(surrogate=surrogate, search_space_digest=ssd, torch_opt_config=config,
                            botorch_acqf_class=qLogNoisyExpectedHypervolumeImprovement)
    return acq, ssd


def _observed(seed: int, n: int = 20) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    grid = torch.tensor(list(itertools.product(LEVELS, repeat=DIMS)), dtype=torch.double)
    return grid[torch.randperm(grid.shape[0], generator=gen)[:n]]


def test_neighbours_change_one_listed_value_each() -> None:
    points = torch.tensor([[0.0, 1.0, 5.0], [0.0, 0.0, 5.0]])
    near = frontstarts.neighbours(points, {0: [0.0, 1.0], 1: [0.0, 1.0]})  # dimension 2 is not listed
    got = {tuple(r.tolist()) for r in near}
    # each point's neighbours; the points themselves are neighbours of each other
    assert got == {(1.0, 1.0, 5.0), (0.0, 0.0, 5.0), (1.0, 0.0, 5.0), (0.0, 1.0, 5.0)}
    assert near.shape[0] == len(got)  # no duplicates
    kept = frontstarts.without(near, torch.tensor([[0.0, 0.0, 5.0], [7.0, 7.0, 7.0]]))
    assert {tuple(r.tolist()) for r in kept} == got - {(0.0, 0.0, 5.0)}


def test_starts_are_the_best_untried_neighbours_of_the_baseline() -> None:
    acq, _ = _acquisition(_observed(0))
    baseline = acq.acqf.X_baseline
    avoid = _observed(0)
    fixed = {5: 0.5}
    free = {i: LEVELS for i in range(5)}
    starts = frontstarts.neighbour_starts(acq.acqf, free, fixed, avoid, k=3)
    assert starts is not None and starts.shape == (3, 1, DIMS)
    flat = starts.squeeze(1)
    assert (flat[:, 5] == 0.5).all()  # the fixed feature is set in every start
    assert frontstarts.without(flat, avoid).shape[0] == 3  # none was tried
    # each is one free value away from a baseline point (with the fixed feature set)
    base = baseline.clone()
    base[:, 5] = 0.5
    assert ((flat.unsqueeze(1) != base.unsqueeze(0)).sum(-1) == 1).any(-1).all()
    # and no other untried neighbour scores higher than the third start
    near = frontstarts.without(frontstarts.neighbours(base, free), avoid)
    with torch.no_grad():
        every = acq.acqf(near.unsqueeze(1))
        chosen = acq.acqf(starts)
    assert chosen.min() >= every.topk(3).values.min() - 1e-9
    assert frontstarts.neighbour_starts(acq.acqf, free, fixed, avoid, k=0) is None


def test_no_baseline_no_starts() -> None:
    class Plain:  # an acquisition without a baseline (qLogProbabilityOfFeasibility)
        pass

    assert frontstarts.neighbour_starts(Plain(), {0: LEVELS}, None, None, k=4) is None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_local_search_reaches_at_least_the_best_front_neighbour(seed: int,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """With the front's neighbours among the starts, the candidate scores at least as
    high as the best of them (a local search only climbs), and it was not tried."""
    from nasctl.optimizer import acquisition

    monkeypatch.setattr(frontstarts, "FRONT_STARTS", 4)
    given = []
    real = acquisition.optimize_acqf_discrete_local_search

    def record(**kwargs):  # type: ignore[no-untyped-def]
        given.append(kwargs.get("batch_initial_conditions"))
        return real(**kwargs)

    monkeypatch.setattr(acquisition, "optimize_acqf_discrete_local_search", record)
    observed = _observed(seed)
    acq, ssd = _acquisition(observed)
    starts = frontstarts.neighbour_starts(acq.acqf, CHOICES, None, observed)
    assert starts is not None
    torch.manual_seed(seed)
    candidates, values, weights = acq.optimize(1, ssd, optimizer_options=dict(OPTIONS))
    assert candidates.shape == (1, DIMS) and weights.tolist() == [1.0]
    assert len(given) == 1 and given[0] is not None and torch.equal(given[0], starts)  # besides the random starts
    assert frontstarts.without(candidates, observed).shape[0] == 1
    with torch.no_grad():
        best_start = acq.acqf(starts).max()
        got = acq.acqf(candidates.unsqueeze(1))
    assert got.item() >= best_start.item() - 1e-9
    assert values.item() == pytest.approx(got.item())


def test_off_is_axs_own_local_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """FRONT_STARTS = 0: nothing is added and Ax's own search runs."""
    monkeypatch.setattr(frontstarts, "FRONT_STARTS", 0)
    called = []
    real = frontstarts.neighbour_starts

    def record(*args, **kwargs):  # type: ignore[no-untyped-def]
        out = real(*args, **kwargs)
        called.append(out)
        return out

    monkeypatch.setattr(frontstarts, "neighbour_starts", record)
    observed = _observed(1)
    acq, ssd = _acquisition(observed)
    torch.manual_seed(1)
    candidates, _, _ = acq.optimize(1, ssd, optimizer_options=dict(OPTIONS))
    assert called == []
    assert frontstarts.without(candidates, observed).shape[0] == 1
