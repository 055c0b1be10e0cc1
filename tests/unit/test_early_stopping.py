"""Early-stopping decisions on synthetic learning curves (nasctl/orchestration/early_stopping.py).

Curves are val_acc per epoch (progress in points = epochs); num_params is a cost
metric logged once at step 0, like the built-in trainers do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

import pytest

from nasctl.orchestration.early_stopping import EarlyStopper, seconds_saved, stop_records
from nasctl.spec import ExperimentSpec, parse_spec
from nasctl.types import EventRecord, Observation

SPEC = """
name: es
search_space:
  lr: {{type: float, low: 0.001, high: 0.1}}
  epochs: {{type: fixed, value: 5}}
  precision: {{type: choice, values: [fp32, bf16]}}
objectives:
  val_acc: {{goal: maximize{acc_threshold}}}
  num_params: {{goal: minimize{size_threshold}}}
budget: {{max_trials: 10}}
trial: {{script: t.py}}
early_stopping: {{min_progress: 2, min_fraction: 0.4, min_completed: 3{extra}}}
"""

# Completed trials: index -> (val_acc per epoch, num_params). Trial 0 is fast and small,
# trial 1 fast and big, trial 2 slow (it was at 0.3 at epoch 3 and ended at 0.6).
COMPLETED = {
    0: ([0.5, 0.7, 0.85, 0.9, 0.95], 1000.0),
    1: ([0.6, 0.8, 0.9, 0.95, 0.97], 50000.0),
    2: ([0.1, 0.2, 0.3, 0.5, 0.6], 8000.0),
}
HOPELESS = [0.2, 0.25, 0.3]  # at epoch 3 no better than trial 2 was, so at best 0.6


def make_spec(acc_threshold: float | None = None, size_threshold: float | None = None, extra: str = "") -> ExperimentSpec:
    return parse_spec(SPEC.format(
        acc_threshold=f", threshold: {acc_threshold}" if acc_threshold is not None else "",
        size_threshold=f", threshold: {size_threshold}" if size_threshold is not None else "",
        extra=extra,
    ))


def observations(acc: Sequence[float], num_params: float | None, seconds_per_epoch: float = 1.0) -> list[Observation]:
    """val_acc at steps 10, 20, ... (one per epoch, 1 s apart after a 5 s start); num_params at step 0."""
    out = [Observation("val_acc", 10 * (k + 1), v, 100.0 + 5 + seconds_per_epoch * k) for k, v in enumerate(acc)]
    if num_params is not None:
        out.append(Observation("num_params", 0, num_params, 100.0))
    return out


def stopper(spec: ExperimentSpec, completed: dict[int, tuple[list[float], float]] = COMPLETED) -> EarlyStopper:
    es = EarlyStopper(spec)
    for index, (acc, size) in completed.items():
        es.track(index, {"lr": 0.01, "precision": "fp32"})
        es.observe(index, observations(acc, size))
        es.complete(index, {"val_acc": acc[-1], "num_params": size})
    return es


def running(es: EarlyStopper, acc: Sequence[float], num_params: float | None, index: int = 9,
            precision: str = "fp32", **params: object) -> int:
    es.track(index, {"lr": 0.05, "precision": precision, **params})
    es.observe(index, observations(acc, num_params))
    return index


def test_stops_a_hopeless_dominated_trial() -> None:
    es = stopper(make_spec())
    d = es.judge(running(es, HOPELESS, 5000.0), elapsed=8.0)
    assert d is not None
    # optimistic projection: trial 2's final 0.6; (0.6, 5000) is dominated by trial 0 (0.95, 1000)
    assert d.projected == {"val_acc": 0.6, "num_params": 5000.0}
    assert d.dominated_by == [0] and d.unknown == []
    assert d.step == 30 and d.progress == 3 and d.expected_final == 5
    assert "at step 30" in d.reason and "dominated by trial 0" in d.reason and "trial 2" in d.reason
    # 1 s per epoch on its curve, 2 epochs left
    assert d.seconds_saved == pytest.approx(2.0)


def test_worse_than_every_completed_trial_is_projected_by_the_largest_gain() -> None:
    es = stopper(make_spec())
    # no completed trial was this bad at epoch 3; the best learner from epoch 3 on (trial 2) gained 0.3
    d = es.judge(running(es, [0.05, 0.06, 0.07], 5000.0), 8.0)
    assert d is not None and d.projected["val_acc"] == pytest.approx(0.37)
    assert "largest later gain, +0.3 by trial 2" in d.reason and d.dominated_by == [0]


def test_keeps_a_promising_trial() -> None:
    es = stopper(make_spec())
    # ahead of every completed trial at epoch 3: nothing says it ends worse
    assert es.judge(running(es, [0.7, 0.88, 0.93], 5000.0), 8.0) is None
    # as slow as trial 2, but smaller than anything on the front: (0.6, 500) is not dominated
    assert es.judge(running(es, HOPELESS, 500.0, index=8), 8.0) is None


def test_margin_can_lift_the_projection_out_of_domination() -> None:
    # trial 2's slow start ended at 0.6; the front point (0.95, 1000) dominates (0.6, 900)...
    es = stopper(make_spec(), {**COMPLETED, 0: ([0.5, 0.7, 0.85, 0.9, 0.65], 900.0)})
    assert es.judge(running(es, HOPELESS, 950.0), 8.0) is not None
    # ... but not once a margin lifts the projection above 0.65
    es = stopper(make_spec(extra=", margin: 0.1"), {**COMPLETED, 0: ([0.5, 0.7, 0.85, 0.9, 0.65], 900.0)})
    assert es.judge(running(es, HOPELESS, 950.0), 8.0) is None


def test_keeps_everything_before_the_minimum_progress_or_with_too_few_completed() -> None:
    es = stopper(make_spec())
    assert es.judge(running(es, HOPELESS[:1], 5000.0), 8.0) is None  # 1 epoch < min_progress 2
    # 2 epochs of 10 is below min_fraction 0.4 x 10 = 4
    assert es.judge(running(es, HOPELESS[:2], 5000.0, index=7, epochs=10), 8.0) is None
    few = stopper(make_spec(), {k: v for k, v in COMPLETED.items() if k != 1})
    assert few.judge(running(few, HOPELESS, 5000.0), 8.0) is None  # 2 completed < min_completed 3
    # at (or past) its expected end it is left to finish
    assert es.judge(running(es, [0.2, 0.25, 0.3, 0.3, 0.3], 5000.0, index=6), 8.0) is None


def test_reduced_precision_gets_a_later_minimum_progress() -> None:
    # a completed 10-epoch trial that was slow all along (0.3 at epochs 6 and 7) and ended at 0.6
    slow10 = {**COMPLETED, 3: ([0.1, 0.15, 0.2, 0.25, 0.28, 0.3, 0.3, 0.4, 0.5, 0.6], 8000.0)}
    es = stopper(make_spec(extra=", min_fraction: 0.0, min_progress: 3, reduced_precision_grace: 2"), slow10)
    # the same slow start: fp32 is stopped at epoch 3, bf16 is kept until epoch 6 (2 x 3)
    assert es.judge(running(es, HOPELESS, 5000.0, index=8, precision="fp32", epochs=10), 8.0) is not None
    assert es.judge(running(es, HOPELESS, 5000.0, index=9, precision="bf16", epochs=10), 8.0) is None
    bf16 = running(es, HOPELESS + [0.3, 0.31, 0.32], 5000.0, index=10, precision="bf16", epochs=10)
    assert es.judge(bf16, 8.0) is not None
    # the fraction is scaled too: 0.4 x 2 = 0.8 of 10 epochs
    es = stopper(make_spec(extra=", min_progress: 1, reduced_precision_grace: 2"), slow10)
    seven = HOPELESS + [0.3] * 4
    assert es.judge(running(es, seven, 5000.0, index=8, precision="fp32", epochs=10), 8.0) is not None
    assert es.judge(running(es, seven, 5000.0, index=9, precision="fp16", epochs=10), 8.0) is None


def test_unknown_objectives_are_optimistic() -> None:
    es = stopper(make_spec())
    # num_params not logged yet: it could be smaller than anything, so nothing dominates it
    d = es.judge(running(es, HOPELESS, None), 8.0)
    assert d is None
    # an objective with a curve of its own (logged at the watched curve's latest step) is not final either
    es.track(5, {"lr": 0.05, "precision": "fp32"})
    es.observe(5, observations(HOPELESS, None) + [Observation("num_params", 30, 5000.0, 108.0)])
    assert es.judge(5, 8.0) is None
    # ... while a metric logged once at step 0 and not since is final
    assert es.judge(running(es, HOPELESS, 5000.0, index=4), 8.0) is not None


def test_thresholds_stop_even_with_unknown_objectives() -> None:
    es = stopper(make_spec(acc_threshold=0.9))
    d = es.judge(running(es, HOPELESS, None), 8.0)
    assert d is not None and d.unknown == ["num_params"] and d.dominated_by == []
    assert "not beyond its threshold 0.9" in d.reason and "num_params not known yet" in d.reason
    assert d.projected == {"val_acc": 0.6}  # only what was known goes to the optimizer


def test_thresholds_decide_who_is_on_the_front() -> None:
    # trial 0 (1000 params) is beyond num_params <= 800: infeasible, so it dominates nothing;
    # trial 2 (0.6, 8000) is infeasible too; the front is trial 1 (0.97, 50000)... also infeasible.
    es = stopper(make_spec(size_threshold=800))
    assert es.judge(running(es, HOPELESS, 500.0), 8.0) is None
    # a running trial whose known cost is beyond its threshold can never be feasible
    d = es.judge(running(es, HOPELESS, 5000.0, index=8), 8.0)
    assert d is not None and "num_params is 5000, not beyond its threshold 800" in d.reason
    # with a looser threshold trial 0 is feasible and dominates again
    es = stopper(make_spec(size_threshold=20000))
    d = es.judge(running(es, HOPELESS, 5000.0), 8.0)
    assert d is not None and d.dominated_by == [0]


def test_outcome_constraints_on_known_metrics() -> None:
    spec = parse_spec(SPEC.format(acc_threshold="", size_threshold="", extra="")
                      + "constraints: ['latency_ms <= 5']\n")
    es = EarlyStopper(spec)
    for index, (acc, size) in COMPLETED.items():
        es.track(index, {})
        es.observe(index, observations(acc, size) + [Observation("latency_ms", 0, 1.0, 100.0)])
        es.complete(index, {"val_acc": acc[-1], "num_params": size, "latency_ms": 1.0})
    fast = running(es, [0.7, 0.88, 0.93], 500.0)
    es.observe(fast, [Observation("latency_ms", 0, 9.0, 100.0)])
    d = es.judge(fast, 8.0)
    assert d is not None and "latency_ms is 9, violating the constraint latency_ms <= 5" in d.reason
    unknown = running(es, [0.7, 0.88, 0.93], 500.0, index=8)  # latency not logged yet: assumed met
    assert es.judge(unknown, 8.0) is None


def test_minimised_curve_metric() -> None:
    spec = parse_spec(SPEC.format(acc_threshold="", size_threshold="", extra="")
                      .replace("val_acc: {goal: maximize}", "val_loss: {goal: minimize}"))
    es = EarlyStopper(spec)
    assert es.metric == "val_loss"
    for index, (acc, size) in COMPLETED.items():
        loss = [1 - a for a in acc]
        es.track(index, {})
        es.observe(index, [Observation("val_loss", 10 * (k + 1), v, 100.0 + k) for k, v in enumerate(loss)]
                   + [Observation("num_params", 0, size, 100.0)])
        es.complete(index, {"val_loss": loss[-1], "num_params": size})
    es.track(9, {})
    es.observe(9, [Observation("val_loss", 10 * (k + 1), 1 - a, 100.0 + k) for k, a in enumerate(HOPELESS)]
               + [Observation("num_params", 0, 5000.0, 100.0)])
    d = es.judge(9, 8.0)
    assert d is not None and d.projected["val_loss"] == pytest.approx(0.4) and d.dominated_by == [0]


def test_time_saved_without_timestamps_uses_elapsed() -> None:
    es = stopper(make_spec())
    es.track(9, {"precision": "fp32"})
    es.observe(9, [Observation("val_acc", 10 * (k + 1), v, None) for k, v in enumerate(HOPELESS)]
               + [Observation("num_params", 0, 5000.0, None)])
    d = es.judge(9, elapsed=9.0)
    assert d is not None and d.seconds_saved == pytest.approx(9.0 / 3 * 2)  # elapsed x (5 / 3 - 1)


def test_stop_records_keep_the_last_decision_per_stopped_trial() -> None:
    t = datetime(2026, 1, 1)
    events = [
        EventRecord(1, 1, t, "early_stopped", "", 3, {"seconds_saved": 5.0}),
        EventRecord(2, 1, t, "early_stopped", "", 3, {"seconds_saved": 7.0}),  # judged again after a crash
        EventRecord(3, 1, t, "early_stopped", "", 4, {"seconds_saved": 2.5}),
        EventRecord(4, 1, t, "early_stopped", "", 5, {"seconds_saved": 100.0}),  # not EARLY_STOPPED in the end
        EventRecord(5, 1, t, "finished", "", 4, None),
    ]
    records = stop_records(events, [3, 4])
    assert set(records) == {3, 4} and seconds_saved(records) == 9.5
    assert math.isclose(seconds_saved({}), 0.0)


def test_the_decision_depends_only_on_the_curves() -> None:
    """Fed in one batch (a resume reading the store) or point by point (a live run),
    and with completions recorded in another order, the decision is the same."""
    live = EarlyStopper(make_spec())
    for index in (2, 0, 1):
        acc, size = COMPLETED[index]
        live.track(index, {"precision": "fp32"})
        for o in observations(acc, size):
            live.observe(index, [o])
        live.complete(index, {"val_acc": acc[-1], "num_params": size})
    live.track(9, {"precision": "fp32"})
    for o in observations(HOPELESS, 5000.0):
        live.observe(9, [o])
    live.observe(9, [Observation("val_acc", 30, 0.99, 200.0)])  # a step already held keeps its first value
    resumed = stopper(make_spec())
    running(resumed, HOPELESS, 5000.0)
    a, b = live.judge(9, 8.0), resumed.judge(9, 8.0)
    assert a is not None and a == b


def test_the_watched_metric_defaults_to_the_first_objective_with_a_curve() -> None:
    # num_params comes first but is logged once per trial: val_acc is watched
    spec = parse_spec(SPEC.format(acc_threshold="", size_threshold="", extra="")
                      .replace("  val_acc: {goal: maximize}\n  num_params: {goal: minimize}\n",
                               "  num_params: {goal: minimize}\n  val_acc: {goal: maximize}\n"))
    assert list(spec.objectives) == ["num_params", "val_acc"]
    es = EarlyStopper(spec)
    assert es.watched_metric() is None and es.curve_metrics == ["num_params", "val_acc"]
    es = stopper(spec)
    assert es.watched_metric() == "val_acc"
    d = es.judge(running(es, HOPELESS, 5000.0), 8.0)
    assert d is not None and d.metric == "val_acc" and d.event_data()["metric"] == "val_acc"
    # named explicitly, it is used as is
    named = EarlyStopper(make_spec(extra=", metric: num_params"))
    assert named.watched_metric() == "num_params" and named.curve_metrics == ["num_params"]


def test_a_trial_whose_best_case_ties_a_front_trial_is_kept() -> None:
    """Stopping needs a front trial at least as good everywhere and strictly better
    somewhere: an optimistic point equal to a front point could still join the front."""
    # trial 2 (slow start, final 0.6) is on the front by size; the running trial at
    # epoch 3 is no better than trial 2 was, so it projects to exactly (0.6, 500)
    completed = {**COMPLETED, 2: ([0.1, 0.2, 0.3, 0.5, 0.6], 500.0)}
    es = stopper(make_spec(), completed)
    assert es.judge(running(es, HOPELESS, 500.0), 8.0) is None
    # one parameter more and trial 2 dominates it: the same setup does stop
    es = stopper(make_spec(), completed)
    d = es.judge(running(es, HOPELESS, 501.0), 8.0)
    assert d is not None and d.projected == {"val_acc": 0.6, "num_params": 501.0} and d.dominated_by == [2]
