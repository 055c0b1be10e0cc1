"""Pareto fronts and hypervolume against hand-checked cases and an independent implementation."""

from __future__ import annotations

import itertools

import moocore
import numpy as np
import pytest

from nasctl.pareto import compute_front, hypervolume, hypervolume_trace, pareto_mask
from nasctl.spec import Constraint, Objective


def brute_force_mask(Y: np.ndarray) -> np.ndarray:
    n = len(Y)
    return np.array(
        [not any(np.all(Y[j] >= Y[i]) and np.any(Y[j] > Y[i]) for j in range(n) if j != i) for i in range(n)]
    )


def test_hand_checked_2d() -> None:
    # maximise both; reference (0, 0). Front: (1,3), (2,2), (3,1); (1,1) and (2,1) dominated.
    Y = np.array([[1, 3], [2, 2], [3, 1], [1, 1], [2, 1]], dtype=float)
    assert pareto_mask(Y).tolist() == [True, True, True, False, False]
    # staircase area: 3*1 + 2*1 + 1*1 = 6
    assert hypervolume(Y, [0, 0]) == pytest.approx(6.0)
    # a reference that cuts the front: only points strictly better than (1.5, 0.5) count
    # (2,2) and (3,1): 1.5*1 + 0.5*... -> area = (3-1.5)*(1-0.5) + (2-1.5)*(2-1) = 0.75 + 0.5
    assert hypervolume(Y, [1.5, 0.5]) == pytest.approx(1.25)


def test_hand_checked_3d() -> None:
    # two boxes [0,2]x[0,1]x[0,1] and [0,1]x[0,2]x[0,1] overlap in [0,1]^2x[0,1]: 2 + 2 - 1 = 3
    Y = np.array([[2, 1, 1], [1, 2, 1]], dtype=float)
    assert hypervolume(Y, [0, 0, 0]) == pytest.approx(3.0)
    # adding a dominated point changes nothing; a taller point adds its own volume
    Y2 = np.vstack([Y, [[0.5, 0.5, 0.5], [1, 1, 3]]])
    assert hypervolume(Y2, [0, 0, 0]) == pytest.approx(3.0 + 2.0)


def test_duplicates_and_ties_are_kept_on_front() -> None:
    Y = np.array([[1, 2], [1, 2], [2, 1], [1, 1]], dtype=float)
    assert pareto_mask(Y).tolist() == [True, True, True, False]
    Y3 = np.array([[1, 2, 3], [1, 2, 3], [0, 2, 3]], dtype=float)
    assert pareto_mask(Y3).tolist() == [True, True, False]


@pytest.mark.parametrize("m", [2, 3, 4])
def test_mask_matches_brute_force(m: int) -> None:
    rng = np.random.default_rng(m)
    for _ in range(20):
        Y = rng.integers(0, 6, size=(40, m)).astype(float)  # many ties on purpose
        assert pareto_mask(Y).tolist() == brute_force_mask(Y).tolist()


@pytest.mark.parametrize("m", [2, 3, 4])
def test_hypervolume_matches_moocore(m: int) -> None:
    rng = np.random.default_rng(10 + m)
    for _ in range(10):
        Y = rng.random((30, m))
        ref = np.zeros(m)
        ours = hypervolume(Y, ref)
        # moocore minimises: negate both points and reference
        theirs = moocore.hypervolume(-Y, ref=-ref)
        assert ours == pytest.approx(theirs, rel=1e-9)


def test_compute_front_with_directions_thresholds_and_constraints() -> None:
    objectives = {
        "acc": Objective(goal="maximize", threshold=0.5),
        "size": Objective(goal="minimize", threshold=100.0),
    }
    trials = [
        (0, {"acc": 0.9, "size": 90.0, "lat": 1.0}),   # front
        (1, {"acc": 0.7, "size": 20.0, "lat": 1.0}),   # front
        (2, {"acc": 0.6, "size": 50.0, "lat": 1.0}),   # dominated by 1
        (3, {"acc": 0.95, "size": 10.0, "lat": 9.0}),  # best, but violates lat <= 5
        (4, {"acc": 0.4, "size": 5.0, "lat": 1.0}),    # below the acc threshold
        (5, {"acc": float("nan"), "size": 5.0}),        # not usable
    ]
    res = compute_front(trials, objectives, [Constraint(metric="lat", op="<=", bound=5.0)])
    assert sorted(res.indices) == [0, 1]
    assert sorted(res.feasible) == [0, 1, 2]
    # in maximisation form: points (0.9, -90), (0.7, -20), ref (0.5, -100)
    expected = hypervolume(np.array([[0.9, -90.0], [0.7, -20.0]]), [0.5, -100.0])
    assert res.hypervolume == pytest.approx(expected)
    assert res.hypervolume == pytest.approx(0.2 * 80 + 0.2 * 10)
    assert res.reference == {"acc": 0.5, "size": 100.0}
    assert res.inferred_reference == []


def test_inferred_reference_counts_every_feasible_point() -> None:
    objectives = {"a": Objective(goal="maximize"), "b": Objective(goal="minimize")}
    trials = [(i, {"a": float(a), "b": float(b)}) for i, (a, b) in enumerate([(1, 1), (2, 2), (3, 3)])]
    res = compute_front(trials, objectives)
    assert res.inferred_reference == ["a", "b"]
    assert sorted(res.indices) == [0, 1, 2]
    assert res.hypervolume > 0


def test_trace_is_monotone() -> None:
    objectives = {"a": Objective(goal="maximize", threshold=0.0), "b": Objective(goal="maximize", threshold=0.0)}
    rng = np.random.default_rng(0)
    trials = [(i, {"a": float(x), "b": float(y)}) for i, (x, y) in enumerate(rng.random((25, 2)))]
    trace = [hv for _, hv in hypervolume_trace(trials, objectives)]
    assert all(b >= a for a, b in itertools.pairwise(trace))
    assert trace[-1] == pytest.approx(compute_front(trials, objectives).hypervolume)
