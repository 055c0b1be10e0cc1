"""Retries with real local trials: an attempt killed by an outsider runs again from
its checkpoint, a user failure does not, and a crash of the orchestrator in the
middle of a retry neither loses the attempt nor runs it twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).parent / "scripts" / "retry_trial.py"


def write_spec(tmp_path: Path, name: str, trial: str = "") -> Path:
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(
        f"name: {name}\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize}, f2: {goal: minimize}}\n"
        "budget: {max_trials: 1, parallelism: 1, max_failures: 0}\n"
        f"trial: {{script: {SCRIPT}, preload: false{', ' + trial if trial else ''}}}\n"
        "runner: {scheduler: local_cwd}\n"
        "optimizer: {method: sobol, initial_trials: 1, seed: 3}\n"
    )
    return spec


def start(spec: Path, db: str, tmp_path: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "nasctl", "run", str(spec), "--db", db, "--json"],
                            cwd=tmp_path, env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def first_attempt_process(tmp_path: Path, timeout: float = 120.0) -> psutil.Process:
    """The training process of trial 0's first attempt, once it has saved its checkpoint."""
    trial = tmp_path / "nasctl_runs"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ckpts = list(trial.glob("*/trials/trial_0000/checkpoints/last.ckpt"))
        launches = list(trial.glob("*/trials/trial_0000/job/launch.json"))
        if ckpts and launches:
            info = json.loads(launches[0].read_text())
            if info.get("child_pid"):
                return psutil.Process(int(info["child_pid"]))
        time.sleep(0.05)
    raise AssertionError("the first attempt never saved its checkpoint")


def trial0(db: str, name: str) -> dict[str, Any]:
    rows = json.loads(run_cli("trials", name, "--db", db, "--json").stdout)
    assert len(rows) == 1
    return rows[0]


def events(db: str, name: str) -> list[str]:
    from nasctl.store import Store

    store = Store(db)
    try:
        return [e.message for e in store.events(store.get_experiment(name).id, limit=1000, kinds=["retry"])]
    finally:
        store.close()


def test_an_attempt_killed_by_an_outsider_runs_again_from_its_checkpoint(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    proc = start(write_spec(tmp_path, "killed"), db, tmp_path, NASCTL_TEST_RELEASE=str(tmp_path / "never"))
    try:
        first_attempt_process(tmp_path).send_signal(signal.SIGKILL)  # not nasctl's doing: infrastructure
        out, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    t = trial0(db, "killed")
    assert t["status"] == "COMPLETED" and t["values"]["resumed"] == 1.0
    assert [a["number"] for a in t["attempts"]] == [1, 2]
    assert t["attempts"][0]["failure_class"] == "infrastructure" and t["attempts"][0]["ended_at"]
    assert t["attempts"][1]["failure_class"] is None and t["failure_class"] is None
    (msg,) = events(db, "killed")
    assert "attempt 1 ended (infrastructure" in msg and "from its checkpoint" in msg
    tdir = Path(t["log_dir"])
    assert (tdir / "job" / "exit.json").is_file() and (tdir / "job-a2" / "exit.json").is_file()  # each kept
    summary = json.loads(out)["summary"]
    assert summary["status"] == "COMPLETED" and summary["trials"]["FAILED"] == 0


def test_a_user_failure_is_not_retried(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'u.db'}"
    proc = start(write_spec(tmp_path, "broken", trial="max_retries: 5"), db, tmp_path, NASCTL_TEST_EXIT="3")
    proc.communicate(timeout=180)
    t = trial0(db, "broken")
    assert t["status"] == "FAILED" and t["failure_class"] == "user"
    assert len(t["attempts"]) == 1 and t["attempts"][0]["failure_class"] == "user"
    assert events(db, "broken") == []


def test_no_retries_left_ends_the_trial_with_its_class(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'n.db'}"
    proc = start(write_spec(tmp_path, "once", trial="max_retries: 0"), db, tmp_path,
                 NASCTL_TEST_RELEASE=str(tmp_path / "never"))
    try:
        first_attempt_process(tmp_path).send_signal(signal.SIGKILL)
        proc.communicate(timeout=180)
    finally:
        proc.kill()
    t = trial0(db, "once")
    assert t["status"] == "FAILED" and t["failure_class"] == "infrastructure" and len(t["attempts"]) == 1


def test_a_crash_in_the_middle_of_a_retry_neither_loses_nor_repeats_an_attempt(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'c.db'}"
    spec = write_spec(tmp_path, "crash")
    proc = start(spec, db, tmp_path, NASCTL_TEST_RELEASE=str(tmp_path / "never"), NASCTL_FAILPOINTS="during_retry:1")
    try:
        first_attempt_process(tmp_path).send_signal(signal.SIGKILL)
        proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGKILL  # the orchestrator died after storing the ended attempt
    t = trial0(db, "crash")
    assert t["status"] == "RUNNING" and t["attempts"][0]["ended_at"]
    res = run_cli("resume", "crash", "--db", db, "--json", cwd=tmp_path,
                  env={**os.environ, "NASCTL_TEST_RELEASE": str(tmp_path / "never")})
    assert res.returncode == 0, res.stderr
    t = trial0(db, "crash")
    assert t["status"] == "COMPLETED" and [a["number"] for a in t["attempts"]] == [1, 2]
    assert t["values"]["resumed"] == 1.0
    tdir = Path(t["log_dir"])
    assert not (tdir / "job-a3").exists()
    assert len(events(db, "crash")) == 1
