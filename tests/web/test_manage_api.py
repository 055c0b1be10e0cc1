"""The management API in process (the real FastAPI app over real SQLite): notes,
rename, delete, and diagnostics computed in the background."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from nasctl.store import Store
from nasctl.store import manage as store_manage
from nasctl.types import ExperimentStatus
from nasctl.web import create_app
from nasctl.web.report import build_report
from tests.helpers.synthetic import add_synthetic
from tests.web.conftest import TOKEN

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _app(tmp_path: Path, *names: str, token: str | None = TOKEN, stopped: bool = True) -> tuple[Store, TestClient]:
    store = Store(f"sqlite:///{tmp_path / 'm.db'}", create=True)
    for n in names:
        exp = add_synthetic(store, n, 12, work_dir=str(tmp_path / "runs" / n))
        if stopped:
            store.set_experiment_status(exp.id, ExperimentStatus.STOPPED)
    return store, TestClient(create_app(store, token=token))


def test_notes_are_read_with_the_experiment_and_trial_and_written_with_the_token(tmp_path: Path) -> None:
    store, c = _app(tmp_path, "n")
    assert c.get("/api/experiments/n").json()["note"] == {"text": None, "updated_at": None}
    body = {"text": "## Why\n\n**lr** matters <script>x</script>"}
    assert c.put("/api/experiments/n/note", json=body).status_code == 401
    assert c.put("/api/experiments/n/note", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
    r = c.put("/api/experiments/n/note", json=body, headers=AUTH)
    assert r.status_code == 200 and r.json()["text"] == body["text"] and r.json()["updated_at"].endswith("Z")
    assert c.get("/api/experiments/n").json()["note"]["text"] == body["text"]  # stored as given: escaped when shown
    assert c.get("/api/experiments/n/note").json()["text"] == body["text"]
    r = c.put("/api/experiments/n/trials/4/note", json={"text": "the one we kept"}, headers={"X-Nasctl-Token": TOKEN})
    assert r.status_code == 200
    assert c.get("/api/experiments/n/trials/4").json()["note"]["text"] == "the one we kept"
    assert c.get("/api/experiments/n/trials/5").json()["note"]["text"] is None
    assert c.put("/api/experiments/n/trials/99/note", json={"text": "x"}, headers=AUTH).status_code == 404
    assert c.get("/api/experiments/n/trials/99/note").status_code == 404
    assert c.put("/api/experiments/nope/note", json={"text": "x"}, headers=AUTH).status_code == 404
    too_long = {"text": "x" * (store_manage.MAX_NOTE_CHARS + 1)}
    assert c.put("/api/experiments/n/note", json=too_long, headers=AUTH).status_code == 422
    assert c.put("/api/experiments/n/note", json={"text": ""}, headers=AUTH).json() == {"text": None, "updated_at": None}
    assert store_manage.get_note(store, store.get_experiment("n").id) is None


def test_a_read_only_dashboard_refuses_every_management_write(tmp_path: Path) -> None:
    _, c = _app(tmp_path, "ro", token=None)
    for r in (c.put("/api/experiments/ro/note", json={"text": "x"}),
              c.put("/api/experiments/ro/trials/0/note", json={"text": "x"}),
              c.post("/api/experiments/ro/rename", json={"name": "rw"}),
              c.delete("/api/experiments/ro")):
        assert r.status_code == 403 and "read-only" in r.json()["error"]
    assert c.get("/api/experiments/ro").status_code == 200


def test_rename_then_everything_answers_under_the_new_name(tmp_path: Path) -> None:
    store, c = _app(tmp_path, "before", "other")
    c.put("/api/experiments/before/note", json={"text": "kept"}, headers=AUTH)
    points = c.get("/api/experiments/before/points").json()
    assert c.post("/api/experiments/before/rename", json={"name": "after"}).status_code == 401
    r = c.post("/api/experiments/before/rename", json={"name": "bad name"}, headers=AUTH)
    assert r.status_code == 400 and "not a valid experiment name" in r.json()["error"]
    r = c.post("/api/experiments/before/rename", json={"name": "other"}, headers=AUTH)
    assert r.status_code == 409 and "already exists" in r.json()["error"]
    r = c.post("/api/experiments/before/rename", json={"name": "after"}, headers=AUTH)
    assert r.status_code == 200 and r.json()["work_dir"] == str(tmp_path / "runs" / "before")
    assert c.get("/api/experiments/before").status_code == 404
    s = c.get("/api/experiments/after").json()
    assert s["name"] == "after" and s["note"]["text"] == "kept" and s["work_dir"] == str(tmp_path / "runs" / "before")
    new_points = c.get("/api/experiments/after/points").json()
    assert new_points["index"] == points["index"] and new_points["front"] == points["front"]
    assert [x["name"] for x in c.get("/api/experiments").json()["experiments"]] == ["other", "after"]
    assert "renamed from before to after" in c.get("/api/experiments/after/events?latest=true").json()["events"][-1]["message"]


def test_rename_and_delete_refuse_a_running_experiment(tmp_path: Path) -> None:
    _, c = _app(tmp_path, "busy", stopped=False)
    for r in (c.post("/api/experiments/busy/rename", json={"name": "x"}, headers=AUTH),
              c.delete("/api/experiments/busy", headers=AUTH)):
        assert r.status_code == 409 and r.json()["hint"] == "stop it first with `nasctl stop busy`"
    assert c.get("/api/experiments/busy").status_code == 200


def test_delete_removes_the_rows_and_on_request_the_files(tmp_path: Path) -> None:
    store, c = _app(tmp_path, "a", "b")
    for n in ("a", "b"):
        (tmp_path / "runs" / n / "trials").mkdir(parents=True)
    assert c.delete("/api/experiments/a").status_code == 401
    r = c.delete("/api/experiments/a", headers=AUTH)
    assert r.status_code == 200 and r.json()["removed_rows"]["trials"] == 12 and r.json()["removed_files"] is None
    assert (tmp_path / "runs" / "a").is_dir()  # files only when asked
    assert c.get("/api/experiments/a").status_code == 404 and c.delete("/api/experiments/a", headers=AUTH).status_code == 404
    r = c.delete("/api/experiments/b?files=true", headers=AUTH)
    assert r.status_code == 200 and r.json()["removed_files"] == str(tmp_path / "runs" / "b")
    assert not (tmp_path / "runs" / "b").exists()
    assert c.get("/api/experiments").json()["experiments"] == []
    assert store.list_experiments() == []


def test_diagnostics_answer_at_once_while_computing_then_the_result(tmp_path: Path) -> None:
    store, c = _app(tmp_path, "d")
    first = c.get("/api/experiments/d/diagnostics")
    assert first.status_code == 202 and first.json()["state"] == "computing"
    web = c.app.state.nasctl  # type: ignore[attr-defined]
    with web.diag_lock:
        running = dict(web.diag_running)
    done = _wait_for_diagnostics(c, "d")
    assert running == {"d": first.json()["cursor"]} or "d" in web.diagnostics  # it was computing in the background
    assert done["state"] == "done" and done["stale"] is False and done["trials_used"] >= 8
    assert set(done["metrics"]) >= {"acc", "size"}
    assert c.get("/api/experiments/d/diagnostics").json() == done  # cached by the change cursor
    # the experiment changes: the last result comes back marked stale while a new one is computed
    c.put("/api/experiments/d/note", json={"text": "changes the cursor"}, headers=AUTH)
    again = c.get("/api/experiments/d/diagnostics")
    assert again.status_code == 200 and again.json()["stale"] is True
    assert _wait_for_diagnostics(c, "d", fresh=True)["stale"] is False


def test_diagnostics_errors_come_back_from_the_background(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'e.db'}", create=True)
    add_synthetic(store, "few", 2)
    c = TestClient(create_app(store))
    assert c.get("/api/experiments/few/diagnostics").status_code == 202
    for _ in range(600):
        r = c.get("/api/experiments/few/diagnostics")
        if r.status_code != 202:
            break
        _pause()
    assert r.status_code == 400 and "completed" in r.json()["error"]


def _pause() -> None:
    import threading

    threading.Event().wait(0.1)


def _wait_for_diagnostics(c: TestClient, name: str, fresh: bool = False) -> dict:  # type: ignore[type-arg]
    for _ in range(1200):  # the fit runs in a thread of this process; at most two minutes on a loaded machine
        r = c.get(f"/api/experiments/{name}/diagnostics")
        if r.status_code == 200 and not (fresh and r.json()["stale"]):
            return r.json()  # type: ignore[no-any-return]
        assert r.status_code in (200, 202), r.text
        _pause()
    pytest.fail("the diagnostics never finished")


def test_the_report_carries_the_note_and_keeps_the_diagnostics_caption_in_its_section(tmp_path: Path) -> None:
    store, c = _app(tmp_path, "r")
    c.put("/api/experiments/r/note", json={"text": "report *note*"}, headers=AUTH)
    html = build_report(store, "r", diagnostics=False)
    assert '"/api/experiments/r/note":{"text":"report *note*"' in html
    assert "/static/manage.js" not in html and "function renderMarkdown" in html  # inlined, works offline
