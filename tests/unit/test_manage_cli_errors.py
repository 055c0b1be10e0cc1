"""Bad input to `nasctl rename` and `nasctl rm` through the real entry point: one line,
exit code 2, no traceback, nothing changed."""

from __future__ import annotations

import json
from pathlib import Path

from nasctl.store import Store
from nasctl.types import ExperimentStatus
from tests.conftest import run_cli
from tests.helpers.cli import one_line_error
from tests.helpers.synthetic import add_synthetic


def _db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'n.db'}"
    store = Store(url, create=True)
    exp = add_synthetic(store, "exp", 3)
    store.set_experiment_status(exp.id, ExperimentStatus.STOPPED)
    add_synthetic(store, "other", 1)
    return url


def test_rename_bad_names(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    err = one_line_error(run_cli("rename", "exp", "has space", "--db", missing))
    assert "'has space' is not a valid experiment name" in err and "1-63 letters" in err
    assert not (tmp_path / "none.db").exists()  # refused before the database is opened
    db = _db(tmp_path)
    assert "'_x' is not a valid experiment name" in one_line_error(run_cli("rename", "exp", "_x", "--db", db))
    assert "not a valid" in one_line_error(run_cli("rename", "exp", "x" * 64, "--db", db))
    err = one_line_error(run_cli("rename", "exp", "other", "--db", db))
    assert "'other' already exists" in err and "nasctl rm" in err
    assert "no experiment named 'nope'" in one_line_error(run_cli("rename", "nope", "new", "--db", db))
    proc = run_cli("rename", "exp", "--db", db)
    assert proc.returncode == 2 and "Missing argument 'NEW'" in proc.stderr
    names = {e["name"] for e in json.loads(run_cli("ls", "--db", db, "--json").stdout)}
    assert names == {"exp", "other"}


def test_rm_bad_input(tmp_path: Path) -> None:
    db = _db(tmp_path)
    assert "no experiment named 'nope'" in one_line_error(run_cli("rm", "nope", "--yes", "--db", db))
    assert "pass --yes" in one_line_error(run_cli("rm", "exp", "--db", db))
    err = one_line_error(run_cli("rm", "other", "--yes", "--db", db))  # still RUNNING
    assert "is running" in err and "stop it first with `nasctl stop other`" in err
    proc = run_cli("rm", "exp", "--force", "--db", db)
    assert proc.returncode == 2 and "No such option" in proc.stderr
    names = {e["name"] for e in json.loads(run_cli("ls", "--db", db, "--json").stdout)}
    assert names == {"exp", "other"}
    ok = run_cli("rm", "exp", "--yes", "--db", db, "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["removed_rows"]["trials"] == 3
