"""Notes, renaming and removing experiments on real SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from nasctl.errors import AlreadyExistsError, BadInputError, ExperimentBusyError, NotFoundError
from nasctl.orchestration import manage
from nasctl.orchestration.devices import choose_devices
from nasctl.leases import owner_id
from nasctl.runners.devices import DeviceInventory
from nasctl.spec import spec_from_dict
from nasctl.store import Store
from nasctl.store import manage as store_manage
from nasctl.types import ExperimentStatus, Observation, TrialStatus
from tests.helpers.synthetic import add_synthetic

TABLES = ("trials", "events", "device_leases", "notes")


def _rows(store: Store, experiment_id: int) -> dict[str, int]:
    with store.engine.connect() as c:
        out = {t: c.execute(text(f"SELECT COUNT(*) FROM {t} WHERE experiment_id = :e"), {"e": experiment_id}).scalar_one()
               for t in TABLES}
        out["observations"] = c.execute(text(
            "SELECT COUNT(*) FROM observations o JOIN trials t ON t.id = o.trial_id WHERE t.experiment_id = :e"),
            {"e": experiment_id}).scalar_one()
        out["experiments"] = c.execute(text("SELECT COUNT(*) FROM experiments WHERE id = :e"),
                                       {"e": experiment_id}).scalar_one()
    return out


def _stopped(store: Store, name: str, n: int = 5, finish: bool = True) -> int:
    exp = add_synthetic(store, name, n, finish=finish)
    store.set_experiment_status(exp.id, ExperimentStatus.STOPPED, "by the test")
    return exp.id


def test_notes_round_trip_and_clear(db_url: str) -> None:
    store = Store(db_url, create=True)
    eid = _stopped(store, "noted")
    assert store_manage.get_note(store, eid) is None
    text_ = "# Findings\n\n- lr > 3e-3 diverges\n- *unicode* ✓ `code`\n" + "x" * 5000
    n = store_manage.set_note(store, eid, text_)
    assert n is not None and n.text == text_ and n.trial_index is None
    assert store_manage.get_note(store, eid).text == text_  # type: ignore[union-attr]
    store_manage.set_note(store, eid, "trial two", trial_index=2)
    store_manage.set_note(store, eid, "trial two, again", trial_index=2)  # an update, not a second row
    assert store_manage.trial_notes(store, eid) == {2: "trial two, again"}
    assert store_manage.get_note(store, eid).text == text_  # type: ignore[union-attr]  # the experiment's is apart
    with pytest.raises(NotFoundError, match="no trial 99"):
        store_manage.set_note(store, eid, "x", trial_index=99)
    with pytest.raises(BadInputError, match="more than"):
        store_manage.set_note(store, eid, "x" * (store_manage.MAX_NOTE_CHARS + 1))
    assert store_manage.set_note(store, eid, "   \n") is None  # blank removes it
    assert store_manage.get_note(store, eid) is None
    assert [e.kind for e in store.events(eid)][-4:] == ["note", "note", "note", "note"]
    assert _rows(store, eid)["notes"] == 1


def test_rename_keeps_everything_and_refuses_taken_or_driven(db_url: str) -> None:
    store = Store(db_url, create=True)
    eid = _stopped(store, "old-name", 4)
    _stopped(store, "taken", 1)
    store_manage.set_note(store, eid, "kept")
    before = _rows(store, eid)
    result = manage.rename(store, "old-name", "new.name_2")
    assert result == {"experiment": "new.name_2", "old_name": "old-name", "work_dir": "/nonexistent/old-name"}
    exp = store.get_experiment("new.name_2")
    assert exp.id == eid and exp.work_dir == "/nonexistent/old-name"  # the files stay where they are
    assert spec_from_dict(exp.spec).name == "new.name_2"
    assert _rows(store, eid) == {**before, "events": before["events"] + 1}
    assert store.events(eid)[-1].data == {"old": "old-name", "new": "new.name_2"}
    assert [t.job_name for t in store.list_trials(eid)] == [f"old-name-{i}" for i in range(4)]
    with pytest.raises(NotFoundError):
        store.get_experiment("old-name")
    with pytest.raises(AlreadyExistsError, match="'taken' already exists"):
        manage.rename(store, "new.name_2", "taken")
    with pytest.raises(BadInputError, match="not a valid experiment name"):
        manage.rename(store, "new.name_2", "-bad name")
    store.set_experiment_status(eid, ExperimentStatus.RUNNING)
    with pytest.raises(ExperimentBusyError, match="nasctl stop new.name_2"):
        manage.rename(store, "new.name_2", "other")
    assert store.get_experiment("new.name_2").id == eid


def test_a_live_orchestrator_blocks_rename_and_removal(db_url: str) -> None:
    store = Store(db_url, create=True)
    eid = _stopped(store, "held", 2)
    store.acquire_lease(eid, owner_id(), stale_after=60)  # this live process, as an orchestrator
    for call in (lambda: manage.rename(store, "held", "x"), lambda: manage.remove(store, "held")):
        with pytest.raises(ExperimentBusyError, match="stop it first"):
            call()
    assert _rows(store, eid)["trials"] == 2


def test_delete_removes_every_row_of_one_experiment_only(db_url: str) -> None:
    store = Store(db_url, create=True)
    gone = _stopped(store, "gone", 9, finish=False)  # trials left running hold their devices
    kept = _stopped(store, "kept", 6, finish=False)
    for eid in (gone, kept):
        store_manage.set_note(store, eid, "note")
        store_manage.set_note(store, eid, "trial note", trial_index=1)
        devices, _ = store.place_devices("node", "node:1:0", eid, 0,
                                         lambda held: choose_devices(DeviceInventory(("0", "1")), 1, held),
                                         lambda _lease: False)
        assert devices
    kept_before = _rows(store, kept)
    gone_before = _rows(store, gone)
    assert gone_before["observations"] > 0 and gone_before["device_leases"] == 1
    result = manage.remove(store, "gone")
    assert result["removed_rows"] == gone_before
    assert result["removed_files"] is None
    assert all(v == 0 for v in _rows(store, gone).values())
    assert _rows(store, kept) == kept_before
    with pytest.raises(NotFoundError):
        store.get_experiment("gone")
    # the name is free again, with a fresh experiment
    again = add_synthetic(store, "gone", 2)
    assert store_manage.get_note(store, again.id) is None and len(store.list_trials(again.id)) == 2


def test_delete_is_all_or_nothing(db_url: str) -> None:
    """A busy check that fails inside the transaction leaves every row in place."""
    store = Store(db_url, create=True)
    eid = _stopped(store, "whole", 3)
    before = _rows(store, eid)

    def changes_its_mind(_exp: object) -> bool:
        raise RuntimeError("the check failed")

    with pytest.raises(RuntimeError):
        store_manage.delete_experiment(store, eid, changes_its_mind)
    assert _rows(store, eid) == before


def test_files_are_removed_only_inside_the_recorded_work_dir(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'n.db'}", create=True)
    work = tmp_path / "runs" / "mine"
    (work / "trials" / "trial_0000").mkdir(parents=True)
    (work / "trials" / "trial_0000" / "stdout.log").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    (work / "link-out").symlink_to(outside)  # a link inside the work dir to a folder outside it
    exp = add_synthetic(store, "mine", 2, work_dir=str(work))
    store.set_experiment_status(exp.id, ExperimentStatus.STOPPED)
    result = manage.remove(store, "mine", files=True)
    assert result["removed_files"] == str(work.resolve())
    assert not work.exists()
    assert (outside / "precious.txt").read_text() == "keep me"  # the link was removed, not followed


def test_files_are_kept_when_shared_linked_or_missing(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'n.db'}", create=True)
    parent = tmp_path / "parent"
    (parent / "child").mkdir(parents=True)
    a = add_synthetic(store, "parent", 1, work_dir=str(parent))
    b = add_synthetic(store, "child", 1, work_dir=str(parent / "child"))
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    c = add_synthetic(store, "linked", 1, work_dir=str(tmp_path / "alias"))
    d = add_synthetic(store, "missing", 1, work_dir=str(tmp_path / "never-made"))
    for e in (a, b, c, d):
        store.set_experiment_status(e.id, ExperimentStatus.STOPPED)
    r = manage.remove(store, "parent", files=True)
    assert r["removed_files"] is None and "also holds the files of experiment 'child'" in r["files_kept_because"]
    assert (parent / "child").is_dir()
    r = manage.remove(store, "linked", files=True)
    assert r["removed_files"] is None and "symbolic link" in r["files_kept_because"]
    assert real.is_dir() and (tmp_path / "alias").is_symlink()
    r = manage.remove(store, "missing", files=True)
    assert r["removed_files"] is None and "does not exist" in r["files_kept_because"]
    assert manage.remove(store, "child", files=True)["removed_files"] == str((parent / "child").resolve())
    assert parent.is_dir() and not (parent / "child").exists()
    assert store.list_experiments() == []


def test_the_trial_status_type_is_unchanged_by_notes(db_url: str) -> None:
    """Trial rows (the loop's hot path) carry no note: notes live in their own table."""
    store = Store(db_url, create=True)
    eid = _stopped(store, "plain", 2)
    store_manage.set_note(store, eid, "n", trial_index=0)
    (t0, _) = store.list_trials(eid)
    assert t0.status == TrialStatus.COMPLETED and not hasattr(t0, "note")
    store.add_observations(t0.id, [Observation("acc", 9, 1.0)])


def test_0006_adds_notes_on_every_database(db_url: str) -> None:
    """0005 -> 0006 keeps the experiments and adds an empty notes table; the downgrade drops it."""
    from alembic import command
    from sqlalchemy import create_engine, inspect

    from nasctl.store import migrate

    engine = create_engine(db_url)
    try:
        migrate.upgrade(engine, revision="0005_service")
        with engine.begin() as c:
            c.execute(text(
                "INSERT INTO experiments (id, name, spec, status, work_dir, created_at, updated_at) "
                "VALUES (1, 'old', '{\"name\": \"old\"}', 'STOPPED', '/x', '2026-11-25 00:00:00', '2026-11-25 00:00:00')"))
        assert migrate.upgrade(engine) == ("0005_service", migrate.head_revision())
        store = Store(db_url)
        assert store_manage.get_note(store, 1) is None
        store_manage.set_note(store, 1, "after the upgrade")
        assert store_manage.get_note(store, 1).text == "after the upgrade"  # type: ignore[union-attr]
        store.close()
        cfg = migrate.alembic_config()
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0005_service")
        assert "notes" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
