"""The JSON API in process (the real FastAPI app over real SQLite databases)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from nasctl.orchestration.control import pareto_view, status_view, trials_view
from nasctl.store import Store, queries
from nasctl.types import ExperimentStatus, TrialStatus
from nasctl.web import create_app
from tests.web.conftest import TOKEN, RealExperiment, add_synthetic


@pytest.fixture
def client(tiny: RealExperiment) -> TestClient:
    return TestClient(create_app(Store(tiny.url)))


def test_experiment_list_and_summary_agree_with_the_cli_views(client: TestClient, tiny: RealExperiment) -> None:
    store = Store(tiny.url)
    status = status_view(store, "tiny")
    pareto = pareto_view(store, "tiny")
    listing = client.get("/api/experiments").json()["experiments"]
    assert [x["name"] for x in listing] == ["tiny"]
    s = client.get("/api/experiments/tiny").json()
    assert s["status"] == status["status"] == "COMPLETED"
    assert s["trials"] == status["trials"]
    assert s["trials"]["FAILED"] == 1 and s["trials"]["COMPLETED"] == 9
    assert s["progress"] == 1.0
    assert s["hypervolume"] == pytest.approx(pareto["hypervolume"])
    assert s["pareto_size"] == len(pareto["front"])
    assert s["reference_point"] == {"val_acc": 0.2, "num_params": 4000.0}
    assert s["optimizer"] == status["optimizer"] and s["optimizer"].startswith(("botorch", "categorical", "sobol"))
    assert s["initial_trials"] >= 1


def test_points_categorise_every_trial(client: TestClient, tiny: RealExperiment) -> None:
    p = client.get("/api/experiments/tiny/points").json()
    front = {r["index"] for r in pareto_view(Store(tiny.url), "tiny")["front"]}
    assert p["index"] == list(range(10))
    assert set(p["front"]) == front
    for i, cat, st in zip(p["index"], p["category"], p["status"]):
        if st == "FAILED":
            assert cat == "failed"
        elif i in front:
            assert cat == "front"
        else:
            assert cat in ("dominated", "infeasible")
    infeasible = [i for i, c in zip(p["index"], p["category"]) if c == "infeasible"]
    for i in infeasible:
        k = p["index"].index(i)
        lat, acc, size = p["values"]["latency_ms"][k], p["values"]["val_acc"][k], p["values"]["num_params"][k]
        assert lat > 5.5 or acc <= 0.2 or size >= 4000


def test_table_sorts_filters_and_pages_on_the_server(client: TestClient, tiny: RealExperiment) -> None:
    rows = [r for r in trials_view(Store(tiny.url), "tiny") if r["status"] == "COMPLETED"]
    want = sorted(rows, key=lambda r: (-r["values"]["val_acc"], r["index"]))
    got = client.get("/api/experiments/tiny/trials", params={"sort": "values.val_acc", "desc": "true", "limit": 4,
                                                              "status": "COMPLETED"}).json()
    assert got["total"] == 9
    assert [r["index"] for r in got["trials"]] == [r["index"] for r in want[:4]]
    nxt = client.get("/api/experiments/tiny/trials", params={"sort": "values.val_acc", "desc": "true", "limit": 4,
                                                              "offset": 4, "status": "COMPLETED"}).json()
    assert [r["index"] for r in nxt["trials"]] == [r["index"] for r in want[4:8]]
    filtered = client.get("/api/experiments/tiny/trials", params=[("where", "val_acc >= 0.7"),
                                                                   ("where", "num_params <= 3000")]).json()
    expect = {r["index"] for r in rows if r["values"]["val_acc"] >= 0.7 and r["values"]["num_params"] <= 3000}
    assert {r["index"] for r in filtered["trials"]} == expect and filtered["total"] == len(expect)
    by_act = client.get("/api/experiments/tiny/trials", params={"sort": "parameters.act"}).json()["trials"]
    acts = [r["parameters"]["act"] for r in by_act]
    assert acts == sorted(acts)
    missing_last = client.get("/api/experiments/tiny/trials", params={"sort": "values.val_acc"}).json()["trials"]
    assert missing_last[-1]["status"] == "FAILED"


def test_trial_detail_has_curves_timeline_and_log(client: TestClient) -> None:
    t = client.get("/api/experiments/tiny/trials/0").json()
    assert t["status"] == "COMPLETED" and t["job_handle"].startswith("local_cwd://")
    assert t["curves"]["val_acc"]["step"] == [1, 2, 3]
    assert {"train_loss", "val_acc", "num_params", "latency_ms"} <= set(t["curves"])
    assert [e["kind"] for e in t["timeline"]] == ["candidate", "submitted", "finished"]
    log = client.get("/api/experiments/tiny/trials/0/log", params={"stream": "stdout"}).json()
    assert "training width=" in log["text"]
    failed = client.get("/api/experiments/tiny/trials", params={"status": "FAILED"}).json()["trials"][0]
    err = client.get(f"/api/experiments/tiny/trials/{failed['index']}/log", params={"stream": "stderr"}).json()
    assert "simulated failure" in err["text"]


def test_errors_are_json_with_the_right_status(client: TestClient) -> None:
    r = client.get("/api/experiments/nope")
    assert r.status_code == 404 and "nope" in r.json()["error"] and "nasctl ls" in r.json()["hint"]
    assert client.get("/api/experiments/tiny/trials/999").status_code == 404
    r = client.get("/api/experiments/tiny/trials", params={"sort": "values.nope"})
    assert r.status_code == 400 and "cannot sort" in r.json()["error"]
    assert client.get("/api/experiments/tiny/trials", params={"where": "val_acc ~ 3"}).status_code == 400
    assert client.get("/api/experiments/tiny/trials", params={"where": "nope >= 3"}).status_code == 400
    r = client.get("/api/experiments/tiny/trials", params={"limit": 0})
    assert r.status_code == 422 and r.json()["error"].startswith("invalid request")
    assert client.get("/api/experiments/tiny/trials", params={"status": "BOGUS"}).status_code == 422


def test_changes_report_only_what_changed(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'live.db'}", create=True)
    exp = add_synthetic(store, "live", 12)
    c = TestClient(create_app(store))
    first = c.get("/api/experiments/live/changes", params={"since": 0}).json()
    cursor = first["cursor"]
    assert first["changed"] and first["trials"]["index"] == list(range(12))
    assert c.get("/api/experiments/live/changes", params={"since": cursor}).json() == {"changed": False, "cursor": cursor}
    t = store.add_trial(exp.id, 12, {"x": 0.99, "act": "relu"}, "Sobol", "live-12", "")
    store.mark_trial_running(t.id, "local_cwd://synthetic/live-12", "local_cwd", {})
    store.finish_trial(t.id, TrialStatus.COMPLETED, {"acc": 0.999, "size": 1.0, "lat": 1.0})
    ch = c.get("/api/experiments/live/changes", params={"since": cursor}).json()
    assert ch["changed"] and ch["trials"]["index"] == [12]
    assert ch["trials"]["category"] == ["front"] and ch["front"] == [12]
    assert ch["hypervolume"]["trial_index"] == [12]
    assert [e["kind"] for e in ch["events"]] == ["candidate", "submitted", "finished"]
    assert ch["experiment"]["total_trials"] == 13


def test_read_only_without_token(client: TestClient) -> None:
    assert client.get("/api/info").json()["read_only"] is True
    r = client.post("/api/experiments/tiny/stop")
    assert r.status_code == 403 and "read-only" in r.json()["error"]
    assert client.post("/api/experiments/tiny/trials/0/cancel").status_code == 403


def test_writes_need_the_token_and_record_requests(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'w.db'}", create=True)
    exp = add_synthetic(store, "w", 3, finish=False)
    c = TestClient(create_app(store, token=TOKEN))
    assert c.post("/api/experiments/w/stop").status_code == 401
    assert c.post("/api/experiments/w/stop", headers={"Authorization": "Bearer wrong"}).status_code == 401
    r = c.post("/api/experiments/w/stop", headers={"Authorization": f"Bearer {TOKEN}"}, json={"reason": "enough"})
    assert r.status_code == 200 and r.json()["kind"] == "stop_requested"
    r = c.post("/api/experiments/w/trials/1/cancel", headers={"X-Nasctl-Token": TOKEN})
    assert r.status_code == 200 and r.json()["kind"] == "cancel_requested"
    reqs = queries.requests_after(store, exp.id)
    assert [(q.kind, q.trial_index, q.reason) for q in reqs] == [
        ("stop_requested", None, "enough"),
        ("cancel_requested", 1, "requested from the dashboard"),
    ]
    assert queries.requests_after(store, exp.id, reqs[0].event_id) == reqs[1:]
    assert c.post("/api/experiments/w/trials/9/cancel", headers={"X-Nasctl-Token": TOKEN}).status_code == 404
    store.set_experiment_status(exp.id, ExperimentStatus.STOPPED)
    assert c.post("/api/experiments/w/stop", headers={"X-Nasctl-Token": TOKEN}).status_code == 409


def test_cancelling_a_finished_trial_is_a_conflict(tiny: RealExperiment) -> None:
    c = TestClient(create_app(Store(tiny.url), token=TOKEN))
    r = c.post("/api/experiments/tiny/trials/0/cancel", headers={"X-Nasctl-Token": TOKEN})
    assert r.status_code == 409 and "COMPLETED" in r.json()["error"]


def test_logs_cannot_be_read_outside_the_work_dir(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "trials").mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("do not serve\n")
    (work / "trials" / "inside.log").write_text("line 1\nline 2\n")
    os.symlink(secret, work / "trials" / "link.log")
    store = Store(f"sqlite:///{tmp_path / 'l.db'}", create=True)
    exp = add_synthetic(store, "logs", 0, work_dir=str(work))
    paths = {0: str(work / "trials" / "inside.log"), 1: str(secret), 2: str(work / "trials" / "link.log"),
             3: str(work / "trials" / ".." / ".." / "secret.txt")}
    for i, p in paths.items():
        t = store.add_trial(exp.id, i, {"x": 0.5, "act": "relu"}, "Sobol", f"logs-{i}", "")
        store.mark_trial_running(t.id, "h", "local_cwd", {"stdout": p})
    c = TestClient(create_app(store))
    assert c.get("/api/experiments/logs/trials/0/log?stream=stdout").json()["text"] == "line 1\nline 2"
    for i in (1, 2, 3):
        r = c.get(f"/api/experiments/logs/trials/{i}/log?stream=stdout")
        assert r.status_code == 400 and "outside" in r.json()["error"], r.text
        assert "do not serve" not in r.text


def test_host_header_and_security_headers(tiny: RealExperiment) -> None:
    c = TestClient(create_app(Store(tiny.url), allowed_hosts=["127.0.0.1", "localhost"]), base_url="http://127.0.0.1")
    r = c.get("/api/info")
    assert r.status_code == 200
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    assert c.get("/api/info", headers={"Host": "evil.example"}).status_code == 400


def test_pages_and_plotly_are_served_from_the_package(client: TestClient) -> None:
    import plotly

    for path in ("/", "/experiments/tiny", "/experiments/tiny/trials/0", "/experiments/tiny/diagnostics"):
        r = client.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        assert '<script src="/static/plotly.min.js">' in r.text
    js = client.get("/static/plotly.min.js")
    assert js.status_code == 200
    shipped = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert js.content == shipped.read_bytes()
    assert client.get("/static/../store/store.py").status_code == 404
    assert client.get("/static/nope.js").status_code == 404
    assert "/api/experiments/{name}/trials" in client.get("/openapi.json").json()["paths"]


def test_early_stopped_trials_are_their_own_state(tmp_path: Path) -> None:
    """EARLY_STOPPED is counted, categorised and summarised on its own (not as failed)."""
    store = Store(f"sqlite:///{tmp_path / 'es.db'}", create=True)
    exp = add_synthetic(store, "es", 8)
    t = store.add_trial(exp.id, 8, {"x": 0.1, "act": "relu"}, "Sobol", "es-8", "")
    store.mark_trial_running(t.id, "local_cwd://synthetic/es-8", "local_cwd", {})
    store.add_event(exp.id, "early_stopped", "trial 8 early stopped at step 2", trial_index=8,
                    data={"step": 2, "dominated_by": [1], "seconds_saved": 12.5})
    store.finish_trial(t.id, TrialStatus.EARLY_STOPPED, {"acc": 0.02, "size": 11.0, "lat": 1.0},
                       "early stopped at step 2 (epoch 2 of 3): ...; dominated by trial 1")
    c = TestClient(create_app(store))
    s = c.get("/api/experiments/es").json()
    assert s["trials"]["EARLY_STOPPED"] == 1 and s["trials"]["FAILED"] == 1
    assert s["early_stopping"] == {"metric": None, "trials_stopped": 1, "seconds_saved": 12.5}
    p = c.get("/api/experiments/es/points").json()
    assert p["category"][p["index"].index(8)] == "early_stopped"
    assert p["category"][p["index"].index(3)] == "failed"
    assert 8 not in p["front"]
    rows = c.get("/api/experiments/es/trials", params={"status": "EARLY_STOPPED"}).json()["trials"]
    assert [r["index"] for r in rows] == [8] and "dominated by trial 1" in rows[0]["failure_reason"]
    status = status_view(store, "es")
    assert status["early_stopping"]["trials_stopped"] == 1 and status["early_stopping"]["seconds_saved"] == 12.5


def test_summary_shows_the_optimizers_log_scale_state(tmp_path: Path) -> None:
    """The objectives the optimizer's latest model has on the log scale (its newest
    `log_scale` event), also after later events, and back to none when it says so."""
    store = Store(f"sqlite:///{tmp_path / 'log.db'}", create=True)
    exp = add_synthetic(store, "logged", 6)
    client = TestClient(create_app(store))
    assert client.get("/api/experiments/logged").json()["log_scale"] == []
    store.add_event(exp.id, queries.LOG_SCALE, "optimizer: modelling size on the log scale", data={"metrics": ["size"]})
    add_synthetic(store, "other", 2)  # another experiment's events do not count
    t = store.add_trial(exp.id, 6, {"x": 0.5, "act": "relu"}, "MBM", "logged-6", "")
    store.finish_trial(t.id, TrialStatus.FAILED, failure_reason="later event")
    assert client.get("/api/experiments/logged").json()["log_scale"] == ["size"]
    assert client.get("/api/experiments/other").json()["log_scale"] == []
    store.add_event(exp.id, queries.LOG_SCALE, "optimizer: modelling size back on its own scale", data={"metrics": []})
    assert client.get("/api/experiments/logged").json()["log_scale"] == []
