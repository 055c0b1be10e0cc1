"""qLogNEHVI on the categorical GP with one joint posterior for all candidates
(`nasctl.optimizer.jointpost`): the same acquisition values, gradients and
proposals as BoTorch's per-candidate posteriors, and used where it applies."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

from nasctl.optimizer import acquisition, catgp, jointpost

from tests.helpers.optimizer import CELL, make_spec, run


@pytest.fixture
def joint_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """nasctl's qLogNEHVI with the joint posterior as its only speed-up."""
    monkeypatch.setattr(acquisition, "SPEEDUPS", frozenset({"joint-posterior"}))


def _model(n: int, outputs: int, mixed: bool, seed: int = 0) -> tuple[Any, torch.Tensor]:
    """A fitted categorical GP on n random cells (6 edges x 5 ops; a continuous column if `mixed`)."""
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.transforms.input import Normalize
    from gpytorch.mlls import ExactMarginalLogLikelihood

    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 5, (n, 6), generator=g).to(torch.float64)
    if mixed:
        x = torch.cat([x, torch.rand(n, 1, generator=g, dtype=torch.float64)], -1)
    w = torch.rand(outputs, 5, generator=g, dtype=torch.float64)
    y = torch.stack([w[k][x[:, :6].long()].sum(-1) for k in range(outputs)], -1)
    if mixed:
        y = y + torch.sin(6 * x[:, 6:])
    transform = Normalize(d=x.shape[-1], bounds=torch.tensor([[0.0] * x.shape[-1], [4.0] * 6 + [1.0] * (x.shape[-1] - 6)],
                                                             dtype=torch.float64))
    # as Ax builds it: outcomes standardised before they reach the model, inputs normalised
    model = catgp.model_class()(x, y, cat_dims=list(range(6)), input_transform=transform, outcome_transform=None)
    # a rough fit is enough: both paths must agree for any hyperparameters
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model), optimizer_kwargs={"options": {"maxiter": 30}})
    return model, x


def _acqf(model: Any, x: torch.Tensor, cache_pending: bool = True, reference: bool = False) -> Any:
    """nasctl's qLogNEHVI subclass, or (`reference`) BoTorch's class, with the same arguments."""
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
    from botorch.sampling.normal import SobolQMCNormalSampler

    with torch.no_grad():
        ref = model.posterior(x).mean.min(0).values - 0.1
    cls = qLogNoisyExpectedHypervolumeImprovement if reference else acquisition.HypervolumeImprovement
    return cls(
        model=model, ref_point=ref, X_baseline=x, sampler=SobolQMCNormalSampler(torch.Size([32]), seed=0),
        prune_baseline=False, cache_pending=cache_pending,
    )


def _cells(n: int, q: int, d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 5, (n, q, 6), generator=g).to(torch.float64)
    if d > 6:
        x = torch.cat([x, torch.rand(n, q, d - 6, generator=g, dtype=torch.float64)], -1)
    return x


@contextmanager
def _joint_calls() -> Iterator[list[int]]:
    """Counts the calls of `candidate_posteriors` inside the block."""
    calls: list[int] = []
    original = jointpost.candidate_posteriors

    def counting(*args: Any) -> Any:
        calls.append(1)
        return original(*args)

    jointpost.candidate_posteriors = counting  # type: ignore[assignment]
    try:
        yield calls
    finally:
        jointpost.candidate_posteriors = original  # type: ignore[assignment]


def _both(model: Any, x: torch.Tensor, X: torch.Tensor, pending: torch.Tensor | None = None,
          cache_pending: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Acquisition values of BoTorch's qLogNEHVI and of nasctl's subclass (joint posterior)."""
    values = []
    for reference in (True, False):
        acqf = _acqf(model, x, cache_pending=cache_pending, reference=reference)
        if pending is not None:
            acqf.set_X_pending(pending)
        with torch.no_grad():
            values.append(acqf(X))
    return values[0], values[1]


@pytest.mark.parametrize(("outputs", "q", "pending"), [(3, 1, ""), (2, 1, ""), (3, 2, ""), (3, 1, "cached")])
def test_same_values_as_per_candidate_posteriors(joint_only: None, outputs: int, q: int, pending: str) -> None:
    model, x = _model(30, outputs, mixed=False)
    # pending points are cached into the baseline, as a running experiment's trials are
    X_pending = _cells(2, 1, 6, 7).squeeze(1) if pending else None
    for n in (24, 128):
        X = _cells(n, q, 6, n)
        with _joint_calls() as calls:
            own, joint = _both(model, x, X, X_pending)
        assert calls, "the joint posterior was not used"
        assert torch.allclose(own, joint, rtol=0, atol=1e-9), float((own - joint).abs().max())
        assert int(own.argmax()) == int(joint.argmax())


def test_uncached_pending_points_keep_botorchs_path(joint_only: None) -> None:
    """Pending points that are not part of the cached baseline are sampled with each
    candidate: BoTorch's path, with the same values as BoTorch's class."""
    model, x = _model(30, 3, mixed=False)
    X = _cells(24, 1, 6, 3)
    with _joint_calls() as calls:
        own, joint = _both(model, x, X, _cells(2, 1, 6, 7).squeeze(1), cache_pending=False)
    assert torch.equal(own, joint) and not calls
    acqf = _acqf(model, x, cache_pending=False)
    with torch.no_grad():
        without = acqf(X)
    assert not torch.allclose(own, without)  # the pending points do change the values


def test_same_gradients_in_a_mixed_space(joint_only: None) -> None:
    model, x = _model(25, 2, mixed=True)
    X = _cells(8, 1, 7, 3)
    grads = []
    for reference in (True, False):
        acqf = _acqf(model, x, reference=reference)
        Xg = X.clone().requires_grad_(True)
        value = acqf(Xg)
        (grad,) = torch.autograd.grad(value.sum(), Xg)
        grads.append((value.detach(), grad[..., 6]))
    (v0, g0), (v1, g1) = grads
    assert torch.allclose(v0, v1, rtol=0, atol=1e-9)
    assert g0.abs().max() > 0  # the continuous column's gradient exists, and agrees
    assert torch.allclose(g0, g1, rtol=1e-7, atol=1e-9)


def test_other_models_keep_botorchs_path(joint_only: None) -> None:
    from botorch.models import SingleTaskGP

    x = torch.rand(12, 3, dtype=torch.float64)
    gp = SingleTaskGP(x, torch.stack([x.sum(-1), x.prod(-1)], -1))
    assert not jointpost._supported(gp, torch.zeros(4, 1, 3, dtype=torch.float64))
    model, cells = _model(12, 2, mixed=False)
    assert jointpost._supported(model, torch.zeros(4, 1, 6, dtype=torch.float64))
    # one candidate batch: the joint posterior is no smaller, so BoTorch's call is kept
    acqf = _acqf(model, cells)
    with _joint_calls() as calls, torch.no_grad():
        acqf(_cells(1, 1, 6, 0))
    assert not calls


def test_categorical_proposals_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    """A categorical-method run proposes the same cells with BoTorch's sampling as with
    the joint posterior."""
    from nasctl.optimizer.ax_optimizer import AxOptimizer

    spec = make_spec(CELL, max_trials=9, initial=3)
    runs = []
    for speedups in (acquisition.SPEEDUPS - {"joint-posterior"}, acquisition.SPEEDUPS):
        monkeypatch.setattr(acquisition, "SPEEDUPS", speedups)
        with _joint_calls() as calls:
            runs.append([c.parameters for c in run(AxOptimizer(spec), 9)])
        assert "joint-posterior" in speedups or not calls
    assert runs[0] == runs[1]
