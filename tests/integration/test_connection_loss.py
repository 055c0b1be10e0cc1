"""The database server drops every connection of a running experiment, repeatedly:
the loop retries with backoff and finishes with nothing lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from tests.conftest import MYSQL_ADMIN, PG_ADMIN
from tests.helpers.resume import check_results, write_spec


def _kill_connections(admin_url: str, db_url: str) -> int:
    name = make_url(db_url).database
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        if engine.dialect.name == "postgresql":
            n = c.execute(
                text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                     "WHERE datname = :d AND pid <> pg_backend_pid()"), {"d": name}
            ).scalar()
        else:
            ids = c.execute(
                text("SELECT id FROM information_schema.processlist WHERE db = :d AND id <> CONNECTION_ID()"),
                {"d": name},
            ).scalars().all()
            for i in ids:
                try:
                    c.execute(text(f"KILL CONNECTION {int(i)}"))
                except Exception:  # it ended by itself meanwhile
                    pass
            n = len(ids)
    engine.dispose()
    return int(n or 0)


def _wait_for_schema(db_url: str, proc: subprocess.Popen[str], timeout: float = 120.0) -> None:
    """Until the run has created its experiment (its schema is complete); a
    connection dropped in the middle of MySQL's first migration, whose DDL cannot
    be rolled back, is refused by design and is not what this test is about."""
    engine = create_engine(db_url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with engine.connect() as c:
                    if c.execute(text("SELECT count(*) FROM experiments")).scalar():
                        return
            except SQLAlchemyError:  # the tables are not there yet
                pass
            time.sleep(0.1)
    finally:
        engine.dispose()


@pytest.mark.parametrize("db_url", ["postgresql", "mysql"], indirect=True)
def test_run_survives_dropped_connections(tmp_path: Path, db_url: str) -> None:
    admin = PG_ADMIN if db_url.startswith("postgresql") else MYSQL_ADMIN
    spec = write_spec(tmp_path, "flaky", max_trials=6, parallelism=2)
    runs = tmp_path / "runs.log"
    env = {**os.environ, "NASCTL_TEST_RUNS": str(runs), "NASCTL_TEST_SLEEP": "1.0"}
    proc = subprocess.Popen([sys.executable, "-m", "nasctl", "run", str(spec), "--db", db_url, "--json"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = 0
    try:
        _wait_for_schema(db_url, proc)  # drops during the running experiment, not during its first migration
        while proc.poll() is None:
            time.sleep(1.5)
            killed += _kill_connections(admin, db_url)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert killed >= 3, f"only {killed} connections were dropped; the test did not exercise anything"
    assert json.loads(out)["summary"]["trials"]["COMPLETED"] == 6
    check_results(db_url, "flaky", runs, 6)


def _restart_postgresql(down_seconds: float = 4.0) -> None:
    """Stop the machine's PostgreSQL cluster, keep it down for `down_seconds` (the loop
    touches the store at least once a second, so it must meet the outage), start it
    again. Needs root and Debian's pg_ctlcluster."""
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    ctl = ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main"]
    subprocess.run([*ctl, "stop", "--", "-m", "fast"], check=True, capture_output=True, timeout=120)
    try:
        time.sleep(down_seconds)
    finally:
        subprocess.run([*ctl, "start"], check=True, capture_output=True, timeout=120)


@pytest.mark.serial
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_run_survives_a_database_restart(tmp_path: Path, db_url: str) -> None:
    assert os.geteuid() == 0 and Path("/etc/postgresql").is_dir(), \
        "this test restarts the local PostgreSQL: run the suite as root on a machine with Debian's PostgreSQL"
    spec = write_spec(tmp_path, "restarted", max_trials=6, parallelism=2)
    runs = tmp_path / "runs.log"
    env = {**os.environ, "NASCTL_TEST_RUNS": str(runs), "NASCTL_TEST_SLEEP": "1.0"}
    proc = subprocess.Popen([sys.executable, "-m", "nasctl", "run", str(spec), "--db", db_url, "--json"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        from nasctl.store import Store

        deadline = time.monotonic() + 120
        while True:  # restart once the loop is busy with trials
            assert proc.poll() is None, proc.communicate()
            try:
                s = Store(db_url)
                if len(s.list_trials(s.get_experiment("restarted").id)) >= 2:
                    s.close()
                    break
                s.close()
            except Exception:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.2)
        _restart_postgresql()
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "retrying" in err  # the loop saw the outage and waited it out
    check_results(db_url, "restarted", runs, 6)
    from nasctl.store import Store

    store = Store(db_url)
    # every trial's whole curve and both objectives: loss at steps 0-2, f1 and f2 at step 3
    assert store.count_observations(store.get_experiment("restarted").id) == 6 * 5
    store.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_connection_dropped_during_the_first_migration_is_retried(db_url: str) -> None:
    """The server ends the connection that is creating the schema (as an administrator
    ending sessions, or the killer above, may at any instant): the migration was one
    transaction, so nothing was written, and opening the store tries again."""
    from nasctl.store import Store, migrate

    name = make_url(db_url).database
    # another transaction creates the schema's first table and holds it uncommitted:
    # the store's migration waits on it, at a known point, until it is ended
    blocker = create_engine(db_url)
    conn = blocker.connect()
    tx = conn.begin()
    conn.execute(text("CREATE TABLE alembic_version (version_num varchar(32) NOT NULL)"))
    result: dict[str, object] = {}

    def open_store() -> None:
        try:
            result["store"] = Store(db_url, create=True)
        except Exception as e:  # reported below
            result["error"] = e

    opener = threading.Thread(target=open_store)
    opener.start()
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as c:
            deadline = time.monotonic() + 60
            while True:
                waiting = c.execute(text("SELECT pid FROM pg_stat_activity WHERE datname = :d "
                                         "AND wait_event_type = 'Lock'"), {"d": name}).scalars().all()
                if waiting:
                    break
                assert opener.is_alive() and time.monotonic() < deadline, result
                time.sleep(0.05)
            assert c.execute(text("SELECT pg_terminate_backend(:p)"), {"p": waiting[0]}).scalar()
    finally:
        tx.rollback()
        conn.close()
        blocker.dispose()
        admin.dispose()
    opener.join(60)
    assert "error" not in result, result.get("error")
    store = result["store"]
    assert isinstance(store, Store)
    try:
        assert migrate.current_revision(store.engine) == migrate.head_revision()
    finally:
        store.close()
