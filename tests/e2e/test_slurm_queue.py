"""The cluster as its users see it, on the real local Slurm cluster
(`scripts/slurm-local.sh up`): a trial whose job waits in the queue is shown
queued with Slurm's reason, not running; a requeue is a restart of its attempt,
shown with whether it resumed or started over; a request no node can satisfy is
refused before anything is written; a job Slurm holds for a reason waiting
cannot clear ends `unschedulable` and leaves nothing in the queue.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nasctl.runners.base import JobRequest, JobState, JobStatus
from nasctl.runners.slurm import SlurmRunner, job_id_of, map_state, query_jobs
from nasctl.types import FailureClass, TrialStatus
from tests.cluster import require_slurm
from tests.conftest import run_cli
from tests.helpers.cli import start
from tests.helpers.slurm import trials, wait_until, write_spec

pytestmark = pytest.mark.e2e


def squeue(job_id: str) -> str:
    return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T|%r"], capture_output=True, text=True).stdout.strip()


def fill_the_nodes(tmp_path: Path) -> list[str]:
    """One job taking every CPU of each node: whatever comes next waits in the queue."""
    ids = [subprocess.run(["sbatch", "--parsable", "-N1", "--cpus-per-task=2", "--mem=100", f"--output={tmp_path}/f%j",
                           "--wrap", "sleep 600"], capture_output=True, text=True, check=True).stdout.strip()
           for _ in range(2)]
    wait_until("the filler jobs to run", lambda: all(squeue(j).startswith("RUNNING") for j in ids), 60)
    return ids


def last_attempt(db: str, name: str) -> dict | None:
    found = trials(db, name)
    return found[0].attempts[-1] if found and found[0].attempts else None


def test_a_queued_trial_shows_its_wait_then_runs_and_a_requeue_is_a_restart(tmp_path: Path) -> None:
    require_slurm()
    name, db = "slurm-queue", f"sqlite:///{tmp_path}/q.db"
    hold, runs = tmp_path / "hold", tmp_path / "runs.log"
    hold.touch()
    spec = write_spec(tmp_path, name, "resumable_trial.py", {"time": "10"}, max_trials=1, parallelism=1)
    fillers = fill_the_nodes(tmp_path)
    proc = None
    try:
        proc = start(["run", str(spec), "--db", db], tmp_path, {"NASCTL_TEST_HOLD": str(hold),
                                                                 "NASCTL_TEST_RUNS": str(runs)})
        waiting = wait_until("the trial to wait in Slurm's queue with a reason",
                             lambda: (a := last_attempt(db, name)) and a.get("pending_reason") and a, 180, proc)
        assert waiting["running_since"] is None and waiting["pending_reason"] in ("Resources", "Priority"), waiting
        status = json.loads(run_cli("status", name, "--db", db, "--json").stdout)
        assert (status["queued"], status["running"], status["trials"]["RUNNING"]) == (1, 0, 1), status
        (row,) = json.loads(run_cli("trials", name, "--db", db, "--json").stdout)
        assert row["queued"] is True and row["running_since"] is None and row["pending_reason"], row
        assert "QUEUED" in run_cli("trials", name, "--db", db).stdout

        subprocess.run(["scancel", *fillers], check=True)
        ran = wait_until("the trial to run", lambda: (a := last_attempt(db, name)) and a.get("running_since")
                         and runs.exists() and a, 90, proc)
        assert ran["queued_s"] > 0 and ran["node"] in ("node1", "node2"), ran
        assert json.loads(run_cli("status", name, "--db", db, "--json").stdout)["running"] == 1

        (t,) = trials(db, name)
        jid = str(job_id_of(t.job_handle or ""))
        subprocess.run(["scontrol", "requeue", jid], check=True)
        wait_until("the requeue to be seen as a restart", lambda: (a := last_attempt(db, name))
                   and a.get("restarts") and a["running_since"] is None, 60, proc)
        # Slurm holds a requeued job ~2 min (BeginTime); let it start now
        subprocess.run(["scontrol", "update", f"jobid={jid}", "StartTime=now"], check=True)
        nudged = [time.monotonic()]

        def ran_again() -> dict | None:
            a = last_attempt(db, name)
            if a and a.get("running_since") and a["restarts"][0].get("ran_again_at"):
                return a
            # On a loaded machine the update can land before the requeue has finished,
            # which then sets the hold again: release the job again while it still waits.
            if time.monotonic() - nudged[0] > 10 and "PENDING" in squeue(jid):
                nudged[0] = time.monotonic()
                subprocess.run(["scontrol", "update", f"jobid={jid}", "StartTime=now"], capture_output=True)
            return None

        # 180 s: on a loaded machine Slurm's next scheduling pass and the orchestrator's poll took longer than 90
        again = wait_until("the job to run again", ran_again, 180, proc)
        assert again["restarts"][0]["resumed_from"] is None  # this trial saves no checkpoint: it starts over
        hold.unlink()
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-3000:]
        assert "started over" in err, err[-3000:]  # nasctl's own output says it

        (t,) = trials(db, name)
        assert t.status == TrialStatus.COMPLETED and runs.read_text().split() == ["0", "0"]
        (a,) = t.attempts
        assert len(a["restarts"]) == 1 and a["restarts"][0]["node"] in ("node1", "node2")
        (row,) = json.loads(run_cli("trials", name, "--db", db, "--json").stdout)
        phases = [s["phase"] for s in row["attempts"][0]["segments"]]
        assert phases == ["queued", "running", "queued", "running"], row["attempts"][0]["segments"]
        wall = (t.ended_at - t.started_at).total_seconds()
        assert row["queued_s"] > 0 and row["duration_s"] + row["queued_s"] == pytest.approx(wall, abs=2.5), row
        assert row["restarts"] == 1 and row["queued"] is False
        shown = run_cli("trials", name, "--db", db, "--trial", "0").stdout
        assert "restart" in shown and "started over" in shown, shown
        events = json.loads(run_cli("export", name, "--db", db, "--format", "json").stdout)
        assert events["experiment"]["queued"] == 0 and events["trials"][0]["restarts"] == 1
    finally:
        subprocess.run(["scancel", *fillers], capture_output=True)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        for t in trials(db, name) if (tmp_path / "q.db").exists() else []:
            if t.job_handle:
                subprocess.run(["scancel", str(job_id_of(t.job_handle))], capture_output=True)


def test_a_waiting_job_has_the_controllers_reason_once_accounting_lists_it(tmp_path: Path) -> None:
    """Accounting records a job's reason when it is recorded ("None") and keeps it while
    the job waits; the controller's reason ("Resources") is the one the runner reports."""
    require_slurm()
    fillers = fill_the_nodes(tmp_path)
    jid = ""
    try:
        jid = subprocess.run(["sbatch", "--parsable", "-N1", "--cpus-per-task=1", "--mem=100",
                              f"--output={tmp_path}/w%j", "--wrap", "true"],
                             capture_output=True, text=True, check=True).stdout.strip()
        sacct = wait_until("accounting to list the waiting job", lambda: subprocess.run(
            ["sacct", "-X", "-n", "--parsable2", "-j", jid, "--format=State,Reason"],
            capture_output=True, text=True).stdout.strip(), 30)
        assert sacct.startswith("PENDING|"), sacct
        wait_until("the controller to give a reason", lambda: squeue(jid) in ("PENDING|Resources", "PENDING|Priority"),
                   30)
        record = query_jobs([jid])[jid]
        assert record.state == "PENDING" and record.reason in ("Resources", "Priority"), (record, sacct)
        assert map_state(record) == JobStatus(JobState.PENDING, record.reason)
    finally:
        subprocess.run(["scancel", *fillers, *([jid] if jid else [])], capture_output=True)


def test_a_request_no_node_can_satisfy_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    require_slurm()
    spec = write_spec(tmp_path, "too-big", "resumable_trial.py", {"time": "10"})
    spec.write_text(spec.read_text().replace("resources: {cpu: 1, mem_mb: 500", "resources: {cpu: 64, mem_mb: 500"))
    p = run_cli("run", str(spec), "--db", f"sqlite:///{tmp_path}/big.db")
    assert p.returncode == 2, p.stderr
    line = p.stderr.strip()
    assert "\n" not in line and "trial.resources.cpu asks for 64 CPUs" in line and "more than 2" in line, line
    assert not (tmp_path / "big.db").exists()  # nothing written
    spec.write_text(spec.read_text().replace("cpu: 64, mem_mb: 500", "cpu: 1, mem_mb: 500000"))
    p = run_cli("run", str(spec), "--db", f"sqlite:///{tmp_path}/big.db")
    assert p.returncode == 2 and "mem_mb asks for 500000 MB" in p.stderr and "more than 8000" in p.stderr, p.stderr


def test_a_job_slurm_holds_for_a_reason_waiting_cannot_clear_is_unschedulable(tmp_path: Path) -> None:
    """Submitted past the check (as a partition that shrank after submission would
    leave it): Slurm holds it PENDING (PartitionConfig); the runner ends it."""
    require_slurm()
    runner = SlurmRunner({"time": "5"})
    request = JobRequest("slurm-unschedulable", sys.executable, ["-c", "print('never')"], {"NASCTL_TRIAL_ID": "0"},
                         str(tmp_path / "t"), cpu=64)
    job = runner.submit(request)
    jid = str(job_id_of(job.handle))
    try:
        st = wait_until("Slurm to hold the job", lambda: (s := runner.status([job])[job.handle]).state
                        != JobState.PENDING and s, 60)
        assert (st.state, st.failure_class) == (JobState.FAILED, FailureClass.UNSCHEDULABLE), st
        assert "PartitionConfig" in (st.message or "") and "can never run" in (st.message or ""), st
        runner.cancel(job)
        wait_until("the job to leave the queue", lambda: not squeue(jid).startswith("PENDING"), 30)
    finally:
        subprocess.run(["scancel", jid], capture_output=True)


def test_a_run_whose_jobs_can_never_start_stops_and_leaves_nothing_in_the_queue(tmp_path: Path) -> None:
    """runner.cfg.time above the partition's time limit: Slurm accepts the jobs and holds
    them PENDING (PartitionTimeLimit) for good. The first poll that sees it ends the
    trial `unschedulable`; the experiment stops FAILED with that reason, the other queued
    job is cancelled, and no job of the experiment is left in Slurm's queue."""
    require_slurm()
    name, db = "slurm-never", f"sqlite:///{tmp_path}/n.db"
    spec = write_spec(tmp_path, name, "resumable_trial.py", {"time": "30"}, max_trials=4, parallelism=2)
    subprocess.run(["scontrol", "update", "PartitionName=debug", "MaxTime=10"], check=True)
    try:
        p = run_cli("run", str(spec), "--db", db, "--json", timeout=300, cwd=tmp_path)
    finally:
        subprocess.run(["scontrol", "update", "PartitionName=debug", "MaxTime=INFINITE"], check=True)
    assert p.returncode == 1, p.stderr[-2000:]
    summary = json.loads(p.stdout)["summary"]
    assert summary["status"] == "FAILED" and "can never run" in summary["reason"], summary
    # Slurm names the time limit (PartitionTimeLimit), or, seen once on a loaded machine for the same
    # jobs polled 0.2 s after submission, PartitionConfig: either way the reason is Slurm's, on one line
    assert ("PartitionTimeLimit" in summary["reason"] or "PartitionConfig" in summary["reason"]) and (
        "\n" not in summary["reason"]), summary["reason"]
    found = trials(db, name)
    classes = sorted(t.failure_class or "" for t in found)
    assert TrialStatus.RUNNING not in {t.status for t in found}, found
    assert "unschedulable" in classes and set(classes) <= {"unschedulable", "cancelled"}, classes
    ids = [str(job_id_of(t.job_handle)) for t in found if t.job_handle]
    assert ids and not any(squeue(j).startswith(("PENDING", "RUNNING")) for j in ids), [squeue(j) for j in ids]
