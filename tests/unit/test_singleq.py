"""qLogNEHVI for one candidate at a time (`nasctl.optimizer.singleq`): nasctl's
subclass gives the same acquisition values and gradients as BoTorch's class,
bit for bit, and runs BoTorch's own method wherever the short path does not
apply."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from nasctl.optimizer import acquisition, singleq


@pytest.fixture(scope="module", autouse=True)
def fused_kernel() -> Iterator[None]:
    """BoTorch's fused kernel, as the orchestrator uses it: built once per
    installation (`prebuild_extension`), then loaded (`use_prebuilt_extension`)."""
    from nasctl.optimizer.ax_optimizer import build_extension, use_prebuilt_extension
    from nasctl.orchestration.control import prepare_orchestrator_process

    prepare_orchestrator_process()
    assert build_extension(), "BoTorch's fused qLogNEHVI kernel could not be built"
    assert use_prebuilt_extension(), "BoTorch's fused qLogNEHVI kernel could not be loaded"
    yield


@pytest.fixture(autouse=True)
def single_candidate_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acquisition, "SPEEDUPS", frozenset({"single-candidate"}))


def _model(n: int, m: int, seed: int) -> tuple[Any, torch.Tensor]:
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.outcome import Standardize
    from gpytorch.mlls import ExactMarginalLogLikelihood

    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 3, generator=g, dtype=torch.float64)
    y = torch.stack([torch.sin(3 * x[:, 0] + k) + x[:, 1] * (k + 1) - x[:, 2] ** 2 for k in range(m)], -1)
    y = -y + 0.05 * torch.randn(y.shape, generator=g, dtype=torch.float64)  # maximised
    model = SingleTaskGP(x, y, outcome_transform=Standardize(m=m))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model, x


def _acqf(m: int, seed: int, constrained: bool = False, reference: bool = False) -> Any:
    """nasctl's qLogNEHVI subclass, or (`reference`) BoTorch's class, on the same model and samples."""
    from botorch.acquisition.multi_objective import logei
    from botorch.acquisition.multi_objective.objective import IdentityMCMultiOutputObjective
    from botorch.sampling.normal import SobolQMCNormalSampler

    model, x = _model(20, m, seed)
    ref = [-2.0] * m
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([32]), seed=seed)
    kwargs: dict[str, Any] = {}
    if constrained:  # the last output is a constraint (feasible where it is <= 0.5)
        kwargs = {"objective": IdentityMCMultiOutputObjective(outcomes=list(range(m - 1))),
                  "constraints": [lambda Z: Z[..., -1] - 0.5]}
        ref = ref[:-1]
    cls = logei.qLogNoisyExpectedHypervolumeImprovement if reference else acquisition.HypervolumeImprovement
    torch.manual_seed(0)  # the baseline pruning draws posterior samples from torch's generator
    acqf = cls(model=model, ref_point=ref, X_baseline=x, sampler=sampler, prune_baseline=True, **kwargs)
    assert logei._C is not None, "BoTorch did not load the fused kernel"  # noqa: SLF001
    return acqf


def _value_and_grad(acqf: Any, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    X = X.clone().requires_grad_(True)
    value = acqf(X)
    value.sum().backward()
    assert X.grad is not None
    return value.detach(), X.grad


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    short = singleq.compute_log_qehvi

    def counting(self: Any, samples: torch.Tensor, X: Any = None) -> torch.Tensor:
        calls.append(1)
        return short(self, samples, X)

    monkeypatch.setattr(singleq, "compute_log_qehvi", counting)
    return calls


@pytest.mark.parametrize("m", [2, 3, 4])
def test_same_values_and_gradients_as_botorch(m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    ours, botorchs = _acqf(m, seed=m), _acqf(m, seed=m, reference=True)
    calls = _counting(monkeypatch)
    g = torch.Generator().manual_seed(7)
    for shape in [(64, 1, 3), (8, 1, 3), (1, 3), (4, 2, 1, 3)]:  # t-batches of single candidates
        X = torch.rand(shape, generator=g, dtype=torch.float64)
        X[0, ..., 0] = 1.0  # and one on the boundary
        want = _value_and_grad(botorchs, X)
        got = _value_and_grad(ours, X)
        assert torch.isfinite(want[0]).all() and want[0].shape == got[0].shape
        assert torch.equal(got[0], want[0]), (got[0] - want[0]).abs().max()
        assert torch.equal(got[1], want[1]), (got[1] - want[1]).abs().max()
    assert calls, "the short path was not taken"


@pytest.mark.parametrize("case", ["batch of two", "constrained"])
def test_other_cases_are_botorchs(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two candidates at once, or outcome constraints: BoTorch's method runs, unchanged."""
    constrained = case == "constrained"
    ours, botorchs = _acqf(3, seed=1, constrained=constrained), _acqf(3, seed=1, constrained=constrained, reference=True)
    shape = (5, 2, 3) if case == "batch of two" else (5, 1, 3)
    X = torch.rand(shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    calls = _counting(monkeypatch)
    got = _value_and_grad(ours, X)
    assert not calls, "the short path was taken"
    want = _value_and_grad(botorchs, X)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
