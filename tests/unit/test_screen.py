"""A long candidate list screened by a cheap hypervolume improvement (nasctl/optimizer/screen.py)
before the exact acquisition scores the shortlist: real Ax surrogates and nasctl's qLogNEHVI."""

from __future__ import annotations

import itertools

import pytest
import torch

from nasctl.optimizer import screen, untried

LEVELS = [0.0, 0.25, 0.5, 0.75, 1.0]
CHOICES = {i: LEVELS for i in range(4)}  # 625 configurations


def _objectives(x: torch.Tensor) -> torch.Tensor:
    """Two conflicting smooth objectives (both minimised): error falls, size grows with the features."""
    err = 1.0 - 0.6 * x[:, 0] - 0.3 * x[:, 1] + 0.2 * (x[:, 2] - 0.5) ** 2 + 0.1 * x[:, 3]
    size = x[:, 0] + 0.5 * x[:, 1] + 0.2 * x[:, 3]
    return torch.stack([err, size], -1)


def _acquisition(observed: torch.Tensor, botorch_class: type | None = None):  # type: ignore[no-untyped-def]
    from ax.core.search_space import SearchSpaceDigest
    from ax.generators.torch.botorch_modular.surrogate import Surrogate
    from ax.generators.torch_base import TorchOptConfig
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
    from botorch.utils.datasets import SupervisedDataset

    from nasctl.optimizer.acquisition import NasctlAcquisition

    ssd = SearchSpaceDigest(feature_names=["a", "b", "c", "d"], bounds=[(0.0, 1.0)] * 4,
                            ordinal_features=[0, 1, 2, 3], discrete_choices=CHOICES)
    y = _objectives(observed)
    surrogate = Surrogate()
    surrogate.fit(datasets=[SupervisedDataset(X=observed, Y=y[:, i:i + 1], feature_names=ssd.feature_names,
                                              outcome_names=[name]) for i, name in enumerate(("err", "size"))],
                  search_space_digest=ssd)
    # both minimised: Ax maximises the weighted outcomes, thresholds on that scale
    config = TorchOptConfig(objective_weights=-torch.eye(2, dtype=torch.double),
                            objective_thresholds=torch.tensor([-1.2, -2.0], dtype=torch.double))
    acq = NasctlAcquisition(surrogate=surrogate, search_space_digest=ssd, torch_opt_config=config,
                            botorch_acqf_class=botorch_class or qLogNoisyExpectedHypervolumeImprovement)
    return acq, ssd


def _observed(n: int = 12) -> torch.Tensor:
    gen = torch.Generator().manual_seed(4)
    grid = torch.tensor(list(itertools.product(LEVELS, repeat=4)), dtype=torch.double)
    return grid[torch.randperm(grid.shape[0], generator=gen)[:n]]


@pytest.fixture(autouse=True)
def _screen_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(screen, "SCREEN", True)  # off by default (variant `screen` of benchmarks/ablation.py)


def test_the_shortlist_holds_the_exact_acquisitions_best_candidate() -> None:
    """Screened to 32 of 613, the list keeps the candidate the exact acquisition ranks first
    (a screen that chose at random would keep it about one time in twenty)."""
    observed = _observed()
    acq, ssd = _acquisition(observed)
    assert screen.applies(acq.acqf)
    listed = untried.untried_candidates(4, ssd.discrete_choices, None, [observed], unfixed=True)
    assert listed is not None and listed.shape == (625 - 12, 4)
    with torch.no_grad():
        exact = acq.acqf(listed.unsqueeze(-2))
    best = listed[exact.argmax()]
    short = screen.shortlist(acq.acqf, listed, n=1, keep=32)
    assert short.shape == (32, 4)
    assert any(torch.equal(row, best) for row in short)
    assert {tuple(r) for r in short.tolist()} <= {tuple(r) for r in listed.tolist()}
    scores, spread = screen.screened_improvement(acq.acqf, listed)
    assert scores.shape == spread.shape == (listed.shape[0],) and bool((scores >= 0).all())


def test_a_space_larger_than_ax_scores_whole_is_proposed_from_the_screened_list(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing held fixed, a discrete space above `screen.ABOVE` is listed (untried only)
    and screened; the proposal is the exact acquisition's best of the shortlist."""
    monkeypatch.setattr(screen, "ABOVE", 100)
    monkeypatch.setattr(screen, "KEEP", 32)
    observed = _observed()
    acq, ssd = _acquisition(observed)
    listed = untried.untried_candidates(4, ssd.discrete_choices, None, [observed], unfixed=True)
    assert listed is not None
    short = screen.shortlist(acq.acqf, listed, n=1)
    with torch.no_grad():
        expected = short[acq.acqf(short.unsqueeze(-2)).argmax()]
    screened: list[torch.Tensor] = []
    shortlist = screen.shortlist

    def recording(acqf, candidates, n=1):  # type: ignore[no-untyped-def]
        screened.append(candidates)
        return shortlist(acqf, candidates, n)

    monkeypatch.setattr(screen, "shortlist", recording)  # nasctl's own function, to see what was screened
    candidates, _, _ = acq.optimize(1, ssd)
    assert torch.equal(candidates[0], expected)
    assert len(screened) == 1 and torch.equal(screened[0], listed)  # every untried configuration, nothing fixed


def test_without_the_screen_or_a_hypervolume_acquisition_nothing_is_screened(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from botorch.acquisition.logei import qLogNoisyExpectedImprovement

    observed = _observed()
    acq, ssd = _acquisition(observed)
    listed = untried.untried_candidates(4, ssd.discrete_choices, None, [observed], unfixed=True)
    assert listed is not None
    assert screen.shortlist(acq.acqf, listed, n=1, keep=700) is listed  # no more than kept: all
    monkeypatch.setattr(screen, "SCREEN", False)
    assert not screen.applies(acq.acqf)
    assert screen.shortlist(acq.acqf, listed, n=1, keep=32) is listed
    monkeypatch.setattr(screen, "SCREEN", True)
    monkeypatch.setattr(screen, "MAX_CELL_COORDINATES", 1)  # a front with more boxes costs too much to screen
    assert not screen.applies(acq.acqf)
    assert screen.shortlist(acq.acqf, listed, n=1, keep=32) is listed
    monkeypatch.setattr(screen, "MAX_CELL_COORDINATES", 256)
    assert screen.applies(acq.acqf)
    assert not screen.applies(object())
    assert not screen.applies(qLogNoisyExpectedImprovement.__new__(qLogNoisyExpectedImprovement))
