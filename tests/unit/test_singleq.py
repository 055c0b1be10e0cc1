"""qLogNEHVI for one candidate at a time (`nasctl.orchestration.singleq`): the
same acquisition values and gradients as BoTorch's method, bit for bit, and
BoTorch's own method wherever the short path does not apply."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from nasctl.orchestration import singleq


@pytest.fixture(scope="module", autouse=True)
def fused_kernel() -> Iterator[None]:
    """BoTorch's fused kernel, as the orchestrator uses it: built once per
    installation (`prebuild_extension`), then loaded (`use_prebuilt_extension`)."""
    from nasctl.orchestration.optimizer import build_extension, use_prebuilt_extension
    from nasctl.orchestration.service import prepare_orchestrator_process

    prepare_orchestrator_process()
    assert build_extension(), "BoTorch's fused qLogNEHVI kernel could not be built"
    assert use_prebuilt_extension(), "BoTorch's fused qLogNEHVI kernel could not be loaded"
    singleq.install()
    yield


def _original(acqf: Any, samples: torch.Tensor, X: torch.Tensor | None = None) -> torch.Tensor:
    return singleq._ORIGINAL(acqf, samples, X=X)  # noqa: SLF001


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


def _acqf(kind: str, m: int, seed: int, constrained: bool = False) -> Any:
    from botorch.acquisition.multi_objective.logei import (
        qLogExpectedHypervolumeImprovement,
        qLogNoisyExpectedHypervolumeImprovement,
    )
    from botorch.acquisition.multi_objective.objective import IdentityMCMultiOutputObjective
    from botorch.sampling.normal import SobolQMCNormalSampler
    from botorch.utils.multi_objective.box_decompositions.non_dominated import FastNondominatedPartitioning

    model, x = _model(20, m, seed)
    ref = [-2.0] * m
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([32]), seed=seed)
    kwargs: dict[str, Any] = {}
    if constrained:  # the last output is a constraint (feasible where it is <= 0.5)
        kwargs = {"objective": IdentityMCMultiOutputObjective(outcomes=list(range(m - 1))),
                  "constraints": [lambda Z: Z[..., -1] - 0.5]}
        ref = ref[:-1]
    if kind == "nehvi":
        return qLogNoisyExpectedHypervolumeImprovement(
            model=model, ref_point=ref, X_baseline=x, sampler=sampler, prune_baseline=True, **kwargs)
    with torch.no_grad():
        Y = model.posterior(x).mean[..., : len(ref)]
    partitioning = FastNondominatedPartitioning(ref_point=torch.tensor(ref, dtype=torch.float64), Y=Y)
    return qLogExpectedHypervolumeImprovement(
        model=model, ref_point=ref, partitioning=partitioning, sampler=sampler, **kwargs)


def _value_and_grad(acqf: Any, X: torch.Tensor, method: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[torch.Tensor, torch.Tensor]:
    from botorch.acquisition.multi_objective.logei import qLogExpectedHypervolumeImprovement

    monkeypatch.setattr(qLogExpectedHypervolumeImprovement, "_compute_log_qehvi", method)
    X = X.clone().requires_grad_(True)
    value = acqf(X)
    value.sum().backward()
    assert X.grad is not None
    return value.detach(), X.grad


@pytest.mark.parametrize(("kind", "m"), [("nehvi", 2), ("nehvi", 3), ("ehvi", 2), ("ehvi", 3)])
def test_same_values_and_gradients_as_botorch(kind: str, m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    acqf = _acqf(kind, m, seed=m)
    g = torch.Generator().manual_seed(7)
    for shape in [(64, 1, 3), (8, 1, 3), (1, 3), (4, 2, 1, 3)]:  # t-batches of single candidates
        X = torch.rand(shape, generator=g, dtype=torch.float64)
        X[0, ..., 0] = 1.0  # and one on the boundary
        want = _value_and_grad(acqf, X, _original, monkeypatch)
        calls: list[int] = []

        def short(self: Any, samples: torch.Tensor, X: Any = None) -> torch.Tensor:
            calls.append(1)
            assert singleq._skips_identities(self, samples)  # noqa: SLF001
            return singleq.compute_log_qehvi(self, samples, X)

        got = _value_and_grad(acqf, X, short, monkeypatch)
        assert calls
        assert torch.isfinite(want[0]).all() and want[0].shape == got[0].shape
        assert torch.equal(got[0], want[0]), (got[0] - want[0]).abs().max()
        assert torch.equal(got[1], want[1]), (got[1] - want[1]).abs().max()


@pytest.mark.parametrize("case", ["batch of two", "constrained"])
def test_other_cases_are_botorchs(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two candidates at once, or outcome constraints: BoTorch's method runs, unchanged."""
    acqf = _acqf("nehvi", 3, seed=1, constrained=case == "constrained")
    shape = (5, 2, 3) if case == "batch of two" else (5, 1, 3)
    X = torch.rand(shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    calls: list[int] = []
    botorchs = singleq._ORIGINAL  # noqa: SLF001

    def original(self: Any, samples: torch.Tensor, X: Any = None) -> torch.Tensor:
        calls.append(1)
        return botorchs(self, samples, X=X)

    monkeypatch.setattr(singleq, "_ORIGINAL", original)
    got = _value_and_grad(acqf, X, singleq.compute_log_qehvi, monkeypatch)
    assert calls, "BoTorch's method was not used"
    monkeypatch.undo()
    want = _value_and_grad(acqf, X, _original, monkeypatch)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_the_optimizer_installs_it() -> None:
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement

    from nasctl.orchestration.optimizer import AxOptimizer
    from nasctl.spec import parse_spec
    from tests.unit.test_optimizer import SPEC

    singleq.uninstall()
    assert qLogNoisyExpectedHypervolumeImprovement._compute_log_qehvi is singleq._ORIGINAL  # noqa: SLF001
    AxOptimizer(parse_spec(SPEC))
    assert qLogNoisyExpectedHypervolumeImprovement._compute_log_qehvi is singleq.compute_log_qehvi  # noqa: SLF001
