"""The analysis endpoints in process (the real FastAPI app over real SQLite databases):
history, importance, contour, selection (and the table's filters), CSV, compare."""

from __future__ import annotations

import csv
import io
import math
import random
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nasctl.orchestration.views import trials_view
from nasctl.spec import parse_spec, spec_to_dict
from nasctl.store import Store
from nasctl.store import manage as store_manage
from nasctl.types import TrialStatus
from nasctl.web import create_app
from tests.helpers.synthetic import add_synthetic
from tests.web.conftest import RealExperiment

IMPORTANCE_SPEC = """
name: {name}
search_space:
  x: {{type: float, low: 0, high: 1}}
  noise: {{type: float, low: 0.001, high: 1, log: true}}
  width: {{type: int, low: 1, high: 64}}
  act: {{type: choice, values: [relu, gelu, tanh]}}
objectives:
  by_x: {{goal: maximize}}
  by_act: {{goal: minimize}}
budget: {{max_trials: 1000}}
trial: {{script: train.py}}
"""


def importance_experiment(store: Store, name: str, n: int, seed: int = 0) -> int:
    """by_x depends on x alone, by_act on the activation alone; noise and width on nothing."""
    exp = store.create_experiment(name, spec_to_dict(parse_spec(IMPORTANCE_SPEC.format(name=name))), f"/nonexistent/{name}")
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        p = {"x": rng.random(), "noise": 10 ** rng.uniform(-3, 0), "width": rng.randint(1, 64),
             "act": rng.choice(["relu", "gelu", "tanh"])}
        v = {"by_x": math.sin(3 * p["x"]) + 0.01 * rng.random(),
             "by_act": {"relu": 0.0, "gelu": 1.0, "tanh": 3.0}[p["act"]] + 0.01 * rng.random()}
        rows.append((i, p, TrialStatus.COMPLETED.value, v))
    store_manage.import_finished_trials(store, exp.id, rows, "Sobol")
    return exp.id


@pytest.fixture
def client(tiny: RealExperiment) -> TestClient:
    return TestClient(create_app(Store(tiny.url)))


def test_history_has_each_objective_and_its_best_so_far(client: TestClient, tiny: RealExperiment) -> None:
    store = Store(tiny.url)
    h = client.get("/api/experiments/tiny/history").json()
    rows = [r for r in trials_view(store, "tiny") if r["status"] == "COMPLETED"]
    assert h["trial_index"] == [r["index"] for r in rows] and h["completed"] == 9 and not h["sampled"]
    # feasible as the Pareto plot has it: thresholds and constraints
    pts = client.get("/api/experiments/tiny/points").json()
    category = dict(zip(pts["index"], pts["category"]))
    feasible = [category[r["index"]] in ("front", "dominated") for r in rows]
    assert h["feasible"] == feasible
    created = store.get_experiment("tiny").created_at
    ended = {t.index: t.ended_at for t in store.list_trials(store.get_experiment("tiny").id)}
    assert h["time"] == [pytest.approx((ended[r["index"]] - created).total_seconds(), abs=1e-3) for r in rows]
    for o in h["objectives"]:
        name, better = o["name"], (max if o["goal"] == "maximize" else min)
        assert o["value"] == [r["values"][name] for r in rows]
        # the best so far after each step is the best feasible value among trials up to it
        for i, v in zip(o["best"]["trial_index"], o["best"]["value"]):
            assert v == better(r["values"][name] for r, ok in zip(rows, feasible) if ok and r["index"] <= i)
        assert o["best"]["trial_index"][-1] == rows[-1]["index"]
        steps = o["best"]["value"]
        assert steps == sorted(steps, reverse=o["goal"] == "minimize")
    assert [o["name"] for o in h["objectives"]] == ["val_acc", "num_params"]


def test_history_respects_thresholds_as_the_pareto_plot_does(tmp_path: Path) -> None:
    """A trial below the acc threshold (0.05) is infeasible in the history too, and its
    small size is not the best so far (issue 41: best-so-far fell to a 0.10-accuracy trial)."""
    store = Store(f"sqlite:///{tmp_path / 'f.db'}", create=True)
    exp = add_synthetic(store, "f", 0)
    for i, values in enumerate(({"acc": 0.5, "size": 50.0, "lat": 1.0}, {"acc": 0.01, "size": 5.0, "lat": 1.0},
                                {"acc": 0.9, "size": 40.0, "lat": 9.0})):
        t = store.add_trial(exp.id, i, {"x": 0.5, "act": "relu"}, "Sobol", f"f-{i}", "")
        store.finish_trial(t.id, TrialStatus.COMPLETED, values)
    c = TestClient(create_app(store))
    h = c.get("/api/experiments/f/history").json()
    assert h["feasible"] == [True, False, False]
    assert c.get("/api/experiments/f/points").json()["category"] == ["front", "infeasible", "infeasible"]
    size = next(o for o in h["objectives"] if o["name"] == "size")
    assert size["best"]["value"] == [50.0, 50.0]


def test_history_follows_new_results(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'h.db'}", create=True)
    exp = add_synthetic(store, "h", 10)
    c = TestClient(create_app(store))
    before = c.get("/api/experiments/h/history").json()
    assert c.get("/api/experiments/h/history").json() == before  # cached
    t = store.add_trial(exp.id, 10, {"x": 0.999, "act": "relu"}, "MBM", "h-10", "")
    store.finish_trial(t.id, TrialStatus.COMPLETED, {"acc": 1.5, "size": 11.0, "lat": 1.0})
    after = c.get("/api/experiments/h/history").json()
    assert after["cursor"] > before["cursor"] and after["trial_index"][-1] == 10
    acc = next(o for o in after["objectives"] if o["name"] == "acc")
    assert acc["best"]["trial_index"][-1] == 10 and acc["best"]["value"][-1] == 1.5


def test_importance_finds_the_parameter_each_objective_depends_on(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'i.db'}", create=True)
    importance_experiment(store, "imp", 300)
    c = TestClient(create_app(store))
    m = c.get("/api/experiments/imp/importance").json()
    assert m["parameters"] == ["x", "noise", "width", "act"] and m["trials_used"] == 300 and not m["stale"]
    assert {s["name"]: s["log"] for s in m["scales"]} == {"x": False, "noise": True, "width": False, "act": False}
    by_x, by_act = m["objectives"]["by_x"], m["objectives"]["by_act"]
    assert by_x["fitted"] and by_act["fitted"]
    assert by_x["share"]["x"] > 0.9 and max(by_x["share"][p] for p in ("noise", "width", "act")) < 0.05
    assert by_act["share"]["act"] > 0.9 and max(by_act["share"][p] for p in ("x", "noise", "width")) < 0.05
    assert by_x["importance"]["x"] > 0.8  # the main effect explains most of the variance
    for o in m["objectives"].values():
        assert sum(o["share"].values()) == pytest.approx(1.0)


def test_importance_serves_the_last_model_while_refitting(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'r.db'}", create=True)
    exp_id = importance_experiment(store, "r", 60)
    c = TestClient(create_app(store))
    first = c.get("/api/experiments/r/importance").json()
    store_manage.import_finished_trials(store, exp_id, [(60, {"x": 0.5, "noise": 0.1, "width": 3, "act": "relu"},
                                                    TrialStatus.COMPLETED.value, {"by_x": 1.0, "by_act": 0.0})])
    stale = c.get("/api/experiments/r/importance").json()
    assert stale["cursor"] == first["cursor"] and stale["stale"] and stale["trials_used"] == 60
    fresh = c.get("/api/experiments/r/importance", params={"wait": "true"}).json()
    assert fresh["cursor"] > first["cursor"] and not fresh["stale"] and fresh["trials_used"] == 61


def test_contour_is_the_forests_prediction_over_two_parameters(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'c.db'}", create=True)
    importance_experiment(store, "c", 200)
    c = TestClient(create_app(store))
    r = c.get("/api/experiments/c/contour", params={"x": "x", "y": "act", "objective": "by_x"}).json()
    assert r["x"]["kind"] == "numeric" and len(r["x"]["values"]) == 24
    assert r["y"]["values"] == ["relu", "gelu", "tanh"] and len(r["z"]) == 3 and all(len(row) == 24 for row in r["z"])
    # by_x = sin(3x) rises up to x = pi/6 and does not depend on the activation
    k = min(range(24), key=lambda j: abs(r["x"]["values"][j] - math.pi / 6))
    for row in r["z"]:
        assert row[0] < row[k] - 0.5
    assert max(r["z"][a][k] for a in range(3)) - min(r["z"][a][k] for a in range(3)) < 0.1
    log = c.get("/api/experiments/c/contour", params={"x": "noise", "y": "width", "objective": "by_act"}).json()
    assert log["x"]["log"] and min(log["x"]["values"]) > 0
    for params, status in [({"x": "x", "y": "x", "objective": "by_x"}, 400), ({"x": "x", "y": "nope", "objective": "by_x"}, 400),
                           ({"x": "x", "y": "act", "objective": "nope"}, 400), ({"x": "x", "y": "act"}, 422)]:
        r2 = c.get("/api/experiments/c/contour", params=params)
        assert r2.status_code == status, r2.text


FILTERS: list[list[str]] = [
    ["act = relu"], ["act != relu", "acc > 0.3"], ["x < 0.25"], ["x <= 0.5", "size >= 30"], ["lat = 0.61"],
    ["acc >= 0.5", "act == gelu"], ["x > 2"],
]


@pytest.mark.parametrize("where", FILTERS)
def test_selection_matches_the_tables_filter_on_metrics_and_parameters(tmp_path: Path, where: list[str]) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}", create=True)
    exp = add_synthetic(store, "s", 40)
    t = store.add_trial(exp.id, 40, {"x": 0.1, "act": "relu"}, "Sobol", "s-40", "")
    store.finish_trial(t.id, TrialStatus.COMPLETED, {"acc": 0.2, "size": 40.0, "lat": 0.61})
    c = TestClient(create_app(store))
    sel = c.get("/api/experiments/s/selection", params=[("where", w) for w in where]).json()
    table = c.get("/api/experiments/s/trials", params=[("where", w) for w in where] + [("limit", 1000)]).json()
    assert sel["total"] == table["total"] and sel["index"] == sorted(r["index"] for r in table["trials"])
    # and both agree with evaluating the filters on every trial's record
    want = []
    for tr in store.list_trials(exp.id):
        fields = {**tr.parameters, **tr.values}
        if all(_holds(fields, w) for w in where):
            want.append(tr.index)
    assert sel["index"] == want
    rows = list(csv.reader(io.StringIO(c.get("/api/experiments/s/selection.csv", params=[("where", w) for w in where]).text)))
    assert rows[0] == ["index", "status", "x", "act", "acc", "size", "lat"]
    assert [int(r[0]) for r in rows[1:]] == want


def _holds(fields: dict[str, Any], text: str) -> bool:
    import re

    name, op, raw = re.match(r"(\w+)\s*(<=|>=|!=|==|=|<|>)\s*(.+)", text).groups()  # type: ignore[union-attr]
    if name not in fields:
        return False
    v = fields[name]
    bound: Any = raw if isinstance(v, str) else float(raw)
    return {"<": v < bound, ">": v > bound, "<=": v <= bound, ">=": v >= bound, "=": v == bound, "==": v == bound,
            "!=": v != bound}[op]


def test_bad_filters_name_the_problem(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'b.db'}", create=True)
    add_synthetic(store, "b", 5)
    c = TestClient(create_app(store))
    for where, words in [("act < relu", "use act = VALUE"), ("nope > 1", "metrics: acc"), ("x > big", "not a number"),
                         ("x ~ 1", "OP one of"), ("x > inf", "finite")]:
        for path in ("selection", "trials", "selection.csv"):
            r = c.get(f"/api/experiments/b/{path}", params={"where": where})
            assert r.status_code == 400, (path, where, r.text)
            assert words in r.json()["error"] + (r.json()["hint"] or ""), r.json()


def test_csv_cells_are_never_formulas(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'x.db'}", create=True)
    add_synthetic(store, "x", 3, choices=("=HYPERLINK(1)", "-1+1", "@a"))
    text = TestClient(create_app(store)).get("/api/experiments/x/selection.csv").text
    acts = {r[3] for r in list(csv.reader(io.StringIO(text)))[1:]}
    assert acts and all(a.startswith("'") for a in acts)


def test_compare_puts_experiments_on_one_reference_point(tmp_path: Path) -> None:
    from nasctl.pareto import compute_front
    from nasctl.spec import Objective

    store = Store(f"sqlite:///{tmp_path / 'cmp.db'}", create=True)
    add_synthetic(store, "one", 30, seed=1)
    add_synthetic(store, "two", 20, seed=2)
    importance_experiment(store, "other", 10)
    c = TestClient(create_app(store))
    r = c.get("/api/compare", params=[("names", "one"), ("names", "two")]).json()
    assert [x["name"] for x in r["experiments"]] == ["one", "two"]
    s1 = c.get("/api/experiments/one").json()["reference_point"]
    s2 = c.get("/api/experiments/two").json()["reference_point"]
    assert r["reference_point"] == {"acc": 0.05, "size": max(s1["size"], s2["size"])}
    objs = {"acc": Objective(goal="maximize", threshold=0.05), "size": Objective(goal="minimize", threshold=r["reference_point"]["size"])}
    for x in r["experiments"]:
        exp = store.get_experiment(x["name"])
        done = [(t.index, t.values) for t in store.list_trials(exp.id) if t.status == TrialStatus.COMPLETED]
        from nasctl.spec import parse_constraint

        front = compute_front(done, objs, [parse_constraint("lat <= 8")])
        assert x["front"]["trial_index"] == front.indices
        assert x["hypervolume"] == pytest.approx(front.hypervolume)
        assert x["history"]["hypervolume"][-1] == pytest.approx(front.hypervolume)
    r = c.get("/api/compare", params=[("names", "one"), ("names", "other")])
    assert r.status_code == 400 and "different objectives" in r.json()["error"]
    assert c.get("/api/compare", params=[("names", "one")]).status_code == 422
    assert c.get("/api/compare", params=[("names", "one"), ("names", "one")]).status_code == 400
    assert c.get("/api/compare", params=[("names", "one"), ("names", "nope")]).status_code == 404
