"""Attempts on the real local Slurm cluster (`scripts/slurm-local.sh up`), driven
through SlurmRunner: a job requeued by `scontrol requeue` runs again under its own
job id and resumes from the trial's checkpoint, while another submission of the
trial is still refused; a trial that exits 0 when Slurm ends its job (a scancel, the
time limit) is SUCCEEDED, also when accounting has the final state before the
trial has recorded its exit; and `runner.cfg.signal` warns the trial once before
its time limit.

The two time-limit jobs are submitted when the module starts (Slurm counts limits
in whole minutes) and checked by the last tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nasctl.runners.base import JobRequest, JobState, JobStatus, SubmittedJob
from nasctl.runners.launcher import EXIT, LAUNCH, read_json
from nasctl.runners.slurm import SlurmRunner, job_id_of
from nasctl.types import FailureClass
from tests.cluster import require_slurm

pytestmark = pytest.mark.e2e

CHECKPOINTING_TRIAL = """
import os, sys, time
resume = os.environ.get('NASCTL_RESUME_FROM')
print('run', os.environ.get('SLURM_RESTART_COUNT', '0'), 'resume', resume, flush=True)
if resume:
    print('resumed from', open(resume).read(), flush=True)
    sys.exit(0)
folder = os.environ['NASCTL_CHECKPOINT_DIR']
os.makedirs(folder, exist_ok=True)
with open(os.path.join(folder, 'last.ckpt.tmp'), 'w') as f:
    f.write('epoch 1')
os.replace(os.path.join(folder, 'last.ckpt.tmp'), os.path.join(folder, 'last.ckpt'))
time.sleep(300)
"""

# Slurm may send SIGTERM more than once (to the step, and through srun, which passes on its own);
# Python restores the default action while it exits, so a trial that means to end in good
# order ignores the ones that follow the first.
EXITS_0_AT_THE_TIME_LIMIT = """
import signal, sys, time
def saved(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print('time limit reached, results saved', flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, saved)
print('training', flush=True)
time.sleep(600)
"""

IGNORES_WARNINGS = """
import time
print('training', flush=True)
time.sleep(600)
"""

COUNTS_WARNINGS = """
import signal, sys, time
got = []
signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(signum))
print('training', flush=True)
while not got:
    time.sleep(0.1)
time.sleep(3)  # a second delivery of the same warning would land here
print('warnings:', len(got), flush=True)
sys.exit(0 if len(got) == 1 else 5)
"""


def request(tmp: Path, name: str, code: str, env: dict[str, str] | None = None) -> JobRequest:
    return JobRequest(name, sys.executable, ["-c", code], {"NASCTL_TRIAL_ID": "0", **(env or {})}, str(tmp / name))


def wait_status(runner: SlurmRunner, job: SubmittedJob, done: Any, timeout: float, what: str) -> JobStatus:
    deadline = time.monotonic() + timeout
    while not done(st := runner.status([job])[job.handle]):
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}; last {st}"
        time.sleep(0.5)
    return st


def squeue_state(job_id: str) -> str:
    p = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T|%r"], capture_output=True, text=True)
    return p.stdout.strip()


@pytest.fixture(scope="module")
def time_limit_jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, SubmittedJob]]:
    """Two jobs near their time limit: one whose trial exits 0 on Slurm's SIGTERM at a
    one-minute limit, one warned by `--signal=USR1@90` under a two-minute limit."""
    require_slurm()
    tmp = tmp_path_factory.mktemp("slurm-time-limits")
    jobs = {
        "timeout": SlurmRunner({"time": "1"}).submit(request(tmp, "slurm-exit0-timeout", EXITS_0_AT_THE_TIME_LIMIT)),
        "warned": SlurmRunner({"time": "2", "signal": "USR1@90"}).submit(request(tmp, "slurm-warned",
                                                                                 COUNTS_WARNINGS)),
        # a script that does not handle the warning: it must not die of it
        "unhandled": SlurmRunner({"time": "1", "signal": "USR1@50"}).submit(
            request(tmp, "slurm-unhandled", IGNORES_WARNINGS, {"NASCTL_CHECKPOINT_DIR": str(tmp / "unhandled-ckpt")})),
    }
    yield jobs
    for job in jobs.values():
        subprocess.run(["scancel", str(job_id_of(job.handle))], capture_output=True)


def test_a_requeued_job_runs_again_under_its_id_and_resumes_from_the_checkpoint(
        tmp_path: Path, time_limit_jobs: dict[str, SubmittedJob]) -> None:
    ckpt = tmp_path / "checkpoints"
    req = request(tmp_path, "slurm-requeue", CHECKPOINTING_TRIAL, {"NASCTL_CHECKPOINT_DIR": str(ckpt)})
    runner = SlurmRunner({"time": "5"})
    job = runner.submit(req)
    jid = str(job_id_of(job.handle))
    duplicate: SubmittedJob | None = None
    try:
        wait_status(runner, job, lambda st: st.state == JobState.RUNNING and (ckpt / "last.ckpt").exists(), 60,
                    "the first run to save its checkpoint")
        subprocess.run(["scontrol", "requeue", jid], check=True, capture_output=True)
        requeued = time.monotonic()
        seen: set[JobState] = set()
        deadline = requeued + 120
        while not (st := runner.status([job])[job.handle]).state.is_terminal:
            seen.add(st.state)
            # Slurm holds a requeued job ~2 min (BeginTime) so that the first run's job credential, revoked
            # with one-second resolution, cannot match the new one; a few seconds are enough here
            if time.monotonic() - requeued > 3 and squeue_state(jid) == "PENDING|BeginTime":
                subprocess.run(["scontrol", "update", f"jobid={jid}", "StartTime=now"], capture_output=True)
            assert time.monotonic() < deadline, f"the requeued job did not finish: {st}, {squeue_state(jid)}"
            time.sleep(0.5)
        assert JobState.PENDING in seen  # while requeued, the attempt waits: it has not failed
        assert st.state == JobState.SUCCEEDED and st.failure_class is None and st.node in ("node1", "node2"), st

        sdir = Path(job.metadata["state_dir"])
        launch = read_json(str(sdir / LAUNCH))
        assert launch is not None and launch["torchx_job_id"] == job.handle
        assert launch["resumed_from"] == str(ckpt / "last.ckpt")
        (earlier,) = launch["restarts"]
        assert earlier["exit"]["signal"] == "SIGTERM" and "cancelled" not in earlier["exit"]  # Slurm's, not nasctl's
        assert read_json(str(sdir / EXIT))["returncode"] == 0  # type: ignore[index]
        out = Path(job.metadata["stdout"]).read_text()
        assert "run 0 resume None" in out  # the first run's output survived the requeue (--open-mode=append)
        assert f"run 1 resume {ckpt / 'last.ckpt'}" in out and "resumed from epoch 1" in out
        assert f"restart 1 of job {job.handle}: resuming from {ckpt / 'last.ckpt'}" in runner.log_tail(job)

        # another job for the same trial is still refused, and reports the one real run
        duplicate = runner.submit(req)
        st = wait_status(runner, duplicate, lambda s: s.state.is_terminal, 60, "the duplicate job to end")
        assert st.state == JobState.SUCCEEDED
        assert "not running it twice" in Path(duplicate.metadata["stderr"]).read_text()
        assert out == Path(job.metadata["stdout"]).read_text()  # the trial did not run a third time
    finally:
        subprocess.run(["scancel", jid, *([str(job_id_of(duplicate.handle))] if duplicate else [])],
                       capture_output=True)


def test_a_trial_that_exits_0_at_its_time_limit_succeeded(time_limit_jobs: dict[str, SubmittedJob]) -> None:
    job, runner = time_limit_jobs["timeout"], SlurmRunner({})
    st = wait_status(runner, job, lambda s: s.state.is_terminal, 240, "the time limit")
    assert (st.state, st.failure_class, st.exit_code) == (JobState.SUCCEEDED, None, 0), st
    assert "TIMEOUT" in (st.message or "")  # Slurm's own final state, kept in the message
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", str(job_id_of(job.handle)), "-o", "State"],
                         capture_output=True, text=True).stdout.split()
    assert out == ["TIMEOUT"]
    assert "time limit reached, results saved" in runner.log_tail(job)


def test_the_signal_option_warns_the_trial_once_before_its_time_limit(
        time_limit_jobs: dict[str, SubmittedJob]) -> None:
    job, runner = time_limit_jobs["warned"], SlurmRunner({})
    st = wait_status(runner, job, lambda s: s.state.is_terminal, 240, "the warning")
    assert "warnings: 1" in runner.log_tail(job), runner.log_tail(job)
    assert (st.state, st.failure_class) == (JobState.SUCCEEDED, None), st
    done = json.loads((Path(job.metadata["state_dir"]) / EXIT).read_text())
    # a warning is no stop signal and no cancellation
    assert done == {"returncode": 0, "ended": done["ended"], "warned": ["SIGUSR1"]}


def test_a_trial_that_does_not_handle_the_warning_runs_to_its_time_limit(
        time_limit_jobs: dict[str, SubmittedJob]) -> None:
    """Slurm's --signal reaches every process of the step; a script without a handler is
    not killed by it (the launcher started it with the warning ignored) and ends at the
    time limit as `timeout`, never as an infrastructure failure "not sent by nasctl"."""
    job, runner = time_limit_jobs["unhandled"], SlurmRunner({})
    st = wait_status(runner, job, lambda s: s.state.is_terminal, 240, "the time limit")
    assert (st.state, st.failure_class) == (JobState.FAILED, FailureClass.TIMEOUT), st
    done = json.loads((Path(job.metadata["state_dir"]) / EXIT).read_text())
    assert done["warned"] == ["SIGUSR1"] and done["signal"] == "SIGTERM", done
    request_file = Path(job.metadata["state_dir"]).parent.parent / "unhandled-ckpt" / "checkpoint.request"
    assert json.loads(request_file.read_text())["signal"] == "SIGUSR1"
