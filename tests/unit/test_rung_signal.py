"""benchmarks/rung_signal.py: the rank correlation and the successive-halving simulation on learning curves."""

from __future__ import annotations

import math
import random

import pytest

from benchmarks.rung_signal import Pool, simulate_asha, spearman

RUNGS = [1, 3, 9, 27]


def test_spearman_orders_ties_and_reversals() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2, 3], [5, 6, 7, 8]) == pytest.approx(0.9486833)  # ties share their mean rank
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def pool(final: list[float], early: list[float] | None = None) -> Pool:
    """Configurations whose curves rise to `final` after 27 epochs; `early`, when given, is the
    value of every epoch before the last (a low rung that says nothing, or the opposite). A later
    configuration is smaller, so with rising `final` each one dominates those before it at the top
    (one order, no ties for the multi-objective rank to break)."""
    configs = []
    for i, f in enumerate(final):
        curve = [f * (1 - math.exp(-e / 4)) if early is None else early[i] for e in range(1, 27)] + [f]
        configs.append({"index": i, "num_params": 5000.0 - 10 * i, "val_acc": curve})
    return Pool({"0": configs})


def test_a_run_never_spends_past_its_budget_and_eager_reaches_the_top_after_one_full_training() -> None:
    p = pool([0.85 + 0.005 * i for i in range(20)])
    order = [(c, "0") for c in p.configs]
    trace = simulate_asha(p, order, RUNGS, 3, True, 100, "digits", oracle=False)
    spent = [e for e, _ in trace]
    assert spent == sorted(spent) and spent[-1] <= 100
    first_top = next(e for e, hv in trace if hv > 0)
    assert first_top == 27  # 1 + 2 + 6 + 18: the first configuration went straight up
    strict = simulate_asha(p, order, RUNGS, 3, False, 100, "digits", oracle=False)
    assert next(e for e, hv in strict if hv > 0) > 27  # strict waits for eta results per rung


def test_the_oracle_rank_helps_only_where_the_low_rungs_mislead() -> None:
    final = [0.82 + 0.15 * i / 59 for i in range(60)]
    order = [(c, "0") for c in random.Random(0).sample(range(60), 60)]
    honest = pool(final)
    assert simulate_asha(honest, order, RUNGS, 3, False, 150, "digits", oracle=False) == \
        simulate_asha(honest, order, RUNGS, 3, False, 150, "digits", oracle=True)
    misleading = pool(final, early=[1.0 - f for f in final])  # the best at 27 epochs is the worst before
    rung = simulate_asha(misleading, order, RUNGS, 3, False, 150, "digits", oracle=False)
    oracle = simulate_asha(misleading, order, RUNGS, 3, False, 150, "digits", oracle=True)
    assert 150 - 18 < rung[-1][0] <= 150 and 150 - 18 < oracle[-1][0] <= 150  # the budget, less than a rung short
    assert oracle[-1][1] > rung[-1][1]
