"""Store round trips and schema revision checks on real SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import StatementError

from nasctl.errors import AlreadyExistsError, LeaseError, NotFoundError, SchemaOutdatedError, StorageError
from nasctl.store import Store
from nasctl.store import migrate
from nasctl.store import store as store_module
from nasctl.types import ExperimentStatus, Observation, TrialRecord, TrialStatus


def test_round_trip(db_url: str) -> None:
    store = Store(db_url, create=True)
    spec = {"name": "e", "nested": {"a": [1, 2.5, "x"]}}
    exp = store.create_experiment("e", spec, "/tmp/e")
    assert store.get_experiment("e").spec == spec
    with pytest.raises(AlreadyExistsError, match="already exists"):
        store.create_experiment("e", spec, "/tmp/e")

    params = {"h": 32, "lr": 0.0012345678901234, "act": "gelu", "flag": True}
    t0 = store.add_trial(exp.id, 0, params, "Sobol", "e-0", "/tmp/e/trials/trial_0000")
    t1 = store.add_trial(exp.id, 1, {"h": 8, "lr": 0.1, "act": "relu", "flag": False}, "MBM", "e-1", "/tmp/x")
    assert t0.status == TrialStatus.CANDIDATE
    assert store.next_trial_index(exp.id) == 2

    store.mark_trial_running(t0.id, "local_cwd://torchx/e-0-abc", "local_cwd", {"stdout": "/x/stdout.log"})
    obs = [Observation("val_acc", s, 0.1 * s, 1000.0 + s) for s in range(5)]
    assert store.add_observations(t0.id, obs) == 5
    assert store.add_observations(t0.id, obs[3:] + [Observation("val_acc", 5, 0.55)]) == 1  # idempotent
    assert store.add_observations(t0.id, [Observation("loss", 0, math.nan)]) == 0  # non-finite never stored
    store.save_reader_state(t0.id, {"offsets": {"events": 123}, "summary": {"val_acc": {"last": "nan"}}})
    assert store.reader_state(t0.id)["offsets"] == {"events": 123}
    done = store.finish_trial(t0.id, TrialStatus.COMPLETED, {"val_acc": 0.55, "num_params": 1234.0})
    store.finish_trial(t1.id, TrialStatus.FAILED, failure_reason="exit 1", log_tail="Traceback...\nValueError")

    trials = store.list_trials(exp.id)
    assert [t.index for t in trials] == [0, 1]
    assert trials[0].parameters == params  # types survive the JSON round trip
    assert trials[0].values == {"val_acc": 0.55, "num_params": 1234.0}
    assert trials[0].job_handle == "local_cwd://torchx/e-0-abc"
    assert trials[0].runner_metadata == {"stdout": "/x/stdout.log"}
    assert trials[0].started_at is not None and done.ended_at is not None
    assert trials[1].status == TrialStatus.FAILED and trials[1].log_tail.endswith("ValueError")
    assert [t.index for t in store.list_trials(exp.id, [TrialStatus.FAILED])] == [1]
    curve = store.observations(t0.id, "val_acc")
    assert [(o.step, round(o.value, 6)) for o in curve] == [(s, round(0.1 * s, 6)) for s in range(5)] + [(5, 0.55)]
    assert store.count_observations(exp.id) == 6

    store.set_experiment_status(exp.id, ExperimentStatus.COMPLETED)
    ((rec, counts),) = store.list_experiments()
    assert rec.status == ExperimentStatus.COMPLETED
    assert counts == {"COMPLETED": 1, "FAILED": 1}
    kinds = [e.kind for e in store.events(exp.id)]
    assert kinds[0] == "created" and kinds.count("finished") == 2 and kinds[-1] == "status"
    with pytest.raises(NotFoundError, match="no experiment named 'nope'.*known experiments: e"):
        store.get_experiment("nope")
    store.close()


def test_lease(db_url: str) -> None:
    store = Store(db_url, create=True)
    exp = store.create_experiment("e", {}, "/tmp/e")
    store.acquire_lease(exp.id, "host:1", stale_after=60)
    store.acquire_lease(exp.id, "host:1", stale_after=60)  # re-entrant for its owner
    with pytest.raises(LeaseError, match="already being driven by process 1 on host.*nasctl stop e"):
        store.acquire_lease(exp.id, "host:2", stale_after=60)
    # an owner known to be dead is replaced at once; one that cannot be checked is not
    with pytest.raises(LeaseError):
        store.acquire_lease(exp.id, "host:2", stale_after=60, is_alive=lambda owner: None)
    store.acquire_lease(exp.id, "host:2", stale_after=60, is_alive=lambda owner: owner != "host:1")
    assert store.get_experiment("e").lease_owner == "host:2"
    assert store.heartbeat(exp.id, "host:2") is True
    assert store.heartbeat(exp.id, "host:1") is False  # host:1 lost the lease and can tell
    store.release_lease(exp.id, "host:2")
    store.acquire_lease(exp.id, "host:1", stale_after=60)
    # a stale heartbeat can be taken over
    with store.engine.begin() as c:
        c.execute(
            text("UPDATE experiments SET lease_heartbeat = :t WHERE id = :i"),
            {"t": store.get_experiment("e").lease_heartbeat - timedelta(seconds=120), "i": exp.id},
        )
    store.acquire_lease(exp.id, "host:2", stale_after=60)
    assert store.get_experiment("e").lease_owner == "host:2"
    store.release_lease(exp.id, "host:2")
    assert store.get_experiment("e").lease_owner is None
    # one owner driving two experiments (one process, several loops): each lease is its own
    other = store.create_experiment("f", {}, "/tmp/f")
    for e in (exp, other):
        store.acquire_lease(e.id, "host:3", stale_after=60)
    store.release_lease(exp.id, "host:3")
    assert store.get_experiment("e").lease_owner is None and store.get_experiment("f").lease_owner == "host:3"
    assert store.heartbeat(other.id, "host:3") is True and store.heartbeat(exp.id, "host:3") is False
    store.close()


def test_set_work_dir_records_a_move_only_when_it_moves(db_url: str) -> None:
    store = Store(db_url, create=True)
    exp = store.create_experiment("e", {}, "/tmp/e")
    assert store.set_work_dir(exp.id, "/tmp/e") is False  # where it already was: no event
    assert store.set_work_dir(exp.id, "/data/e") is True
    assert store.set_work_dir(exp.id, "/data/e") is False
    assert store.get_experiment("e").work_dir == "/data/e"
    assert [e.message for e in store.events(exp.id, kinds=["moved"])] == ["trial files now go to /data/e"]
    store.close()


def test_fresh_database_is_created_at_head(db_url: str) -> None:
    store = Store(db_url, create=True)
    assert migrate.current_revision(store.engine) == migrate.head_revision()
    store.close()


def test_missing_sqlite_file_is_not_created_by_readers(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'absent.db'}"
    with pytest.raises(NotFoundError, match="no nasctl database at"):
        Store(url)
    assert not (tmp_path / "absent.db").exists()


def test_empty_server_database_is_refused_for_reading(db_url: str) -> None:
    if db_url.startswith("sqlite"):
        Path(db_url.removeprefix("sqlite:///")).touch()
    with pytest.raises(NotFoundError, match="holds no nasctl data.*nasctl db upgrade"):
        Store(db_url)


def test_unversioned_tables_are_refused_and_kept(db_url: str) -> None:
    store = Store(db_url, create=True)
    exp = store.create_experiment("keep", {"k": 1}, "/tmp/k")
    store.add_trial(exp.id, 0, {"x": 1}, "Sobol", "keep-0", "/tmp/k/0")
    # a database whose tables predate revision tracking
    with store.engine.begin() as c:
        c.execute(text("DELETE FROM alembic_version"))
    store.close()
    with pytest.raises(SchemaOutdatedError, match="no nasctl schema revision") as ei:
        Store(db_url)
    assert ei.value.exit_code == 2
    # an older revision is refused too, naming the command that fixes it
    admin = Store(db_url, check=False)
    with admin.engine.begin() as c:
        c.execute(text("INSERT INTO alembic_version (version_num) VALUES ('0001_initial')"))
    admin.close()
    with pytest.raises(SchemaOutdatedError, match="nasctl db upgrade"):
        Store(db_url)
    admin = Store(db_url, check=False)
    with admin.engine.begin() as c:
        c.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": migrate.head_revision()})
    admin.close()
    Store(db_url).close()  # at head again: accepted, data intact
    assert Store(db_url).get_experiment("keep").spec == {"k": 1}


def test_newer_schema_is_refused(db_url: str) -> None:
    store = Store(db_url, create=True)
    with store.engine.begin() as c:
        c.execute(text("UPDATE alembic_version SET version_num = '9999_from_the_future'"))
    store.close()
    with pytest.raises(SchemaOutdatedError, match="newer than this nasctl knows.*upgrade nasctl"):
        Store(db_url)


def test_older_revision_message_names_upgrade(sqlite_url: str) -> None:
    # A database made at the first revision, as an older nasctl left it.
    from sqlalchemy import create_engine

    engine = create_engine(sqlite_url)
    migrate.upgrade(engine, revision="0001_initial")
    engine.dispose()
    head = migrate.head_revision()
    assert head != "0001_initial"
    with pytest.raises(SchemaOutdatedError, match=f"revision 0001_initial, this nasctl needs {head}.*nasctl db upgrade"):
        Store(sqlite_url)


def test_sqlite_uses_wal(sqlite_url: str) -> None:
    store = Store(sqlite_url, create=True)
    with store.engine.connect() as c:
        assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert c.execute(text("PRAGMA foreign_keys")).scalar() == 1


def test_opening_waits_for_another_connections_lock(tmp_path: Path) -> None:
    """A database that another process holds locked (a reader of `nasctl status` or the
    dashboard while a run creates it; a database not yet in WAL mode) is waited for, up
    to the store's busy timeout, not refused after sqlite3's own 5 s."""
    path = tmp_path / "locked.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE held (i INTEGER)")  # a database in the default rollback-journal mode
    other.execute("BEGIN EXCLUSIVE")
    timer = threading.Timer(6.0, lambda: other.execute("COMMIT"))
    timer.start()
    try:
        started = time.monotonic()
        store = Store(f"sqlite:///{path}", create=True)
        assert time.monotonic() - started >= 5.5  # it did wait for the lock
        with store.engine.connect() as c:
            assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    finally:
        timer.join()
        other.close()


def _same_time(a: datetime | None, b: datetime | None) -> bool:
    """Equal to the second (MariaDB's DATETIME keeps no fraction)."""
    return a is None and b is None or a is not None and b is not None and abs(a - b) < timedelta(seconds=1)


def _assert_same_record(got: TrialRecord, stored: TrialRecord) -> None:
    times = ("created_at", "started_at", "ended_at")
    for name in times:
        assert _same_time(getattr(got, name), getattr(stored, name)), name
    assert replace(got, created_at=stored.created_at, started_at=stored.started_at, ended_at=stored.ended_at) == stored


def test_trial_writes_return_what_is_stored(db_url: str) -> None:
    """The records add_trial, mark_trial_running and finish_trial return are
    the rows as stored, columns they did not write included."""
    store = Store(db_url, create=True)
    exp = store.create_experiment("e", {}, "/tmp/e")
    params = {"h": 32, "lr": 0.5, "act": "gelu", "flag": True}
    t = store.add_trial(exp.id, 0, params, "Sobol", "e-0", "/tmp/e/0")
    _assert_same_record(t, store.get_trial(exp.id, 0))
    assert t.status == TrialStatus.CANDIDATE and t.runner_metadata == {} and t.values == {} and t.info is None
    running = store.mark_trial_running(t.id, "local_cwd://torchx/e-0", "local_cwd", {"stdout": "/x"})
    _assert_same_record(running, store.get_trial(exp.id, 0))
    assert running.parameters == params and running.job_name == "e-0" and running.log_dir == "/tmp/e/0"
    assert running.status == TrialStatus.RUNNING and running.started_at is not None
    curve = [Observation("val_acc", s, 0.1 * s, 100.0 + s) for s in range(3)]
    assert store.add_observations(t.id, curve, reader_state={"offsets": {"a": 1}}) == 3
    assert store.reader_state(t.id) == {"offsets": {"a": 1}}
    info = {"precision": "bf16", "argv": ["--x", "1"]}
    last = [Observation("val_acc", 3, 0.4), Observation("val_acc", 3, 0.45), Observation("val_acc", 2, 0.9)]
    done = store.finish_trial(t.id, TrialStatus.COMPLETED, {"val_acc": 0.45, "bad": math.nan}, info=info,
                              observations=last, reader_state={"offsets": {"a": 2}})
    _assert_same_record(done, store.get_trial(exp.id, 0))
    assert done.values == {"val_acc": 0.45} and done.info == info and done.job_handle == "local_cwd://torchx/e-0"
    assert done.runner_metadata == {"stdout": "/x"} and done.parameters == params
    assert [(o.step, o.value) for o in store.observations(t.id)] == [(0, 0.0), (1, 0.1), (2, 0.2), (3, 0.45)]
    assert store.reader_state(t.id) == {"offsets": {"a": 2}}
    again = store.finish_trial(t.id, TrialStatus.FAILED, failure_reason="exit 1", log_tail="boom")
    assert again.info == info and again.failure_reason == "exit 1" and again.values == {}  # no new info: kept
    _assert_same_record(again, store.get_trial(exp.id, 0))
    assert [(e.kind, e.message, e.trial_index) for e in store.events(exp.id)][1:] == [
        ("candidate", "trial 0 proposed by Sobol", 0),
        ("submitted", "trial 0 submitted as local_cwd://torchx/e-0", 0),
        ("finished", "trial 0 completed", 0),
        ("finished", "trial 0 failed: exit 1", 0),
    ]
    store.close()


def test_trial_writes_are_all_or_nothing(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call that fails part-way leaves nothing of itself behind."""
    store = Store(db_url, create=True)
    exp = store.create_experiment("e", {}, "/tmp/e")
    t = store.add_trial(exp.id, 0, {"x": 1}, "Sobol", "e-0", "/tmp/e/0")
    store.mark_trial_running(t.id, "h", "local_cwd", {})
    store.add_observations(t.id, [Observation("acc", 0, 0.1)], reader_state={"offsets": {"a": 1}})
    events = store.events(exp.id)

    # the observations go in, then the reader's state cannot be encoded (by SQLAlchemy or by the driver)
    with pytest.raises((StatementError, TypeError), match="not JSON serializable"):
        store.add_observations(t.id, [Observation("acc", 1, 0.2)], reader_state={"bad": object()})
    assert [o.step for o in store.observations(t.id)] == [0]

    def insert_then_fail(*args: Any) -> int:
        real(*args)
        raise RuntimeError("failed after the trial's update and its observations")

    real = store_module._insert_observations
    monkeypatch.setattr(store_module, "_insert_observations", insert_then_fail)
    with pytest.raises(RuntimeError, match="failed after"):
        store.finish_trial(t.id, TrialStatus.COMPLETED, {"acc": 0.3}, observations=[Observation("acc", 2, 0.3)],
                           reader_state={"offsets": {"a": 2}})
    monkeypatch.undo()
    trial = store.get_trial(exp.id, 0)
    assert trial.status == TrialStatus.RUNNING and trial.values == {} and trial.ended_at is None
    assert [o.step for o in store.observations(t.id)] == [0]
    assert store.reader_state(t.id) == {"offsets": {"a": 1}}
    assert store.events(exp.id) == events
    with pytest.raises(StorageError):  # another trial at the same index: nothing of it is stored
        store.add_trial(exp.id, 0, {"x": 2}, "Sobol", "e-0b", "/tmp/e/0b")
    assert len(store.list_trials(exp.id)) == 1 and store.events(exp.id) == events
    store.close()


def _failing_once(message: str, calls: list[int]) -> Any:
    from sqlalchemy.exc import OperationalError

    real = migrate.is_empty

    def is_empty(engine: Any) -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("SELECT 1", {}, Exception(message))
        return real(engine)

    return is_empty


def test_opening_retries_a_dropped_connection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An administrator ending sessions (or a server restart) while a run opens its
    database is retried; the run starts instead of failing."""
    calls: list[int] = []
    monkeypatch.setattr(migrate, "is_empty", _failing_once("terminating connection due to administrator command", calls))
    store = Store(f"sqlite:///{tmp_path}/a.db", create=True)
    assert len(calls) >= 2
    assert store.list_experiments() == []


def test_opening_does_not_retry_a_server_that_is_not_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(migrate, "is_empty", _failing_once('connection to server at "127.0.0.1", port 1 failed: '
                                                           "Connection refused", calls))
    with pytest.raises(StorageError, match="cannot open database .*Connection refused"):
        Store(f"sqlite:///{tmp_path}/a.db", create=True)
    assert len(calls) == 1  # at once: a wrong URL or a stopped server gets its answer without waiting


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_taking_the_lease_survives_its_connection_being_killed(db_url: str) -> None:
    """The session taking the lease waits on the experiment's row lock and is killed
    there (an administrator ending it, as in a server restart): it is retried, and the
    lease is taken once the row is free."""
    import threading

    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    from tests.conftest import PG_ADMIN

    store = Store(db_url, create=True)
    exp = store.create_experiment("e", {}, "/tmp/e")
    holder = create_engine(db_url)
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    result: dict[str, object] = {}

    def take() -> None:
        try:
            store.acquire_lease(exp.id, "host:1", stale_after=60)
            result["ok"] = True
        except Exception as e:  # the test reports it below
            result["error"] = e

    try:
        with holder.connect() as c:
            tx = c.begin()
            c.execute(text("SELECT id FROM experiments WHERE id = :i FOR UPDATE"), {"i": exp.id})
            taker = threading.Thread(target=take)
            taker.start()
            waiting: list[int] = []
            for _ in range(200):  # until the lease's session is blocked on the row lock
                with admin.connect() as a:
                    waiting = list(a.execute(
                        text("SELECT pid FROM pg_stat_activity WHERE datname = :d AND wait_event_type = 'Lock'"),
                        {"d": make_url(db_url).database}).scalars())
                if waiting:
                    break
                threading.Event().wait(0.05)
            assert len(waiting) == 1, "the lease's session never waited on the row lock"
            with admin.connect() as a:
                assert a.execute(text("SELECT pg_terminate_backend(:p)"), {"p": waiting[0]}).scalar()
            tx.commit()
        taker.join(60)
    finally:
        holder.dispose()
        admin.dispose()
    assert result == {"ok": True}, result
    assert store.get_experiment("e").lease_owner == "host:1"
    store.close()
