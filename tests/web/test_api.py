"""The JSON API in process (the real FastAPI app over real SQLite databases)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from nasctl.leases import owner_id
from nasctl.orchestration.views import pareto_view, status_view, trials_view
from nasctl.store import Store, queries, requests
from nasctl.types import ExperimentStatus, TrialStatus
from nasctl.web import create_app
from tests.helpers.synthetic import add_synthetic
from tests.web.conftest import TOKEN, RealExperiment


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
    store.acquire_lease(exp.id, owner_id(), 60.0)  # a live orchestrator (this process) drives it: requests
    c = TestClient(create_app(store, token=TOKEN))
    assert c.post("/api/experiments/w/stop").status_code == 401
    assert c.post("/api/experiments/w/stop", headers={"Authorization": "Bearer wrong"}).status_code == 401
    r = c.post("/api/experiments/w/stop", headers={"Authorization": f"Bearer {TOKEN}"}, json={"reason": "enough"})
    assert r.status_code == 200 and r.json()["kind"] == "stop_requested"
    r = c.post("/api/experiments/w/trials/1/cancel", headers={"X-Nasctl-Token": TOKEN})
    assert r.status_code == 200 and r.json()["kind"] == "cancel_requested"
    reqs = requests.requests_after(store, exp.id)
    assert [(q.kind, q.trial_index, q.reason) for q in reqs] == [
        ("stop_requested", None, "enough"),
        ("cancel_requested", 1, "requested from the dashboard"),
    ]
    assert requests.requests_after(store, exp.id, reqs[0].event_id) == reqs[1:]
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
    assert client.get("/favicon.ico").headers["content-type"] == "image/svg+xml"
    assert client.get("/api/info").json()["service"] is False  # `nasctl web`: no resume, no /api/service to ask


def test_unknown_experiment_and_trial_pages_answer_404_with_a_plain_message(client: TestClient) -> None:
    for path, says in (("/experiments/nope", "no experiment named 'nope'"),
                       ("/experiments/nope/diagnostics", "no experiment named 'nope'"),
                       ("/experiments/tiny/trials/999", "no trial 999 in this experiment 'tiny'"),
                       ("/experiments/tiny/trials/x", "no trial 'x'"),
                       ("/experiments/%3Cb%3Ex/trials/1", "no experiment named '&lt;b&gt;x'")):
        r = client.get(path)
        assert r.status_code == 404 and r.headers["content-type"].startswith("text/html"), path
        assert says in r.text and "<script" not in r.text, (path, r.text)


def test_docs_are_served_from_installed_packages(client: TestClient) -> None:
    """/docs loads Swagger UI from this server (fastapi-offline's files), with no inline script."""
    import re

    page = client.get("/docs")
    assert page.status_code == 200
    assert not re.search(r"<script>|https?://", page.text)  # no inline script, no CDN
    for src in re.findall(r'(?:src|href)="(/[^"]+)"', page.text):
        assert client.get(src).status_code == 200, src
    assert client.get("/redoc").status_code == 404  # FastAPI's CDN page is gone


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


def test_error_answers_match_the_published_schema(tmp_path: Path) -> None:
    """422 items carry `type` (as the OpenAPI schema's ValidationError requires); a body
    that is not JSON, or not even UTF-8, and an unknown route answer {"error", "hint"}."""
    store = Store(f"sqlite:///{tmp_path / 'e.db'}", create=True)
    add_synthetic(store, "e", 4, finish=False)
    c = TestClient(create_app(store, token=TOKEN))
    r = c.get("/api/experiments/e/trials", params={"limit": 0})
    assert r.status_code == 422
    assert r.json()["detail"] == [{"loc": ["query", "limit"], "msg": "Input should be greater than or equal to 1",
                                   "type": "greater_than_equal"}]
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    for body in (b"{not json", b"\xff\xfe\xfd"):
        r = c.post("/api/experiments/e/stop", content=body, headers=headers)
        assert r.status_code == 400 and set(r.json()) == {"error", "hint"}, r.text
        assert "JSON" in r.json()["hint"]
    assert requests.requests_after(store, store.get_experiment("e").id) == []  # nothing was recorded
    r = c.get("/api/no/such/route")
    assert r.status_code == 404 and set(r.json()) == {"error", "hint"}


def test_an_empty_filter_filters_nothing(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'f.db'}", create=True)
    add_synthetic(store, "f", 9)
    c = TestClient(create_app(store))
    everything = c.get("/api/experiments/f/trials").json()
    r = c.get("/api/experiments/f/trials", params={"where": ""})
    assert r.status_code == 200 and r.json() == everything and everything["total"] == 9
    r = c.get("/api/experiments/f/trials", params={"where": ["", "acc >= 0.5"]})
    assert r.status_code == 200 and 0 < r.json()["total"] < 9


def test_log_confinement_is_by_folder_not_by_name_prefix(tmp_path: Path) -> None:
    """`work2/` beside `work/` shares its name as a prefix but is outside it."""
    from nasctl.errors import BadInputError
    from nasctl.web.logs import confined_path, tail

    work, work2 = tmp_path / "work", tmp_path / "work2"
    work.mkdir()
    work2.mkdir()
    (work2 / "x.log").write_text("next door\n")
    (work / "x.log").write_text("inside\n")
    assert tail(str(work), str(work / "x.log"), 5) == "inside"
    for path in (str(work2 / "x.log"), "../work2/x.log", str(work2)):
        with pytest.raises(BadInputError, match="outside the experiment's directory"):
            confined_path(str(work), path)


def test_nasctl_web_on_loopback_refuses_a_foreign_host_header(tmp_path: Path) -> None:
    """The real `nasctl web` (default --host 127.0.0.1) answers its own names and refuses
    others (DNS rebinding: a page on evil.example resolving to 127.0.0.1)."""
    import subprocess
    import sys
    import time

    import httpx

    from tests.conftest import free_port
    from tests.web.conftest import env

    url = f"sqlite:///{tmp_path / 'h.db'}"
    add_synthetic(Store(url, create=True), "h", 2)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "nasctl", "web", "--db", url, "--port", str(port)],
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(base + "/api/info", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, "nasctl web did not start"
                time.sleep(0.2)
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "127.0.0.1"):
            assert httpx.get(base + "/api/info", headers={"Host": host}, timeout=5).status_code == 200, host
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}"):
            r = httpx.get(base + "/api/experiments", headers={"Host": host}, timeout=5)
            assert r.status_code == 400 and "experiments" not in r.text, (host, r.text)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_dashboard_without_a_token_refuses_writes(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'ro.db'}", create=True)
    add_synthetic(store, "ro", 3, finish=False)
    c = TestClient(create_app(store))
    assert c.get("/api/info").json()["read_only"] is True
    for path in ("/api/experiments/ro/stop", "/api/experiments/ro/trials/0/cancel"):
        r = c.post(path, headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 403 and "read-only" in r.json()["error"] and "--token" in r.json()["hint"]
    r = c.put("/api/experiments/ro/note", json={"text": "x"})
    assert r.status_code == 403 and "notes, rename and delete" in r.json()["hint"]  # not only stop and cancel
    assert requests.requests_after(store, store.get_experiment("ro").id) == []


@pytest.mark.parametrize(("host", "refuses"), [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                               ("0.0.0.0", False), ("192.0.2.7", False)])
def test_nasctl_web_guards_the_host_header_when_bound_to_loopback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, refuses: bool) -> None:
    """The app `nasctl web --host H` builds (what uvicorn would serve, checked in process)."""
    import uvicorn
    from click.testing import CliRunner

    from nasctl.cli.cmd_web import command

    url = f"sqlite:///{tmp_path / 'g.db'}"
    add_synthetic(Store(url, create=True), "g", 2)
    served: dict[str, object] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app, **kw))
    res = CliRunner().invoke(command, ["--db", url, "--host", host, "--port", "8123"])
    assert res.exit_code == 0, res.output
    assert served["host"] == host and served["port"] == 8123
    shown = f"[{host}]" if ":" in host else host
    assert f"nasctl dashboard on http://{shown}:8123/" in res.output and "read-only" in res.output
    assert ("reachable from other machines" in res.output) is not refuses
    c = TestClient(served["app"], base_url="http://127.0.0.1:8123")  # type: ignore[arg-type]
    assert c.get("/api/info", headers={"Host": f"{host if ':' not in host else f'[{host}]'}:8123"}).status_code == 200
    assert c.get("/api/info", headers={"Host": "localhost:8123"}).status_code == 200
    foreign = c.get("/api/experiments", headers={"Host": "evil.example"})
    assert foreign.status_code == (400 if refuses else 200)


def test_nasctl_web_defaults_and_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn
    from click.testing import CliRunner

    from nasctl.cli.cmd_web import command

    url = f"sqlite:///{tmp_path / 'd.db'}"
    add_synthetic(Store(url, create=True), "d", 2, finish=False)
    served: dict[str, object] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app, **kw))
    res = CliRunner().invoke(command, ["--db", url], env={"NASCTL_WEB_TOKEN": TOKEN})
    assert res.exit_code == 0, res.output
    assert (served["host"], served["port"]) == ("127.0.0.1", 8080)  # loopback and port 8080 unless told
    # the token guards every write: say so where it is given (issue 41)
    assert "stop, cancel, notes, rename and delete enabled for requests carrying the token" in res.output
    assert "read-only" not in res.output
    helped = " ".join(CliRunner().invoke(command, ["--help"]).output.split())
    assert "editing notes, renaming and deleting experiments" in helped
    c = TestClient(served["app"], base_url="http://127.0.0.1:8080")  # type: ignore[arg-type]
    assert c.post("/api/experiments/d/stop", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert "[default: 127.0.0.1]" in CliRunner().invoke(command, ["--help"]).output
