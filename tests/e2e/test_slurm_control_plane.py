"""The real Slurm cluster's control plane goes away under a running experiment:
its daemons are stopped by their pid files (scripts/slurm-local.sh stop) and
started again (`up`, safe beside jobs that kept running). The experiment waits:
no trial fails, none runs twice, nothing needs a manual resume, and trials that
ended during the outage keep their true durations."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from nasctl.types import TrialStatus
from tests.cluster import require_slurm
from tests.conftest import ROOT, run_cli
from tests.helpers.cli import start
from tests.helpers.slurm import scancel_experiment, slurm_states, trials, wait_until, write_spec

pytestmark = pytest.mark.e2e
SLURM = str(ROOT / "scripts" / "slurm-local.sh")


def slurm(*args: str) -> None:
    p = subprocess.run([SLURM, *args], capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, f"slurm-local.sh {' '.join(args)}: {p.stderr}"


@pytest.fixture(autouse=True)
def cluster_back_up() -> object:
    require_slurm()
    yield None
    slurm("up")  # whatever the test did, the next one finds every daemon running


def status(db: str, name: str) -> dict[str, object]:
    out: dict[str, object] = json.loads(run_cli("status", name, "--db", db, "--json").stdout)
    return out


def test_controller_and_accounting_down_while_trials_run_and_end(tmp_path: Path) -> None:
    name, db = "slurm-outage", f"sqlite:///{tmp_path}/o.db"
    runs = tmp_path / "runs.log"
    spec = write_spec(tmp_path, name, "resumable_trial.py", {"time": "10", "poll_interval": 1})
    proc = start(["run", str(spec), "--db", db, "--json"], tmp_path,
                 {"NASCTL_TEST_RUNS": str(runs), "NASCTL_TEST_SLEEP": "6"})
    try:
        def two_running() -> bool:
            # the trials' own processes have started: srun needs the controller to start a job step,
            # so a batch job that is RUNNING but has not yet started its step would fail without it
            running = trials(db, name, [TrialStatus.RUNNING])
            started = runs.read_text().split() if runs.exists() else []
            return len(running) == 2 and len(started) == 2 and set(slurm_states(running).values()) == {"RUNNING"}

        wait_until("two trials running as Slurm jobs", two_running, 120, proc)
        slurm("stop", "slurmctld", "slurmdbd")
        down_at = time.time()
        seen = wait_until("the outage in `nasctl status`", lambda: status(db, name)["scheduler_unreachable"], 60, proc)
        time.sleep(max(0.0, down_at + 20 - time.time()))  # both trials end (6 s) while nobody can be asked
        during = trials(db, name)
        slurm("up")
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        summary = json.loads(out)["summary"]
        assert summary["status"] == "COMPLETED"
    finally:
        if proc.poll() is None:
            proc.kill()
        scancel_experiment(db, name)
    assert seen["scheduler"] == "slurm" and "do not answer" in str(seen["error"])
    assert [t.status for t in during].count(TrialStatus.RUNNING) == 2  # still RUNNING, not failed or lost
    assert TrialStatus.FAILED not in [t.status for t in during]
    done = trials(db, name)
    assert [t.status for t in done] == [TrialStatus.COMPLETED] * 4
    assert sorted(runs.read_text().split(), key=int) == ["0", "1", "2", "3"]  # each trial ran once
    assert all(len(t.attempts) == 1 for t in done)
    for t in done[:2]:  # they ended ~6 s into a 20 s outage: their durations do not include it
        assert t.started_at and t.ended_at
        assert (t.ended_at - t.started_at).total_seconds() < 16, (t.index, t.started_at, t.ended_at)
    assert status(db, name)["scheduler_unreachable"] is None


def test_controller_down_while_candidates_wait_to_be_submitted(tmp_path: Path) -> None:
    name, db = "slurm-nosubmit", f"sqlite:///{tmp_path}/n.db"
    runs = tmp_path / "runs.log"
    spec = write_spec(tmp_path, name, "resumable_trial.py", {"time": "10", "poll_interval": 1}, max_trials=3)
    slurm("stop", "slurmctld")  # down before the first submission: every sbatch fails
    down_at = time.time()
    proc = start(["run", str(spec), "--db", db, "--json"], tmp_path,
                 {"NASCTL_TEST_RUNS": str(runs), "NASCTL_TEST_SLEEP": "2"})
    try:
        seen = wait_until("the outage in `nasctl status`", lambda: status(db, name)["scheduler_unreachable"], 120, proc)
        time.sleep(max(0.0, down_at + 30 - time.time()))
        during = trials(db, name)
        slurm("up")
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
        scancel_experiment(db, name)
    assert "controller does not answer" in str(seen["error"])
    assert [t.status for t in during] == [TrialStatus.CANDIDATE] * 2  # waiting, never FAILED
    done = trials(db, name)
    assert [t.status for t in done] == [TrialStatus.COMPLETED] * 3, [(t.status, t.failure_reason) for t in done]
    assert sorted(runs.read_text().split(), key=int) == ["0", "1", "2"]  # each submitted and run once
    assert json.loads(out)["summary"]["status"] == "COMPLETED"
