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


# --- all samples in one pass (BatchedNondominatedPartitioning) ---------------


def sample_fronts(m: int, seed: int) -> list[torch.Tensor]:
    """Several samples' outcomes: differing sizes (0 to 30 points, single points),
    ties on odd seeds, some points worse than the reference point (0); single
    precision on seed 7."""
    g = torch.Generator().manual_seed(1000 + seed)
    sizes = [0, 1, 2, 30, 7, 1, 15, 0][: 2 + seed % 7]
    ys = []
    for n in sizes:
        y = torch.rand(n, m, generator=g, dtype=torch.float32 if seed == 7 else torch.float64) - 0.1
        if seed % 2:
            y = (y * 4).round() / 4
        ys.append(y)
    return ys


BATCH_CASES = [(m, seed) for m in (2, 3, 4, 5, 6) for seed in range(8)]


@pytest.mark.parametrize(("m", "seed"), BATCH_CASES)
def test_batched_partitionings_match_botorchs(m: int, seed: int) -> None:
    from botorch.utils.multi_objective.box_decompositions.box_decomposition_list import BoxDecompositionList

    ys = sample_fronts(m, seed)
    ref = torch.zeros(m, dtype=ys[0].dtype)
    want = [FastNondominatedPartitioning(ref_point=ref, Y=y) for y in ys]
    batch = boxdecomp.SampleBatch()
    got = [boxdecomp.BatchedNondominatedPartitioning(ref_point=ref, Y=y, batch=batch) for y in ys]
    waiting = [p.hypercell_bounds is None for p in got if p.pareto_Y.shape[0]]
    assert all(waiting) if m > 2 else not any(waiting)  # 2 objectives: BoTorch's 2-d algorithm at once
    assert torch.equal(BoxDecompositionList(*got).get_hypercell_bounds(),
                       BoxDecompositionList(*want).get_hypercell_bounds())
    for w, p in zip(want, got):
        assert torch.equal(p.hypercell_bounds, w.hypercell_bounds)  # same cells, same order
        assert torch.equal(p.pareto_Y, w.pareto_Y)
        if w.pareto_Y.shape[0] and m > 2:  # 2 objectives: BoTorch's 2-d algorithm (its own cell order)
            for name in ("_U", "_Z", "_U2", "_Z2"):
                assert torch.equal(getattr(p, name), getattr(w, name)), name
        assert torch.equal(p.compute_hypervolume(), w.compute_hypervolume())


def test_more_bounds_than_the_first_guess() -> None:
    """Six objectives, 30 points: the rows outgrow their first allocation (with 40
    points one of these fronts took BoTorch 20 s to decompose, for the same check)."""
    g = torch.Generator().manual_seed(7)
    ys = [torch.rand(30, 6, generator=g, dtype=torch.float64) for _ in range(3)]
    ref = torch.zeros(6, dtype=torch.float64)
    batch = boxdecomp.SampleBatch()
    got = [boxdecomp.BatchedNondominatedPartitioning(ref_point=ref, Y=y, batch=batch) for y in ys]
    for y, p in zip(ys, got):
        want = FastNondominatedPartitioning(ref_point=ref, Y=y)
        assert torch.equal(p.get_hypercell_bounds(), want.hypercell_bounds)
        assert p._U.shape[0] > 6 * 30 + 4 or p._U2.shape[0] > 6 * p._U.shape[0] + 4


def test_a_batched_partitioning_updates_as_botorchs() -> None:
    g = torch.Generator().manual_seed(3)
    y, more = torch.rand(10, 3, generator=g, dtype=torch.float64), torch.rand(5, 3, generator=g, dtype=torch.float64)
    ref = torch.zeros(3, dtype=torch.float64)
    want = FastNondominatedPartitioning(ref_point=ref, Y=y)
    got = boxdecomp.BatchedNondominatedPartitioning(ref_point=ref, Y=y, batch=boxdecomp.SampleBatch())
    want.update(more)
    got.update(more)  # decomposes its batch first, then BoTorch's incremental update
    assert torch.equal(got.get_hypercell_bounds(), want.get_hypercell_bounds())


@pytest.mark.parametrize("objectives", [3, 4])
@pytest.mark.parametrize("constrained", [False, True])
def test_the_acquisition_batches_them(monkeypatch: pytest.MonkeyPatch, objectives: int, constrained: bool) -> None:
    """With "batched-boxes", nasctl's qLogNEHVI decomposes all samples' fronts
    in one pass and gives BoTorch's cells and values, bit for bit; a constraint
    leaves the samples with fronts of different sizes (some empty)."""
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
    from botorch.models import SingleTaskGP
    from botorch.sampling.normal import SobolQMCNormalSampler

    from nasctl.optimizer import acquisition

    monkeypatch.setattr(acquisition, "SPEEDUPS", frozenset({"numpy-boxes", "batched-boxes"}))
    g = torch.Generator().manual_seed(objectives)
    x = torch.rand(30, 3, generator=g, dtype=torch.float64)
    cols = [x[:, 0], 1 - x[:, 0] * x[:, 1], (1 - x[:, 2]) ** 2 + x[:, 1], x[:, 1] - x[:, 2]][:objectives]
    y = torch.stack(cols + [x.sum(-1) - 1.5], -1)  # the last column is the constraint's
    model = SingleTaskGP(x, y)
    kwargs = {"constraints": [lambda Z: Z[..., -1]]} if constrained else {}
    from botorch.acquisition.multi_objective.objective import IdentityMCMultiOutputObjective

    objective = IdentityMCMultiOutputObjective(outcomes=list(range(objectives)))
    acqfs = []
    for cls in (qLogNoisyExpectedHypervolumeImprovement, acquisition.HypervolumeImprovement):
        torch.manual_seed(0)  # the baseline pruning draws its samples from the global generator
        acqfs.append(cls(model=model, ref_point=[-0.1] * objectives, X_baseline=x, prune_baseline=True,
                         objective=objective, sampler=SobolQMCNormalSampler(torch.Size([16]), seed=1), **kwargs))
    assert torch.equal(acqfs[0].X_baseline, acqfs[1].X_baseline)
    boxes = acqfs[1].partitioning.box_decompositions
    assert all(isinstance(p, boxdecomp.BatchedNondominatedPartitioning) for p in boxes)
    assert acqfs[1].p_kwargs == {}
    if constrained:
        assert len({p.pareto_Y.shape[0] for p in boxes}) > 1
    assert torch.equal(acqfs[0].cell_lower_bounds, acqfs[1].cell_lower_bounds)
    assert torch.equal(acqfs[0].cell_upper_bounds, acqfs[1].cell_upper_bounds)
    X = torch.rand(32, 1, 3, generator=g, dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(acqfs[0](X), acqfs[1](X))
    # pending points: the decompositions are made again, with a new batch
    pending = torch.rand(2, 3, generator=g, dtype=torch.float64)
    for a in acqfs:
        a.set_X_pending(pending)
    assert torch.equal(acqfs[0].cell_lower_bounds, acqfs[1].cell_lower_bounds)
    assert torch.equal(acqfs[0].cell_upper_bounds, acqfs[1].cell_upper_bounds)
    with torch.no_grad():
        assert torch.equal(acqfs[0](X), acqfs[1](X))


def test_without_batching_each_sample_has_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from botorch.models import SingleTaskGP

    from nasctl.optimizer import acquisition

    monkeypatch.setattr(acquisition, "SPEEDUPS", frozenset({"numpy-boxes"}))
    g = torch.Generator().manual_seed(0)
    x = torch.rand(12, 2, generator=g, dtype=torch.float64)
    model = SingleTaskGP(x, torch.stack([x[:, 0], x[:, 1], 1 - x.sum(-1)], -1))
    a = acquisition.HypervolumeImprovement(model=model, ref_point=[-1.0] * 3, X_baseline=x)
    boxes = a.partitioning.box_decompositions
    assert not any(isinstance(p, boxdecomp.BatchedNondominatedPartitioning) for p in boxes)


def test_the_ablation_can_switch_it_off() -> None:
    """benchmarks/ablation.py names the same speed-ups as the acquisition; no-batched-boxes is one."""
    from benchmarks import ablation

    from nasctl.optimizer import acquisition

    assert set(ablation.SPEEDUPS) == acquisition.SPEEDUPS
    assert ablation.parse_variant("no-batched-boxes") == [("acquisition", "SPEEDUPS", ("without", "batched-boxes"))]
