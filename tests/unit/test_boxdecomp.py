"""The NumPy box-decomposition steps give BoTorch's numbers, bit for bit."""

from __future__ import annotations

import json

import pytest
import torch
from botorch.utils.multi_objective.box_decompositions import box_decomposition, dominated, non_dominated
from botorch.utils.multi_objective.box_decompositions import utils as botorch_steps
from botorch.utils.multi_objective.box_decompositions.dominated import DominatedPartitioning
from botorch.utils.multi_objective.box_decompositions.non_dominated import FastNondominatedPartitioning

from nasctl.orchestration import boxdecomp
from nasctl.orchestration.optimizer import AxOptimizer
from nasctl.spec import parse_spec

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


def partitionings(m: int, n: int, seed: int) -> list[torch.Tensor]:
    y = -front(m, n, seed)  # BoTorch partitions for maximisation
    ref = torch.full((m,), -0.9, dtype=torch.float64)  # some points fall outside
    return [cls(ref_point=ref, Y=y).hypercell_bounds for cls in (FastNondominatedPartitioning, DominatedPartitioning)]


def test_installed_partitionings_match_botorchs(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (box_decomposition, non_dominated):
        monkeypatch.setattr(module, "update_local_upper_bounds_incremental",
                            botorch_steps.update_local_upper_bounds_incremental)
    for module in (non_dominated, dominated):
        monkeypatch.setattr(module, "get_partition_bounds", botorch_steps.get_partition_bounds)
    want = {case: partitionings(*case) for case in CASES}
    boxdecomp.install()
    assert non_dominated.update_local_upper_bounds_incremental is boxdecomp.update_local_upper_bounds_incremental
    for case, bounds in want.items():
        got = partitionings(*case)
        assert all(torch.equal(a, b) for a, b in zip(got, bounds)), case


def test_the_optimizer_installs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # BoTorch's own functions first: an optimizer built by an earlier test may have installed ours
    monkeypatch.setattr(box_decomposition, "update_local_upper_bounds_incremental",
                        botorch_steps.update_local_upper_bounds_incremental)
    monkeypatch.setattr(dominated, "get_partition_bounds", botorch_steps.get_partition_bounds)
    spec = parse_spec(json.dumps({
        "name": "b", "search_space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
        "objectives": {k: {"goal": "minimize", "threshold": 1.0} for k in "fgh"},
        "budget": {"max_trials": 10}, "trial": {"script": "/bin/true"},
    }))
    AxOptimizer(spec)
    assert box_decomposition.update_local_upper_bounds_incremental is boxdecomp.update_local_upper_bounds_incremental
    assert dominated.get_partition_bounds is boxdecomp.get_partition_bounds
