"""The work directory's disk fills up while trials run (a small tmpfs mount): the
trials fail saying so, the experiment stops cleanly before launching more, the
database (elsewhere) is intact, and `nasctl resume` after freeing space finishes
the budget."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from nasctl.orchestration.running import MIN_FREE_BYTES
from tests.conftest import run_cli
from tests.helpers.cli import start
from tests.helpers.resume import wait_running, write_spec

pytestmark = pytest.mark.e2e


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.fail("this test mounts a small tmpfs as the work directory: run the suite as root")
    mnt = tmp_path / "work"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={3 * MIN_FREE_BYTES}", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def _fill(path: Path) -> None:
    """Write zeros to `path` until the file system says it is full."""
    chunk = b"\0" * 2**20
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    with open(path, "ab", buffering=0) as f:  # the last partial chunk too
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e


def test_disk_full_stops_cleanly_and_resume_finishes(tmp_path: Path, small_disk: Path) -> None:
    name = "full"
    spec = write_spec(tmp_path, name, max_trials=4, parallelism=2)
    spec.write_text(spec.read_text().replace("max_failures: 0", "max_failures: 3"))
    db_file = tmp_path / "r.db"  # the database is on another disk than the work directory
    db = f"sqlite:///{db_file}"
    hold, runs = tmp_path / "hold", tmp_path / "runs.log"
    hold.touch()
    env = {"NASCTL_TEST_HOLD": str(hold), "NASCTL_TEST_RUNS": str(runs)}
    proc = start(["run", str(spec), "--db", db, "--workdir", str(small_disk), "--json"], tmp_path, env)
    try:
        wait_running(db, name, 2, proc, hold)
        ballast = small_disk / "ballast"
        _fill(ballast)
        hold.unlink()  # the two running trials now try to write their logs
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err  # stopped, not completed
    assert out, err
    summary = json.loads(out)["summary"]
    assert summary["status"] == "STOPPED", summary
    assert f"the work directory {small_disk / name} is full (0.0 MiB free, no space left on device)" in summary["reason"]
    assert f"nasctl resume {name}" in summary["reason"]

    trials = json.loads(run_cli("trials", name, "--db", db, "--json").stdout)
    status = {t["index"]: t["status"] for t in trials}
    # the loop stops at the first launch it would make onto the full disk. Trials 0
    # and 1 ended by then or are left RUNNING for the resume to re-attach; one that
    # ended failed (its own exit on the full disk: user) or is queued for its next
    # attempt (its launcher could not even record the exit: infrastructure)
    first = {status[0], status[1]}
    assert first <= {"FAILED", "RUNNING", "CANDIDATE"} and first != {"RUNNING"}, status
    for t in trials[:2]:
        if t["status"] == "FAILED":
            assert "no space left on device" in t["failure_reason"], t["failure_reason"]
        if t["status"] == "CANDIDATE":
            assert t["attempts"][0]["failure_class"] == "infrastructure", t["attempts"]
    assert all(s == "CANDIDATE" for i, s in status.items() if i >= 2), status
    assert sorted(runs.read_text().split()) == ["0", "1"]  # nothing was launched onto the full disk
    with sqlite3.connect(db_file) as c:
        assert c.execute("PRAGMA integrity_check").fetchone() == ("ok",)

    ballast.unlink()  # space freed
    res = run_cli("resume", name, "--db", db, "--json", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["summary"]["status"] == "COMPLETED"
    after = json.loads(run_cli("trials", name, "--db", db, "--json").stdout)
    expected = ["FAILED" if status[i] == "FAILED" else "COMPLETED" for i in (0, 1)] + ["COMPLETED", "COMPLETED"]
    assert [t["status"] for t in after] == expected, after
    # each attempt launched once. Retried: a trial queued for its next attempt at the
    # stop, and one left RUNNING whose launcher could not record its exit on the full
    # disk (the resume finds it ended without a record: infrastructure)
    launched = sorted(runs.read_text().split())
    assert launched == sorted(str(t["index"]) for t in after for _ in t["attempts"]), (launched, after)
    for t in after:
        assert all(a["failure_class"] == "infrastructure" for a in t["attempts"][:-1]), t["attempts"]
    assert all(len(t["attempts"]) == 2 for t in after if t["index"] < 2 and status[t["index"]] == "CANDIDATE")
