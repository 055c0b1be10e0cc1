"""The multi-fidelity spec keys and the promotion rule (nasctl/optimizer/promotion.py)."""

from __future__ import annotations

import random

import pytest

from nasctl.errors import SpecError
from nasctl.optimizer.promotion import RungResult, carried_thresholds, choose_promotion, rank_order
from nasctl.spec import FidelitySpec, Objective, parse_constraint, parse_spec

OBJ = {"acc": Objective(goal="maximize"), "size": Objective(goal="minimize")}

SPEC = """
name: mf
search_space:
  x: {{type: float, low: 0, high: 1}}
  {extra}
objectives:
  y: {{goal: minimize}}
  z: {{goal: minimize}}
budget: {{max_trials: 10}}
trial: {{script: train.py}}
optimizer: {{fidelity: {fidelity}}}
{tail}
"""


def spec_text(fidelity: str, extra: str = "", tail: str = "") -> str:
    return SPEC.format(fidelity=fidelity, extra=extra, tail=tail)


# --- rung arithmetic -----------------------------------------------------------------
@pytest.mark.parametrize(("lo", "hi", "eta", "rungs"), [
    (1, 27, 3, (1, 3, 9, 27)),
    (1, 20, 3, (1, 3, 9, 20)),     # max need not be min * eta^k: it is the top rung
    (1, 9, 2, (1, 2, 4, 8, 9)),
    (2, 3, 3, (2, 3)),
    (0.5, 4.0, 2, (0.5, 1.0, 2.0, 4.0)),
])
def test_rungs(lo: float, hi: float, eta: int, rungs: tuple[float, ...]) -> None:
    fid = FidelitySpec(min=lo, max=hi, eta=eta)
    assert fid.rungs == rungs
    assert [fid.rung_of(r) for r in rungs] == list(range(len(rungs)))
    assert fid.rung_of(hi + 1) is None
    assert fid.in_front(hi) and not fid.in_front(lo) and not fid.in_front(None)
    assert FidelitySpec(min=lo, max=hi, eta=eta, front="all").in_front(lo)


def test_spec_accepts_fidelity_and_passes_it_to_the_trial() -> None:
    spec = parse_spec(spec_text("{parameter: epochs, min: 1, max: 27, eta: 3}"))
    fid = spec.optimizer.fidelity
    assert fid is not None and fid.parameter == "epochs" and fid.rungs == (1, 3, 9, 27)
    assert "epochs" not in spec.tunable and fid.promotion == "eager"
    assert spec.active_parameters({"x": 0.5, "epochs": 9}) == {"x": 0.5, "epochs": 9}


@pytest.mark.parametrize(("fidelity", "extra", "tail", "message"), [
    ("{parameter: x, min: 1, max: 9}", "", "", "'x' is also in search_space; remove it there"),
    ("{min: 9, max: 9}", "", "", "min (9) must be below max (9)"),
    ("{min: 1, max: 9, eta: 1}", "", "", "eta (1) must be >= 2"),
    ("{min: 0, max: 9}", "", "", "greater than 0"),
    ("{min: 1, max: 9, front: best}", "", "", "optimizer.fidelity.front"),
    ("{min: 1, max: 9, promotion: greedy}", "", "", "optimizer.fidelity.promotion: Input should be 'eager' or"),
    ("{min: 1, max: 9, rank: best}", "", "", "optimizer.fidelity.rank: Input should be 'rung' or 'model'"),
    ("{min: 1, max: 9}", "", "early_stopping: {min_completed: 3}",
     "early_stopping and optimizer.fidelity cannot be combined"),
    ("{min: 1, max: 9}", "", "", None),
])
def test_spec_errors_are_one_line(fidelity: str, extra: str, tail: str, message: str | None) -> None:
    text = spec_text(fidelity, extra, tail)
    if message is None:
        parse_spec(text)
        return
    with pytest.raises(SpecError) as e:
        parse_spec(text)
    assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(("budget", "fidelity", "message"), [
    (30, "{min: 1, max: 9}", None),
    (9, "{min: 1, max: 9}", None),
    (5, "{min: 1, max: 9}", "budget.max_fidelity (5) is below optimizer.fidelity.max (9), so no trial could reach"),
    (0, "{min: 1, max: 9}", "budget.max_fidelity: Input should be greater than 0"),
    (30, None, "budget.max_fidelity needs optimizer.fidelity"),
])
def test_the_fidelity_budget_is_checked(budget: float, fidelity: str | None, message: str | None) -> None:
    text = spec_text(fidelity or "{min: 1, max: 9}").replace("max_trials: 10}", f"max_trials: 10, max_fidelity: {budget}}}")
    if fidelity is None:
        text = text.replace("optimizer: {fidelity: {min: 1, max: 9}}", "")
    if message is None:
        assert parse_spec(text).budget.max_fidelity == budget
        return
    with pytest.raises(SpecError) as e:
        parse_spec(text)
    assert message in str(e.value) and "\n" not in str(e.value)


# --- the multi-objective ranking ---------------------------------------------------------
def rr(index: int, acc: float, size: float, rung: int = 0, **more: float) -> RungResult:
    return RungResult(index, rung, {"acc": acc, "size": size, **more})


def test_rank_puts_the_front_first_then_by_hypervolume_contribution() -> None:
    results = [
        rr(0, 0.50, 50),   # dominated by 1
        rr(1, 0.60, 40),   # front
        rr(2, 0.90, 90),   # front, extreme
        rr(3, 0.70, 60),   # front, middle
        rr(4, 0.40, 95),   # dominated by everything
        rr(5, 0.70, 60.5),  # dominated by 3 only (second front)
    ]
    order = [r.index for r in rank_order(results, OBJ)]
    assert set(order[:3]) == {1, 2, 3}
    assert order.index(0) < order.index(4) and order.index(5) < order.index(4)
    assert order[-1] == 4


def test_hypervolume_contribution_breaks_ties_within_a_front() -> None:
    # three front points; the middle one (2) covers a large area alone, 3 sits close to 1
    results = [rr(1, 0.50, 10), rr(2, 0.80, 40), rr(3, 0.51, 10.5), rr(4, 0.95, 100)]
    order = [r.index for r in rank_order(results, OBJ)]
    assert order.index(2) < order.index(3)


def test_thresholds_set_the_reference_so_size_weighs_by_the_room_they_leave() -> None:
    # the first rung of a space of 1,500 to 26,000 parameters judged against num_params <= 80000:
    # on the rung's own range (no thresholds) the tiny network near chance (0) is second, for being
    # the smallest; against the thresholds its size saves little and the accurate one (2) is second
    results = [rr(0, 0.30, 1500), rr(1, 0.62, 9000), rr(2, 0.70, 26000), rr(3, 0.20, 20000),
               rr(4, 0.50, 22000)]
    assert [r.index for r in rank_order(results, OBJ)] == [1, 0, 2, 4, 3]
    judged = {"acc": Objective(goal="maximize", threshold=0.8), "size": Objective(goal="minimize", threshold=80000)}
    assert [r.index for r in rank_order(results, judged)] == [1, 2, 0, 4, 3]
    # a threshold inside the rung's values leaves the reference at the rung's worst: the same order
    inside = {"acc": Objective(goal="maximize", threshold=0.4), "size": Objective(goal="minimize", threshold=2000)}
    assert [r.index for r in rank_order(results, inside)] == [1, 0, 2, 4, 3]


def test_infeasible_results_rank_last_by_how_far_they_miss() -> None:
    cons = [parse_constraint("latency <= 5")]
    results = [rr(0, 0.99, 1, latency=9), rr(1, 0.5, 50, latency=1), rr(2, 0.98, 2, latency=6)]
    assert [r.index for r in rank_order(results, OBJ, cons)] == [1, 2, 0]


def test_single_objective_is_a_plain_sort() -> None:
    one = {"acc": Objective(goal="maximize")}
    results = [RungResult(i, 0, {"acc": v}) for i, v in enumerate([0.3, 0.9, 0.1, 0.5])]
    assert [r.index for r in rank_order(results, one)] == [1, 3, 0, 2]


# --- asynchronous successive halving -------------------------------------------------------
def test_nothing_is_promoted_before_a_rung_has_eta_results() -> None:
    results = [rr(0, 0.9, 10), rr(1, 0.1, 90)]
    assert choose_promotion(results, set(), n_rungs=3, eta=3, objectives=OBJ) is None


def test_promotes_as_soon_as_the_top_share_exists_without_waiting_for_the_rung() -> None:
    results = [rr(0, 0.5, 50), rr(1, 0.9, 10), rr(2, 0.1, 90)]
    chosen = choose_promotion(results, set(), n_rungs=3, eta=3, objectives=OBJ)
    assert chosen is not None and chosen.index == 1
    # with 1 promoted already, 3 results allow no second promotion; a 6th result allows one more
    assert choose_promotion(results, {1}, n_rungs=3, eta=3, objectives=OBJ) is None
    more = [*results, rr(3, 0.3, 70), rr(4, 0.2, 80), rr(5, 0.85, 20)]
    chosen = choose_promotion(more, {1}, n_rungs=3, eta=3, objectives=OBJ)
    assert chosen is not None and chosen.index == 5


def test_a_trial_promoted_once_is_never_chosen_again() -> None:
    rng = random.Random(0)
    results = [rr(i, rng.random(), rng.uniform(1, 100)) for i in range(30)]
    promoted: set[int] = set()
    while (c := choose_promotion(results, promoted, n_rungs=2, eta=3, objectives=OBJ)) is not None:
        assert c.index not in promoted
        promoted.add(c.index)
    assert len(promoted) == 30 // 3
    best = {r.index for r in rank_order(results, OBJ)[:10]}
    assert promoted == best


def test_higher_rungs_are_served_first_and_the_top_rung_never_promotes() -> None:
    rung0 = [rr(i, 0.1 * i, 100 - i) for i in range(9)]
    rung1 = [rr(10 + i, 0.5 + 0.1 * i, 50, rung=1) for i in range(3)]
    top = [rr(20 + i, 0.9, 10, rung=2) for i in range(3)]
    promoted = {i for i in range(9) if i >= 6}  # rung 0's top three went on already
    chosen = choose_promotion([*rung0, *rung1, *top], promoted, n_rungs=3, eta=3, objectives=OBJ)
    assert chosen is not None and chosen.rung == 1 and chosen.index == 12
    assert choose_promotion(top * 3, set(), n_rungs=3, eta=3, objectives=OBJ) is None


# --- eager promotion: a rung with fewer than eta results promotes its best ---------------
def test_eager_promotes_the_first_result_of_a_rung_at_once() -> None:
    results = [rr(0, 0.5, 50)]
    assert choose_promotion(results, set(), n_rungs=3, eta=3, objectives=OBJ) is None
    chosen = choose_promotion(results, set(), n_rungs=3, eta=3, objectives=OBJ, eager=True)
    assert chosen is not None and chosen.index == 0


def test_eager_promotes_a_second_result_only_if_it_is_the_best_so_far() -> None:
    worse = [rr(0, 0.5, 50), rr(1, 0.4, 60)]  # dominated by trial 0, which went on already
    assert choose_promotion(worse, {0}, n_rungs=3, eta=3, objectives=OBJ, eager=True) is None
    better = [rr(0, 0.5, 50), rr(1, 0.9, 10)]
    chosen = choose_promotion(better, {0}, n_rungs=3, eta=3, objectives=OBJ, eager=True)
    assert chosen is not None and chosen.index == 1


def test_eager_and_strict_admit_the_same_share_of_a_rung_with_eta_results_or_more() -> None:
    rng = random.Random(1)
    results = [rr(i, rng.random(), rng.uniform(1, 100)) for i in range(30)]
    for n in range(3, 31):
        for eager in (False, True):
            promoted: set[int] = set()
            while (c := choose_promotion(results[:n], promoted, n_rungs=2, eta=3, objectives=OBJ,
                                         eager=eager)) is not None:
                promoted.add(c.index)
            assert promoted == {r.index for r in rank_order(results[:n], OBJ)[: n // 3]}


def test_eager_reaches_the_top_rung_with_the_first_configuration() -> None:
    """Rungs 1, 3, 9: one configuration goes 0 -> 1 -> 2 with nothing else at its rungs."""
    promoted: set[int] = set()
    results = [rr(0, 0.5, 50, rung=0)]
    c = choose_promotion(results, promoted, n_rungs=3, eta=3, objectives=OBJ, eager=True)
    assert c is not None and c.index == 0
    promoted.add(0)
    results.append(rr(1, 0.6, 50, rung=1))  # trial 0 continued as trial 1
    c = choose_promotion(results, promoted, n_rungs=3, eta=3, objectives=OBJ, eager=True)
    assert c is not None and (c.index, c.rung) == (1, 1)


# --- model rank: the same rule on the predicted top-rung values ------------------------------
def certain(r: RungResult, values: dict[str, float]) -> RungResult:
    return RungResult(r.index, r.rung, values)


def test_model_rank_ranks_the_rung_by_the_predicted_top_rung_values() -> None:
    results = [rr(0, 0.5, 50), rr(1, 0.9, 10), rr(2, 0.1, 90)]
    asked: list[list[int]] = []

    def predict(rung: list[RungResult]) -> list[RungResult]:
        asked.append([r.index for r in rung])
        # trial 2 is predicted to dominate both others at the top rung
        return [certain(r, {"acc": 0.95, "size": 5.0} if r.index == 2 else {"acc": 0.6, "size": r.values["size"]})
                for r in rung]

    chosen = choose_promotion(results, set(), n_rungs=3, eta=3, objectives=OBJ, predict=predict)
    assert chosen is not None and chosen.index == 2  # predicted best at the top, worst at the rung
    assert sorted(asked[0]) == [0, 1, 2]
    # the share is the rung rule's: one of three; a promoted trial is never chosen again
    assert choose_promotion(results, {2}, n_rungs=3, eta=3, objectives=OBJ, predict=predict) is None


def promote_all(results: list[RungResult], objectives: dict[str, Objective], **kw: object) -> list[int]:
    """Every trial a two-rung ladder (eta 3) promotes from `results`, in the order chosen."""
    promoted: list[int] = []
    while (c := choose_promotion(results, set(promoted), n_rungs=2, eta=3, objectives=objectives,
                                 **kw)) is not None:  # type: ignore[arg-type]
        promoted.append(c.index)
    return promoted


def test_model_rank_puts_predicted_threshold_misses_last() -> None:
    """A tiny network at chance accuracy is on the rung's front (it is the smallest),
    but predicted to miss the accuracy threshold at the top, it is not promoted."""
    objectives = {"acc": Objective(goal="maximize", threshold=0.8), "size": Objective(goal="minimize")}
    tiny = rr(0, 0.10, 1000)
    results = [tiny, rr(1, 0.60, 5000), rr(2, 0.55, 6000), *(rr(10 + i, 0.05, 90000) for i in range(6))]
    top = {0: 0.40, 1: 0.95, 2: 0.93}

    def predict(rung: list[RungResult]) -> list[RungResult]:
        return [certain(r, {"acc": top.get(r.index, 0.85), "size": r.values["size"]}) for r in rung]

    assert sorted(promote_all(results, objectives)) == [0, 1, 2]  # nine results, three go on: the rung's front
    assert promote_all(results, objectives, predict=predict) == [1, 2, 10]


def test_model_rank_falls_back_to_the_rung_ranking_while_the_model_cannot_predict() -> None:
    results = [rr(0, 0.5, 50), rr(1, 0.9, 10), rr(2, 0.1, 90)]
    chosen = choose_promotion(results, set(), n_rungs=3, eta=3, objectives=OBJ, predict=lambda rung: None)
    assert chosen is not None and chosen.index == 1
    # fewer than eta results and not eager: nothing is due, whatever the model says
    assert choose_promotion(results[:2], set(), n_rungs=3, eta=3, objectives=OBJ,
                            predict=lambda rung: [certain(r, r.values) for r in rung]) is None


# --- thresholds carried down to the lower rungs ------------------------------------------------
JUDGED = {"acc": Objective(goal="maximize", threshold=0.9), "size": Objective(goal="minimize", threshold=100)}


def test_a_threshold_is_carried_down_by_what_configurations_within_it_improved() -> None:
    """Three rungs; four configurations reached the top: three within acc >= 0.9
    (gains after rung 0 of 0.1, 0.2 and 0.6; after rung 1 of 0.05 each), one not."""
    ladders = [
        {0: {"acc": 0.85, "size": 40}, 1: {"acc": 0.90, "size": 40}, 2: {"acc": 0.95, "size": 40}},
        {0: {"acc": 0.72, "size": 60}, 1: {"acc": 0.87, "size": 60}, 2: {"acc": 0.92, "size": 60}},
        {0: {"acc": 0.31, "size": 80}, 1: {"acc": 0.86, "size": 80}, 2: {"acc": 0.91, "size": 80}},
        {0: {"acc": 0.10, "size": 10}, 1: {"acc": 0.20, "size": 10}, 2: {"acc": 0.30, "size": 10}},  # missed it
        {0: {"acc": 0.50, "size": 20}},  # not at the top yet: tells nothing
    ]
    carried = carried_thresholds(ladders, JUDGED, n_rungs=3, share=1.0)
    by_rung = {k: {c.metric: (c.op, round(c.bound, 6)) for c in cons} for k, cons in carried.items()}
    # the largest gain of a configuration within the threshold: 0.6 after rung 0, 0.05 after rung 1;
    # the size does not change with training: its threshold is kept exactly at every rung
    assert by_rung == {0: {"acc": (">=", 0.3), "size": ("<=", 100)}, 1: {"acc": (">=", 0.85), "size": ("<=", 100)}}
    at_share = carried_thresholds(ladders, JUDGED, n_rungs=3, share=0.5)
    assert round(next(c.bound for c in at_share[0] if c.metric == "acc"), 6) == 0.7  # the median gain, 0.2
    # by default the 0.9 quantile: short of the slowest one's gain (0.2 + 0.8 * (0.6 - 0.2) = 0.52)
    assert round(next(c.bound for c in carried_thresholds(ladders, JUDGED, 3)[0] if c.metric == "acc"), 6) == 0.38


def test_nothing_is_carried_before_a_configuration_meets_the_threshold_at_the_top() -> None:
    ladders = [{0: {"acc": 0.2, "size": 400}, 1: {"acc": 0.5, "size": 400}},
               {0: {"acc": 0.4, "size": 400}, 1: {"acc": 0.95, "size": 400}}]  # too big at the top
    # acc: only the second met 0.9 (gain 0.55); size: nobody within 100 at the top, no size bound;
    # objectives without a threshold carry nothing
    carried = carried_thresholds(ladders, {**JUDGED, "latency": Objective(goal="minimize")}, n_rungs=2, share=1.0)
    assert [(c.metric, c.op, round(c.bound, 6)) for c in carried[0]] == [("acc", ">=", 0.35)]
    assert carried_thresholds(ladders[:1], JUDGED, n_rungs=2) == {}
    unknown = [{0: {"acc": float("nan"), "size": 400}, 1: {"acc": 0.95, "size": 400}}]  # a value not finite
    assert carried_thresholds(unknown, JUDGED, n_rungs=2) == {}
    # a gain below zero (it got worse with training) never tightens the threshold
    worse = [{0: {"acc": 0.97, "size": 40}, 1: {"acc": 0.95, "size": 40}}]
    assert [round(c.bound, 6) for c in carried_thresholds(worse, JUDGED, 2)[0]] == [0.9, 100]


def test_carried_thresholds_put_a_rung_result_no_good_configuration_resembled_last() -> None:
    """The smallest network of a rung at near-chance accuracy is on the rung's front and
    goes on first; with the accuracy threshold carried down to the rung it ranks after the
    accurate ones that can still end within it."""
    objectives = {"acc": Objective(goal="maximize", threshold=0.9), "size": Objective(goal="minimize")}
    results = [rr(0, 0.15, 100), rr(1, 0.80, 5000), rr(2, 0.78, 6000), rr(3, 0.83, 7000),
               *(rr(10 + i, 0.30, 9000 + i) for i in range(5))]
    carried = {0: [parse_constraint("acc >= 0.7")]}

    assert sorted(promote_all(results, objectives)) == [0, 1, 3]  # nine results, three go on: the rung's front
    assert sorted(promote_all(results, objectives, carried=carried)) == [1, 2, 3]
    # carried to another rung: no change
    assert sorted(promote_all(results, objectives, carried={1: carried[0]})) == [0, 1, 3]
