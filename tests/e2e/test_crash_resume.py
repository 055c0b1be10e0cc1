"""Fault injection: SIGKILL the orchestrator at chosen instants (each write-ahead
step, during candidate generation) and at random moments, resume each time, and
check that nothing was lost, duplicated or launched twice."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.helpers.resume import check_results, write_spec

pytestmark = pytest.mark.e2e

# Where each successive orchestrator dies: failpoints first (deterministic
# instants), then random moments. None = let it finish.
KILLS: list[str | float | None] = [
    "after_submit:2",            # job started, handle not yet recorded
    "after_record_candidate:1",  # proposal recorded, not submitted
    "during_generation:2",       # while the model is proposing
    "after_record_running:1",
    "after_finish_trial:1",      # result stored, optimizer not yet told
    "during_generation:1",
]


def _launch(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "nasctl", *args, "--json"], cwd=cwd,
                            env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_kill_nine_anywhere_then_resume(tmp_path: Path, db_url: str) -> None:
    name, max_trials = "crashy", 10
    spec = write_spec(tmp_path, name, max_trials=max_trials, parallelism=2, method="auto", initial=4)
    runs = tmp_path / "runs.log"
    base_env = {"NASCTL_TEST_RUNS": str(runs), "NASCTL_TEST_SLEEP": "0.7"}
    rng = random.Random(1234)
    plan: list[str | float | None] = [*KILLS, *[rng.uniform(1.0, 8.0) for _ in range(4)]]
    kills, finished = 0, False
    for attempt in range(len(plan) + 3):
        what = plan[attempt] if attempt < len(plan) else None
        env = dict(base_env)
        if isinstance(what, str):
            env["NASCTL_FAILPOINTS"] = what
        args = ["run", str(spec), "--db", db_url] if attempt == 0 else ["resume", name, "--db", db_url]
        proc = _launch(args, tmp_path, env)
        if isinstance(what, float):
            try:
                proc.wait(timeout=what)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
        if proc.returncode == -signal.SIGKILL:
            kills += 1
            if kills == 1:  # after a kill -9 the status says nobody drives it any more
                st = json.loads(run_cli("status", name, "--db", db_url, "--json").stdout)
                assert st["status"] == "NOT_RUNNING" and st["recorded_status"] == "RUNNING"
                assert st["orchestrator_alive"] is False
                assert "nasctl resume crashy" in run_cli("status", name, "--db", db_url).stdout
            continue
        assert proc.returncode == 0, (f"attempt {attempt} ({what}): rc={proc.returncode}\n{err}\n{out}\n"
                                      + run_cli("trials", name, "--db", db_url, "--status", "FAILED", "--json").stdout)
        finished = True
        break
    assert finished, "the experiment never completed"
    assert kills >= len(KILLS), f"only {kills} kills happened; the failpoints were not all reached"
    # let any trial re-attached at the very end flush its files before counting launches
    time.sleep(0.5)
    check_results(db_url, name, runs, max_trials)
