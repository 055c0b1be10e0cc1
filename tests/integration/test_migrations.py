"""Every committed fixture database (one per past schema revision, made by the
nasctl of that revision) is upgraded and an experiment on it resumed to the end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nasctl.store.migrate import head_revision, known_revisions
from tests.conftest import run_cli

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures").glob("db_*.sqlite"))


def test_a_fixture_exists_for_every_revision() -> None:
    have = {p.stem.removeprefix("db_") for p in FIXTURES}
    assert have == known_revisions(), "commit a fixture database for each schema revision (see README, Development)"


@pytest.mark.e2e
@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
def test_upgrade_then_resume(fixture: Path, tmp_path: Path) -> None:
    db_file = tmp_path / fixture.name
    shutil.copy(fixture, db_file)
    db = f"sqlite:///{db_file}"
    revision = fixture.stem.removeprefix("db_")
    before = json.loads(run_cli("db", "current", "--db", db, "--json").stdout)
    assert before["current"] == revision
    up = run_cli("db", "upgrade", "--db", db)
    assert up.returncode == 0, up.stderr
    assert json.loads(run_cli("db", "current", "--db", db, "--json").stdout)["current"] == head_revision()

    old = {t["index"]: t for t in json.loads(run_cli("trials", "fixture-0001", "--db", db, "--json").stdout)}
    assert len(old) == 2 and all(t["status"] == "COMPLETED" for t in old.values())
    # the stored work directory is gone (the database moved): resume elsewhere
    refused = run_cli("resume", "fixture-0001", "--db", db, cwd=tmp_path)
    assert refused.returncode == 2 and "--workdir" in refused.stderr
    res = run_cli("resume", "fixture-0001", "--db", db, "--workdir", str(tmp_path / "runs"), "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    trials = {t["index"]: t for t in json.loads(run_cli("trials", "fixture-0001", "--db", db, "--json").stdout)}
    assert sorted(trials) == [0, 1, 2, 3] and all(t["status"] == "COMPLETED" for t in trials.values())
    for i in (0, 1):  # what the old nasctl recorded is untouched
        assert trials[i]["values"] == old[i]["values"] and trials[i]["parameters"] == old[i]["parameters"]
    assert {json.dumps(trials[i]["parameters"], sort_keys=True) for i in (2, 3)}.isdisjoint(
        {json.dumps(old[i]["parameters"], sort_keys=True) for i in (0, 1)}
    )
    assert all(Path(trials[i]["log_dir"]).is_relative_to(tmp_path / "runs") for i in (2, 3))
