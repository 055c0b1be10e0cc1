"""nasctl experiments whose trials are jobs on the real local Slurm cluster
(`scripts/slurm-local.sh up`): crash and resume with re-attachment, a
two-process trial, and jobs that are cancelled or run past their time limit.

Each test drives the real `nasctl` CLI; trials are `sbatch` jobs that write
TensorBoard files to the test's directory (the same host, so a shared path).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nasctl.runners.base import JobRequest, SubmittedJob
from nasctl.runners.slurm import SlurmRunner, job_id_of
from nasctl.types import TrialRecord, TrialStatus
from tests.cluster import require_slurm
from tests.conftest import run_cli
from tests.helpers.cli import start
from tests.helpers.slurm import scancel_experiment, slurm_states, trials, wait_until, write_spec

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", autouse=True)
def time_limit_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """An experiment whose only trial outlives its one-minute Slurm time limit.

    Slurm counts time limits in whole minutes, so it is started before the other
    tests of this module and checked by the last one.
    """
    require_slurm()
    d = tmp_path_factory.mktemp("slurm-time-limit")
    name, db = "slurm-time-limit", f"sqlite:///{d}/t.db"
    spec = write_spec(d, name, "resumable_trial.py", {"time": "1"}, max_trials=1, parallelism=1)
    proc = start(["run", str(spec), "--db", db, "--json"], d, {"NASCTL_TEST_SLEEP": "600"})
    yield proc, db, name
    if proc.poll() is None:
        proc.kill()
        proc.communicate()
    scancel_experiment(db, name)


def test_orchestrator_killed_mid_run_and_resume_reattaches_slurm_jobs(tmp_path: Path) -> None:
    name, db = "slurm-crash", f"sqlite:///{tmp_path}/c.db"
    hold, runs = tmp_path / "hold", tmp_path / "runs.log"
    hold.touch()
    env = {"NASCTL_TEST_HOLD": str(hold), "NASCTL_TEST_RUNS": str(runs)}
    spec = write_spec(tmp_path, name, "resumable_trial.py", {"time": "10"})
    try:
        proc = start(["run", str(spec), "--db", db], tmp_path, env)

        def two_running_jobs() -> list[TrialRecord] | None:
            running = trials(db, name, [TrialStatus.RUNNING])
            started = runs.read_text().split() if runs.exists() else []
            ok = len(running) == 2 and len(started) == 2 and set(slurm_states(running).values()) == {"RUNNING"}
            return running if ok else None

        running = wait_until("two trials running as Slurm jobs", two_running_jobs, 120, proc)
        handles = {t.index: t.job_handle for t in running}
        proc.kill()  # SIGKILL: no cleanup of any kind
        proc.communicate()
        assert set(slurm_states(running).values()) == {"RUNNING"}, "the Slurm jobs died with the orchestrator"

        resumed = start(["resume", name, "--db", db, "--json"], tmp_path, env)
        wait_until("the resumed orchestrator to take the lease",
                   lambda: json.loads(run_cli("status", name, "--db", db, "--json").stdout).get("lease_owner"),
                   60, resumed)
        assert set(slurm_states(running).values()) == {"RUNNING"}  # re-attached while they still run
        hold.unlink()
        out, err = resumed.communicate(timeout=180)
        assert resumed.returncode == 0, err
        assert json.loads(out)["summary"]["reattached"] == 2

        done = trials(db, name)
        assert [t.status for t in done] == [TrialStatus.COMPLETED] * 4, [(t.status, t.failure_reason) for t in done]
        assert sorted(runs.read_text().split(), key=int) == ["0", "1", "2", "3"], "a trial ran twice or never"
        assert {t.index: t.job_handle for t in done if t.index in handles} == handles
        for t in done:
            assert t.scheduler == "slurm" and t.job_handle and t.job_handle.startswith("slurm://")
            x, y = float(t.parameters["x"]), float(t.parameters["y"])
            assert t.values["f1"] == pytest.approx(x, rel=1e-5)
            assert t.values["f2"] == pytest.approx(1 - math.sqrt(x) + y, rel=1e-5)
            tail = SlurmRunner({}).log_tail(SubmittedJob(t.job_handle, t.runner_metadata))
            assert f"trial {t.index} done" in tail
        assert set(slurm_states(done).values()) == {"COMPLETED"}
    finally:
        scancel_experiment(db, name)


def test_two_process_ddp_trial_on_slurm(tmp_path: Path) -> None:
    name, db = "slurm-ddp", f"sqlite:///{tmp_path}/d.db"
    spec = write_spec(tmp_path, name, "ddp_trial.py", {"nproc_per_node": 2, "time": "5"}, max_trials=1,
                      parallelism=1)
    try:
        plan = run_cli("run", str(spec), "--db", db, "--dryrun", "--json", cwd=tmp_path)
        assert plan.returncode == 0, plan.stderr
        script = json.loads(plan.stdout)["request"]
        assert "--cpus-per-task=2" in script and "torch.distributed.run" in script and "--nproc_per_node 2" in script
        result = run_cli("run", str(spec), "--db", db, "--json", cwd=tmp_path, timeout=240)
        assert result.returncode == 0, result.stderr
        (t,) = trials(db, name)
        assert t.status == TrialStatus.COMPLETED, t.failure_reason
        detail = json.loads(run_cli("trials", name, "--db", db, "--trial", "0", "--json").stdout)
        assert detail["curves"]["world_size"] == [[1, 2.0]]
        assert detail["curves"]["rank_sum"] == [[1, 1.0]]  # ranks 0 + 1 all-reduced
        tail = SlurmRunner({}).log_tail(SubmittedJob(t.job_handle or "", t.runner_metadata))
        assert "rank 0 of 2" in tail and "rank 1 of 2" in tail
    finally:
        scancel_experiment(db, name)


def test_a_persons_scancel_abandons_its_trial_without_failing_the_experiment(tmp_path: Path) -> None:
    name, db = "slurm-cancel", f"sqlite:///{tmp_path}/x.db"
    hold = tmp_path / "hold"
    hold.touch()
    # max_failures 0: a cancellation is not a failure, so the experiment still completes
    spec = write_spec(tmp_path, name, "resumable_trial.py", {"time": "10"}, max_trials=2, max_failures=0)
    try:
        proc = start(["run", str(spec), "--db", db, "--json"], tmp_path, {"NASCTL_TEST_HOLD": str(hold)})
        running = wait_until("two running Slurm jobs", lambda: (r := trials(db, name, [TrialStatus.RUNNING]))
                             and len(r) == 2 and set(slurm_states(r).values()) == {"RUNNING"} and r, 120, proc)
        victim = next(t for t in running if t.index == 0)
        subprocess.run(["scancel", str(job_id_of(victim.job_handle or ""))], check=True)
        wait_until("the cancelled trial to end", lambda: trials(db, name, [TrialStatus.ABANDONED]), 60, proc)
        hold.unlink()
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out[-2000:]
        by_index = {t.index: t for t in trials(db, name)}
        assert by_index[0].status == TrialStatus.ABANDONED and by_index[0].failure_class == "cancelled"
        assert "cancelled outside nasctl" in (by_index[0].failure_reason or ""), by_index[0].failure_reason
        assert slurm_states([by_index[0]])[0].startswith("CANCELLED")
        assert by_index[1].status == TrialStatus.COMPLETED, by_index[1].failure_reason
    finally:
        scancel_experiment(db, name)


def test_slurm_job_past_its_time_limit_fails_its_trial(time_limit_run: tuple[subprocess.Popen[str], str, str]) -> None:
    proc, db, name = time_limit_run
    out, err = proc.communicate(timeout=240)
    (t,) = trials(db, name)
    assert t.status == TrialStatus.FAILED, (t.status, out, err)
    assert "TIMEOUT" in (t.failure_reason or "") and "runner.cfg.time" in (t.failure_reason or ""), t.failure_reason
    assert slurm_states([t])[0] == "TIMEOUT"


def test_find_recognises_a_queued_job_that_was_never_recorded(tmp_path: Path) -> None:
    """A crash between sbatch and recording the job, while the job still waits in the queue."""
    req = JobRequest("slurm-find-7", sys.executable, ["-c", "print('ran')"], {"NASCTL_TRIAL_ID": "7"},
                     str(tmp_path / "trial_0007"))
    runner = SlurmRunner({"time": "5"})
    # the partition is closed while the job is submitted, so it is certain to wait in the queue
    subprocess.run(["scontrol", "update", "PartitionName=debug", "State=DOWN"], check=True, capture_output=True)
    jid = ""
    try:
        job = runner.submit(req)
        jid = str(job_id_of(job.handle))
        other = SlurmRunner({}).find(JobRequest("slurm-find-7", sys.executable, [], {}, str(tmp_path / "elsewhere")))
        assert other is None  # same name, different trial directory: not this trial's job
        found = SlurmRunner({}).find(req)  # a fresh runner, as in a restarted orchestrator
        assert found is not None and found.handle == job.handle
        assert SlurmRunner({}).status([found])[found.handle].state.value == "PENDING"
        subprocess.run(["scontrol", "update", "PartitionName=debug", "State=UP"], check=True, capture_output=True)
        deadline = time.monotonic() + 60
        while not (st := runner.status([found])[found.handle]).state.is_terminal:
            assert time.monotonic() < deadline
            time.sleep(0.25)
        assert st.state.value == "SUCCEEDED" and "ran" in runner.log_tail(found)
    finally:
        subprocess.run(["scontrol", "update", "PartitionName=debug", "State=UP"], capture_output=True)
        if jid:
            subprocess.run(["scancel", jid], capture_output=True)
