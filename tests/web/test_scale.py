"""The scalable pieces behind the dashboard: the 3-objective sweep, the large-front and
incremental hypervolume functions (same answers as the reference ones), and the
server-side trial queries on every supported database."""

from __future__ import annotations

import numpy as np
import pytest

from nasctl.pareto import (
    compute_front,
    hypervolume,
    hypervolume_history,
    hypervolume_trace,
    pareto_mask,
)
from nasctl.spec import Objective, parse_constraint
from nasctl.store import Store, queries, requests
from nasctl.types import ExperimentStatus, TrialStatus
from tests.helpers.synthetic import add_synthetic


def _brute_force_mask(Y: np.ndarray) -> np.ndarray:
    """Every pair compared: a point is kept unless another is >= everywhere and > somewhere."""
    ge = (Y[None, :, :] >= Y[:, None, :]).all(-1)
    gt = (Y[None, :, :] > Y[:, None, :]).any(-1)
    return ~(ge & gt).any(-1)


@pytest.mark.parametrize("seed", range(6))
def test_the_mask_matches_pairwise_comparison(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for m in (2, 3, 4):
        for n in (0, 1, 2, 5, 40, 300):
            for Y in (rng.random((n, m)), rng.integers(0, 4, size=(n, m)).astype(float)):  # ties and duplicates
                assert (pareto_mask(Y) == _brute_force_mask(Y)).all()


def test_3d_hypervolume_matches_moocore() -> None:
    moocore = pytest.importorskip("moocore")
    rng = np.random.default_rng(7)
    Y = rng.random((400, 3))
    objs = {k: Objective(goal="maximize", threshold=0.0) for k in "abc"}
    res = compute_front([(i, dict(zip("abc", map(float, y)))) for i, y in enumerate(Y)], objs)
    assert res.hypervolume == pytest.approx(float(moocore.hypervolume(-Y, ref=[0.0, 0.0, 0.0])), rel=1e-9)
    assert res.hypervolume == pytest.approx(hypervolume(Y, [0.0, 0.0, 0.0]), rel=1e-9)


@pytest.mark.parametrize("m", [2, 3, 4])
def test_large_front_and_history_match_the_reference_functions(m: int) -> None:
    rng = np.random.default_rng(m)
    names = "abcd"[:m]
    objs = {n: Objective(goal="maximize" if k % 2 == 0 else "minimize", threshold=None if k == 1 else 0.1)
            for k, n in enumerate(names)}
    cons = [parse_constraint("lat <= 0.8")]
    for trial in range(5):
        n = int(rng.integers(1, 80))
        Y = rng.random((n, m)) if trial % 2 else rng.integers(0, 5, size=(n, m)) / 4
        trials = [(i, {**dict(zip(names, map(float, y))), "lat": float(rng.random())}) for i, y in enumerate(Y)]
        trials[0][1].pop(names[0])  # a trial without an objective value is ignored
        b = compute_front(trials, objs, cons)
        # the same front and hypervolume, from the pairwise reference functions
        usable = [(i, v) for i, v in trials if all(n in v for n in names) and v["lat"] <= 0.8]
        signs = np.array([1.0 if objs[n].maximize else -1.0 for n in names])
        ref = np.array([b.reference[n] for n in names]) * signs
        Yu = np.array([[v[n] for n in names] for _, v in usable]).reshape(-1, m) * signs
        beyond = np.all(Yu > ref, axis=1)
        feasible = [i for (i, _), ok in zip(usable, beyond) if ok]
        mask = pareto_mask(Yu[beyond])
        assert b.feasible == feasible
        assert b.indices == [i for i, ok in zip(feasible, mask) if ok]
        assert b.hypervolume == pytest.approx(hypervolume(Yu[beyond], ref), rel=1e-9, abs=1e-12)
        ref, fast = hypervolume_trace(trials, objs, cons), hypervolume_history(trials, objs, cons)
        assert [i for i, _ in fast] == [i for i, _ in ref]
        assert [h for _, h in fast] == pytest.approx([h for _, h in ref], rel=1e-9, abs=1e-12)


def test_page_queries_on_every_database(db_url: str) -> None:
    store = Store(db_url, create=True)
    exp = add_synthetic(store, "q", 30, choices=("relu", "gelu", "tanh"))
    trials = store.list_trials(exp.id)
    done = [t for t in trials if t.status == TrialStatus.COMPLETED]

    page = queries.page_trials(store, exp.id, limit=5, sort=queries.SortKey("acc", "value", descending=True))
    want = sorted(done, key=lambda t: (-t.values["acc"], t.index))
    assert page.total == 30
    assert [t.index for t in page.trials] == [t.index for t in want[:5]]
    last = queries.page_trials(store, exp.id, offset=25, limit=5, sort=queries.SortKey("acc", "value"))
    assert all(t.status == TrialStatus.FAILED for t in last.trials[-4:])  # no value: last

    flt = [parse_constraint("acc >= 0.5"), parse_constraint("lat <= 6")]
    got = queries.page_trials(store, exp.id, limit=100, value_filters=flt, statuses=[TrialStatus.COMPLETED])
    assert [t.index for t in got.trials] == [t.index for t in done if t.values["acc"] >= 0.5 and t.values["lat"] <= 6]

    for filters, keep in [
        ([queries.FieldFilter("act", "parameter", "=", "gelu"), queries.FieldFilter("acc", "value", ">", 0.4)],
         lambda t: t.parameters["act"] == "gelu" and t.values.get("acc", -1) > 0.4),
        ([queries.FieldFilter("act", "parameter", "!=", "relu"), queries.FieldFilter("x", "parameter", "<", 0.5)],
         lambda t: t.parameters["act"] != "relu" and t.parameters["x"] < 0.5),
        ([queries.FieldFilter("size", "value", "<=", 40.0), queries.FieldFilter("x", "parameter", ">=", 0.2)],
         lambda t: "size" in t.values and t.values["size"] <= 40 and t.parameters["x"] >= 0.2),
        ([queries.FieldFilter("lat", "value", "=", trials[0].values["lat"])], lambda t: t.index == 0),
    ]:
        got = queries.page_trials(store, exp.id, limit=100, filters=filters)
        assert [t.index for t in got.trials] == [t.index for t in trials if keep(t)], filters

    by_act = queries.page_trials(store, exp.id, limit=100, sort=queries.SortKey("act", "parameter", numeric=False))
    acts = [t.parameters["act"] for t in by_act.trials]
    assert acts == sorted(acts)
    by_x = queries.page_trials(store, exp.id, limit=100, sort=queries.SortKey("x", "parameter", descending=True))
    xs = [t.parameters["x"] for t in by_x.trials]
    assert xs == sorted(xs, reverse=True)
    with pytest.raises(ValueError):
        queries.page_trials(store, exp.id, sort=queries.SortKey("values", "column"))

    pts = queries.trial_points(store, exp.id)
    assert [p[0] for p in pts] == list(range(30))
    assert [t.index for t in queries.trials_by_index(store, exp.id, [29, 3, 3, 99])] == [3, 29]
    assert queries.trial_parameters(store, exp.id, [1])[1] == trials[1].parameters
    cursor = queries.change_cursor(store, exp.id)
    assert queries.changed_trial_indices(store, exp.id, cursor) == (cursor, set(), False)
    store.add_event(exp.id, "note", "hello", trial_index=4)
    new_cursor, changed, _ = queries.changed_trial_indices(store, exp.id, cursor)
    assert new_cursor > cursor and changed == {4}
    assert [e.kind for e in queries.trial_events(store, exp.id, 4)] == ["candidate", "submitted", "finished", "note"]
    assert [(e.kind, e.trial_index) for e in queries.latest_events(store, exp.id, 2)] == [
        ("finished", 29), ("note", 4)]
    eid = requests.request_cancel(store, exp.id, 5, "too slow")
    assert requests.requests_after(store, exp.id) == [requests.OperatorRequest(eid, "cancel_requested", 5, "too slow")]
    store.close()


def test_sampled_history_reports_exact_values_at_checkpoints() -> None:
    rng = np.random.default_rng(11)
    objs = {"a": Objective(goal="maximize", threshold=0.0), "b": Objective(goal="minimize", threshold=1.0),
            "c": Objective(goal="maximize", threshold=0.0)}
    Y = rng.random((600, 3))
    trials = [(i, dict(zip("abc", map(float, y)))) for i, y in enumerate(Y)]
    exact = dict(hypervolume_trace(trials, objs))
    sampled = hypervolume_history(trials, objs, max_points=50)
    assert 10 <= len(sampled) <= 50 and sampled[-1][0] == 599
    for i, h in sampled:
        assert h == pytest.approx(exact[i], rel=1e-9)
    short, ref = hypervolume_history(trials[:40], objs, max_points=50), hypervolume_trace(trials[:40], objs)
    assert [i for i, _ in short] == [i for i, _ in ref]
    assert [h for _, h in short] == pytest.approx([h for _, h in ref])


def test_cached_analysis_is_refreshed_incrementally_and_equals_a_full_one(tmp_path: object) -> None:
    from nasctl.web.analysis import AnalysisCache, analyze

    store = Store(f"sqlite:///{tmp_path}/inc.db", create=True)
    exp = add_synthetic(store, "inc", 20, finish=False)
    cache = AnalysisCache(store)
    first = cache.get("inc")
    assert first.counts["RUNNING"] == 20 and first.front.indices == []
    trials = store.list_trials(exp.id)
    for t in trials[:12]:
        store.finish_trial(t.id, TrialStatus.COMPLETED, {"acc": 0.1 + t.index / 30, "size": 50 - t.index, "lat": 1.0})
    store.finish_trial(trials[12].id, TrialStatus.FAILED, failure_reason="x")
    t = store.add_trial(exp.id, 20, {"x": 0.5, "act": "relu"}, "MBM", "inc-20", "")
    store.set_experiment_status(exp.id, ExperimentStatus.STOPPED)
    inc = cache.get("inc")
    full = analyze(store, store.get_experiment("inc"), queries.change_cursor(store, exp.id))
    assert inc is not first and inc.cursor == full.cursor
    assert (inc.indices, inc.statuses, inc.values, inc.counts) == (full.indices, full.statuses, full.values, full.counts)
    assert inc.front == full.front and inc.hv_history == full.hv_history
    assert inc.experiment.status.value == "STOPPED" and inc.counts["CANDIDATE"] == 1
    assert cache.get("inc") is inc


def test_analysis_endpoints_work_at_100k_trials(tmp_path: object) -> None:
    """The analysis endpoints on the benchmark's 100,000-trial experiment (timings: benchmarks/web_bench.py)."""
    from fastapi.testclient import TestClient

    from benchmarks.web_bench import build
    from nasctl.web import create_app

    store = Store(f"sqlite:///{tmp_path}/big.db", create=True)
    build(store, 100_000)
    build(store, 2_000, seed=1, name="twin")
    c = TestClient(create_app(store))
    exp = store.get_experiment("big")
    points = queries.trial_points(store, exp.id)
    done = [(i, v) for i, st, v in points if st == "COMPLETED"]

    h = c.get("/api/experiments/big/history").json()
    assert h["completed"] == len(done) == 98_000 and h["sampled"]
    assert len(h["trial_index"]) <= 10_000 + sum(len(o["best"]["trial_index"]) for o in h["objectives"])
    acc = next(o for o in h["objectives"] if o["name"] == "val_acc")
    # only trials that meet every threshold count for the best so far, as in the Pareto plot
    from nasctl.pareto import compute_front
    from nasctl.spec import spec_from_dict

    spec = spec_from_dict(exp.spec)
    feasible = set(compute_front(done, spec.objectives, spec.parsed_constraints).feasible)
    ok = [(i, v) for i, v in done if i in feasible]
    assert acc["best"]["value"][-1] == max(v["val_acc"] for _, v in ok)
    for i, v in zip(acc["best"]["trial_index"], acc["best"]["value"]):  # every improvement is kept
        assert i in set(h["trial_index"])
        assert v == max(w["val_acc"] for j, w in ok if j <= i)

    imp = c.get("/api/experiments/big/importance").json()
    assert 1900 <= imp["trials_used"] <= 2000 and imp["total_completed"] == 98_000  # the front and an even sample
    # num_params = width^2 * depth + 64 width: width matters most, the activation not at all
    share = imp["objectives"]["num_params"]["share"]
    assert share["width"] == max(share.values()) and share["act"] < 0.05
    cont = c.get("/api/experiments/big/contour", params={"x": "width", "y": "act", "objective": "num_params"}).json()
    assert len(cont["z"]) == 3 and cont["x"]["log"]

    where = [("where", "width < 64"), ("where", "act = relu"), ("where", "val_acc >= 0.7")]
    sel = c.get("/api/experiments/big/selection", params=where).json()
    table = c.get("/api/experiments/big/trials", params=where + [("limit", 1)]).json()
    assert sel["total"] == table["total"] > 0
    params = queries.trial_parameters(store, exp.id, sel["index"][:50])
    assert all(p["width"] < 64 and p["act"] == "relu" for p in params.values())
    text = c.get("/api/experiments/big/selection.csv", params=where).text
    assert text.count("\n") == sel["total"] + 1

    cmp = c.get("/api/compare", params=[("names", "big"), ("names", "twin")]).json()
    assert [x["completed"] for x in cmp["experiments"]] == [98_000, 1_960]
    assert cmp["experiments"][0]["history"]["trial_index"][-1] == done[-1][0]
    store.close()


def _same(a: object, b: object) -> bool:
    keys = ("cursor", "indices", "statuses", "values", "counts", "front", "hv_history", "log_scale")
    return all(getattr(a, k) == getattr(b, k) for k in keys) and a.experiment.id == b.experiment.id  # type: ignore[attr-defined]


def test_batched_analyses_equal_one_by_one_on_every_database(db_url: str) -> None:
    """The experiment list's set-based reads (`AnalysisCache.get_many`: cursors,
    changes, points and log scales of all experiments at once) give what the
    per-experiment path gives, when new, when some changed and when none did."""
    from nasctl.web.analysis import AnalysisCache, analyze

    store = Store(db_url, create=True)
    exps = [add_synthetic(store, f"b{k}", 9 + k, seed=k, finish=k % 2 == 0) for k in range(4)]
    empty = store.create_experiment("b-empty", store.get_experiment("b0").spec, "/nonexistent/b-empty")
    store.add_event(exps[1].id, queries.LOG_SCALE, "log", data={"metrics": ["size"]})

    def reference() -> list[object]:
        records = [e for e, _ in store.list_experiments()]
        return [analyze(store, e, queries.change_cursor(store, e.id)) for e in records]

    cache = AnalysisCache(store)
    got = cache.get_many([e for e, _ in store.list_experiments()])
    assert [a.experiment.name for a in got] == ["b-empty", "b3", "b2", "b1", "b0"]
    assert all(_same(a, r) for a, r in zip(got, reference()))
    assert got[3].log_scale == ["size"] and got[0].counts["COMPLETED"] == 0
    assert queries.change_cursors(store, [empty.id, 10**6]) == {empty.id: queries.change_cursor(store, empty.id),
                                                                10**6: 0}

    # some change: trials finish in b1 and b3, b3's model takes acc to the log scale, b2 stops
    for e in (exps[1], exps[3]):
        for t in store.list_trials(e.id)[:4]:
            store.finish_trial(t.id, TrialStatus.COMPLETED, {"acc": 0.2 + t.index / 40, "size": 30 - t.index, "lat": 1.0})
    store.add_event(exps[3].id, queries.LOG_SCALE, "log", data={"metrics": ["size"]})
    store.add_event(exps[3].id, queries.LOG_SCALE, "log", data={"metrics": ["acc"]})  # the latest counts
    store.set_experiment_status(exps[2].id, ExperimentStatus.STOPPED)
    again = cache.get_many([e for e, _ in store.list_experiments()])
    assert all(_same(a, r) for a, r in zip(again, reference()))
    assert again[1].log_scale == ["acc"] and again[2].experiment.status == ExperimentStatus.STOPPED
    assert again[4] is got[4] and again[0] is got[0]  # unchanged: the cached analyses themselves
    assert cache.get("b1") is again[3]  # one cache for the list and the pages
    assert cache.get_many([e for e, _ in store.list_experiments()]) == again
    store.close()
