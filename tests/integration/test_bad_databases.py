"""Databases that cannot work as given: a crash while the schema is first created,
a missing folder, a file that is not a database, a read-only file or folder.
Each is refused with one line and exit code 2, and nothing is created or changed."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nasctl.store import Store
from nasctl.store.migrate import head_revision
from tests.conftest import ROOT, run_cli
from tests.helpers.cli import EXAMPLE, one_line_error


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- a crash during first-time schema creation ---------------------------------
CREATE_STORE = "import sys; from nasctl.store import Store; Store(sys.argv[1], create=True)"


@pytest.mark.parametrize("how", ["db upgrade", "first run"])
def test_kill_during_schema_creation_leaves_a_usable_database(tmp_path: Path, how: str) -> None:
    """SIGKILL after every migration ran but before the commit (failpoint
    `before_schema_commit`): the file holds no half schema, and the next
    command creates it as if nothing had happened."""
    url = f"sqlite:///{tmp_path / 'n.db'}"
    env = {"NASCTL_FAILPOINTS": "before_schema_commit:1"}
    if how == "db upgrade":
        killed = run_cli("db", "upgrade", "--db", url, env=env)
    else:
        killed = subprocess.run([sys.executable, "-c", CREATE_STORE, url], env={**os.environ, **env},
                                capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, (killed.returncode, killed.stderr)  # the failpoint was reached
    with sqlite3.connect(tmp_path / "n.db") as c:  # nothing of the schema was committed
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == set(), tables
    proc = run_cli("ls", "--db", url, "--json")
    assert proc.returncode == 2 and "holds no nasctl data" in proc.stderr  # empty, not "not created by nasctl"
    up = run_cli("db", "upgrade", "--db", url)
    assert up.returncode == 0 and f"upgraded from empty to {head_revision()}" in up.stdout, up.stderr
    proc = run_cli("ls", "--db", url, "--json")
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr


def test_a_failed_migration_on_an_existing_database_changes_nothing(tmp_path: Path) -> None:
    """The same failpoint while upgrading a database of an older revision: it stays at that revision."""
    fixture = ROOT / "tests" / "fixtures" / "db_0001_initial.sqlite"
    db = tmp_path / "old.db"
    shutil.copy(fixture, db)
    url = f"sqlite:///{db}"
    killed = run_cli("db", "upgrade", "--db", url, env={"NASCTL_FAILPOINTS": "before_schema_commit:1"})
    assert killed.returncode == -9, killed.stderr
    assert run_cli("db", "current", "--db", url).stdout.split()[2] == "0001_initial"
    assert run_cli("db", "upgrade", "--db", url).returncode == 0
    assert run_cli("trials", "fixture-0001", "--db", url).returncode == 0


# --- a missing folder -------------------------------------------------------------
def test_missing_folder_is_refused_and_nothing_created(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir"
    url = f"sqlite:///{missing / 'x.db'}"
    err = one_line_error(run_cli("run", EXAMPLE, "--db", url, cwd=tmp_path))
    assert str(missing) in err and "does not exist" in err and "mkdir" in err
    err = one_line_error(run_cli("db", "upgrade", "--db", url, cwd=tmp_path))
    assert str(missing) in err
    assert not (tmp_path / "no").exists()
    assert not (tmp_path / "nasctl_runs").exists()  # no experiment folder either


# --- a file that is not a database -----------------------------------------------
def _truncated_database(tmp_path: Path) -> Path:
    good = tmp_path / "good.db"
    Store(f"sqlite:///{good}", create=True).close()
    with sqlite3.connect(good) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    bad = tmp_path / "truncated.db"
    bad.write_bytes(good.read_bytes()[:50])  # the header is cut short
    return bad


@pytest.mark.parametrize("kind", ["text", "truncated"])
@pytest.mark.parametrize("command", [("ls",), ("run", EXAMPLE), ("db", "upgrade"), ("status", "x")])
def test_a_file_that_is_not_a_database_is_refused_untouched(tmp_path: Path, kind: str,
                                                            command: tuple[str, ...]) -> None:
    if kind == "text":
        path = tmp_path / "notes.db"
        path.write_text("these are my notes, not a database\n" * 40)
    else:
        path = _truncated_database(tmp_path)
    before = _digest(path)
    err = one_line_error(run_cli(*command, "--db", f"sqlite:///{path}", cwd=tmp_path))
    assert str(path) in err and "not a SQLite database" in err, err
    assert _digest(path) == before
    assert not Path(f"{path}-wal").exists() and not Path(f"{path}-shm").exists()


# --- read-only file or folder -----------------------------------------------------
@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder holding a nasctl database (one experiment's worth of schema), mounted read-only."""
    if os.geteuid() != 0:
        pytest.fail("this test mounts a read-only file system: run the suite as root (see README, Development)")
    d = tmp_path / "ro"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(d)], check=True)
    try:
        Store(f"sqlite:///{d / 'n.db'}", create=True).close()
        subprocess.run(["mount", "-o", "remount,ro", str(d)], check=True)
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=True)


@pytest.mark.parametrize("command", [("run", EXAMPLE), ("ls",), ("db", "upgrade")])
def test_read_only_folder_is_refused(read_only_dir: Path, tmp_path: Path, command: tuple[str, ...]) -> None:
    db = read_only_dir / "n.db"
    err = one_line_error(run_cli(*command, "--db", f"sqlite:///{db}", cwd=tmp_path))
    assert str(db) in err and "read-only" in err, err


def test_read_only_file_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    Store(f"sqlite:///{db}", create=True).close()
    with sqlite3.connect(db) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = _digest(db)
    immutable = os.geteuid() == 0  # root ignores file modes; the immutable attribute binds it too
    db.chmod(0o444)
    if immutable:
        subprocess.run(["chattr", "+i", str(db)], check=True)
    try:
        err = one_line_error(run_cli("run", EXAMPLE, "--db", f"sqlite:///{db}", cwd=tmp_path))
        assert str(db) in err and "read-only" in err, err
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(db)], check=True)
        db.chmod(0o644)
    assert _digest(db) == before


def test_a_folder_as_the_database_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    err = one_line_error(run_cli("ls", "--db", f"sqlite:///{folder}"))
    assert f"--db {folder} is a folder, not a database file" in err and f"sqlite:///{folder / 'nasctl.db'}" in err
    assert list(folder.iterdir()) == []
